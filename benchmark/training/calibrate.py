"""``prunebench calibrate``: a short timed run of each model, for cost estimates on a device.

Each measurement trains the model with the harness's own trainer, as a run of it would: the
run's runtime defaults (captured CUDA-graph steps and channels_last where the device allows
them), the precision asked for (``optim.bf16``, ``optim.fp16``), the dataset's input shape,
classes and the batch size of the plan. Only the data is synthetic: one fixed batch on the
device, so that no dataset files are needed and loading is not timed (CIFAR lives on the device
anyway). The images per second exclude warm-up iterations and capture time exactly as a run's
record does, and on a GPU the peak device memory is recorded too. The results go to the store's
calibration file (``benchmark.store.calibration``), which cost estimates read when the store
holds no finished run of the same model, dataset, precision and device.
"""

from __future__ import annotations

import datetime
import statistics
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from benchmark.config.parse import config_from_dict
from benchmark.core.errors import ConfigError
from benchmark.data.base import DATASETS, DataSource
from benchmark.store.calibration import Calibration
from benchmark.training.loop import TIMING_WARMUP_ITERS
from benchmark.training.trainer import Trainer, resolve_device
from benchmark.training.validation import validate

SYNTHETIC = "calibration-synthetic"
# Input shape, classes and the paper's batch size of each image-classification dataset.
DATASET_INPUTS: dict[str, tuple[tuple[int, int, int], int, int]] = {
    "digits": ((1, 8, 8), 10, 128),
    "cifar10": ((3, 32, 32), 10, 128),
    "cifar100": ((3, 32, 32), 100, 128),
    "imagenet": ((3, 224, 224), 1000, 256),
}
# The dataset the paper trains each model on (``--models resnet56`` means resnet56:cifar10).
MODEL_DATASET = {
    "resnet56": "cifar10",
    "resnet18": "cifar10",
    "vgg16": "cifar10",
    "wrn28_10": "cifar100",
    "resnet50": "imagenet",
    "maxvit_t": "imagenet",
    "cnn_small": "digits",
    "cnn_wide": "digits",
}
# Iterations beyond the timed ones: the timing warm-up and, on a GPU, the eager iterations
# before the first capture (their images are not counted either).
EXTRA_ITERATIONS = TIMING_WARMUP_ITERS + 2


@dataclass(frozen=True)
class Target:
    """One model to time, on the inputs of one dataset."""

    model: str
    dataset: str


def parse_targets(text: str) -> list[Target]:
    """``resnet56,wrn28_10:cifar100`` -> targets; a model alone takes its paper dataset."""
    from benchmark.models.registry import MODELS

    out = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        model, _, dataset = word.partition(":")
        if model not in MODELS:
            raise ConfigError(
                "--models", model, "models of prunebench: " + ", ".join(MODELS.names())
            )
        dataset = dataset or MODEL_DATASET.get(model, "")
        if dataset not in DATASET_INPUTS:
            raise ConfigError(
                "--models",
                word,
                "MODEL or MODEL:DATASET with an image-classification dataset: "
                + ", ".join(DATASET_INPUTS)
                + " (time other tasks with one epoch of a real run: its record is used)",
            )
        out.append(Target(model, dataset))
    if not out:
        raise ConfigError("--models", text, "comma-separated model names, e.g. resnet56,wrn28_10")
    return out


class _OneBatch(DataSource):
    """The same seeded batch, ``iterations`` times an epoch, already on the device."""

    def __init__(self, x: Tensor, y: Tensor, classes: int, iterations: int) -> None:
        self.name = SYNTHETIC
        self.num_classes = classes
        self.input_shape = tuple(x.shape[1:])  # type: ignore[assignment]
        self.batch_size = self.eval_batch_size = x.shape[0]
        self.num_train = x.shape[0] * iterations
        self.num_val = self.num_test = x.shape[0]
        self.device = x.device
        self.batch = (x, y)
        self.iterations = iterations

    def train_batches(self, epoch: int, seed: int) -> Iterator[tuple[Tensor, Tensor]]:
        for _ in range(self.iterations):
            yield self.batch

    def eval_batches(self, split: str) -> Iterator[tuple[Tensor, Tensor]]:
        yield self.batch

    def _example_inputs(self, n: int) -> Tensor:
        return self.batch[0][:n]


def device_label(device: torch.device) -> str:
    """``cpu`` or ``cuda (NVIDIA H200)``, as estimates name devices."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type


def measure(
    target: Target,
    device: str,
    *,
    precision: str = "fp32",
    batch: int | None = None,
    steps: int = 50,
    threads: int = 0,
    command: str = "",
    repeats: int = 3,
    array: int = 1,
    layout: str | None = None,
) -> Calibration:
    """Time ``steps`` training iterations of ``target`` on ``device`` (after the warm-up),
    ``repeats`` times with fresh trainers each; keeps the median and every timing. With ``array``
    > 1, of that many runs trained as one array model in ``layout`` (None: the device's default)
    (images/s of all of them)."""
    timings, peak, used, chosen = [], None, 0, ""
    for _ in range(repeats):
        rate, peak, used, chosen = _time_once(
            target, device, precision, batch, steps, threads, array, layout
        )
        timings.append(rate)
    shape, classes, paper_batch = DATASET_INPUTS[target.dataset]
    dev = resolve_device(device)
    batch = batch or paper_batch
    return Calibration(
        model=target.model,
        dataset=target.dataset,
        precision=precision,
        device=device_label(dev),
        images_per_s=statistics.median(timings),
        batch_size=batch,
        timed_iterations=steps,
        peak_memory_bytes=peak,
        measured=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        torch=torch.__version__,
        command=command,
        threads=used,
        timings=tuple(timings),
        array=array,
        layout=chosen,
    )


def _time_once(
    target: Target,
    device: str,
    precision: str,
    batch: int | None,
    steps: int,
    threads: int,
    array: int = 1,
    layout: str | None = None,
) -> tuple[float, int | None, int, str]:
    """One timing: (images/s, peak device memory or None, torch threads used, the array's
    layout or "")."""
    chosen = ""
    shape, classes, paper_batch = DATASET_INPUTS[target.dataset]
    batch = batch or paper_batch
    dev = resolve_device(device)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(batch, *shape, generator=g).to(dev)
    y = torch.randint(classes, (batch,), generator=g).to(dev)
    source = _OneBatch(x, y, classes, steps + EXTRA_ITERATIONS)
    DATASETS.replace(SYNTHETIC, lambda cfg, device: source)
    try:
        with tempfile.TemporaryDirectory(prefix="prunebench-calibrate-") as tmp:
            cfg = config_from_dict(
                {
                    "data": {"name": SYNTHETIC, "batch_size": batch},
                    "model": {"name": target.model},
                    "method": {"name": "dense"},
                    "budget": {"epochs": 1},
                    "schedule": {"name": "constant", "lr": 0.1},
                    "optim": {p: True for p in ("bf16", "fp16") if p == precision},
                    "logging": {"progress": False},
                    "runtime": {"device": str(dev), "threads": threads},
                    "output": {"dir": tmp},
                }
            )
            validate(cfg)
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats(dev)
            trainers = [Trainer(cfg) for _ in range(array)]
            used = torch.get_num_threads()
            if array > 1:
                from benchmark.training.array.fit import (
                    ArrayStep,
                    RngState,
                    array_epoch,
                    why_not_together,
                )
                from benchmark.training.array.stack import default_layout

                why = why_not_together(trainers)
                if why:  # such runs train packed: an array rate of them would never be used
                    raise ConfigError("--array", array, f"1 for {target.model} ({why})")
                chosen = layout or default_layout(dev.type, trainers[0].model)
                ArrayStep(trainers, chosen)
                array_epoch(trainers, 0, [RngState.capture(dev) for _ in trainers])
            else:
                trainers[0].train_epoch(0)
            trainers[0].wait()
            throughput = trainers[0].state.throughput
    finally:
        DATASETS.discard(SYNTHETIC)
    peak = int(torch.cuda.max_memory_allocated(dev)) if dev.type == "cuda" else None
    # An array's runs share one wall-clock: the array's rate is each run's times K.
    return throughput.images_per_s * array, peak, used, chosen


def calibrate(
    targets: Sequence[Target],
    device: str,
    *,
    precisions: Sequence[str] = ("fp32",),
    batch: int | None = None,
    steps: int = 50,
    threads: int = 0,
    command: str = "",
    repeats: int = 3,
    array: int = 1,
    layout: str | None = None,
) -> list[Calibration]:
    """One measurement (of ``repeats`` timings) per target and precision (of arrays of
    ``array`` runs in ``layout`` when > 1)."""
    return [
        measure(
            t,
            device,
            precision=p,
            batch=batch,
            steps=steps,
            threads=threads,
            command=command,
            repeats=repeats,
            array=array,
            layout=layout,
        )
        for t in targets
        for p in precisions
    ]
