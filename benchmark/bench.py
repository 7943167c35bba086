"""Throughput benchmark: the harness against a bare PyTorch loop, and every method against dense.

    python -m benchmark.bench                       # ResNet-56, batch 128, CPU: bare vs harness
    python -m benchmark.bench --methods all         # also each method's images/s relative to dense
    python -m benchmark.bench --device cuda --iters 200   # on a GPU: steps are short

Prints figures; asserts nothing (speed targets live here, never in timed tests).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor, nn

from benchmark.config import RunConfig, config_from_dict
from benchmark.data import DATASETS, DataSource
from benchmark.models import build_model
from benchmark.pruning import compute_masks
from benchmark.trainer import (
    TIMING_WARMUP_ITERS,
    Trainer,
    configure_kernels,
    resolve_device,
    sync,
)
from benchmark.validation import validate

SYNTHETIC = "bench-synthetic"


class SyntheticSource(DataSource):
    """Fixed random CIFAR-shaped batches already on the device (no loading, no augmentation)."""

    def __init__(self, batches: list[tuple[Tensor, Tensor]], num_classes: int) -> None:
        self.name = SYNTHETIC
        self.num_classes = num_classes
        self.input_shape = tuple(batches[0][0].shape[1:])  # type: ignore[assignment]
        self.batch_size = batches[0][0].shape[0]
        self.eval_batch_size = self.batch_size
        self.num_train = self.batch_size * len(batches)
        self.num_val = self.num_test = self.batch_size
        self.device = batches[0][0].device
        self.batches = batches

    def train_batches(self, epoch: int, seed: int) -> Iterator[tuple[Tensor, Tensor]]:
        """The same batches every epoch."""
        yield from self.batches

    def eval_batches(self, split: str) -> Iterator[tuple[Tensor, Tensor]]:
        """One batch for every split."""
        yield self.batches[0]

    def _example_inputs(self, n: int) -> Tensor:
        return self.batches[0][0][:n]


def make_batches(
    n: int, batch: int, shape: Sequence[int], classes: int, device: torch.device
) -> list[tuple[Tensor, Tensor]]:
    """``n`` seeded random batches on ``device``."""
    g = torch.Generator().manual_seed(0)
    return [
        (
            torch.randn(batch, *shape, generator=g).to(device),
            torch.randint(classes, (batch,), generator=g).to(device),
        )
        for _ in range(n)
    ]


def bare_loop(model_name: str, batches: list[tuple[Tensor, Tensor]], classes: int) -> float:
    """Images/s of a plain PyTorch SGD loop (same warm-up exclusion as the harness)."""
    torch.manual_seed(0)
    device = batches[0][0].device
    model = build_model(model_name, classes, tuple(batches[0][0].shape[1:])).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    images, start = 0, 0.0
    for i, (x, y) in enumerate(batches):
        if i == TIMING_WARMUP_ITERS:
            sync(device)
            start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = 0.1
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= TIMING_WARMUP_ITERS:
            images += x.shape[0]
    sync(device)
    return images / (time.perf_counter() - start)


def bench_config(
    model_name: str,
    method: dict,
    batch: int,
    runtime: dict,
    budget: dict | None = None,
) -> RunConfig:
    """A config on the synthetic data for ``method`` (one epoch unless ``budget`` says)."""
    cfg = config_from_dict(
        {
            "data": {"name": SYNTHETIC, "batch_size": batch},
            "model": {"name": model_name},
            "schedule": {"name": "constant", "lr": 0.1},
            "budget": budget or {"epochs": 1},
            "method": method,
            "logging": {"progress": False},
            "runtime": runtime,
        }
    )
    validate(cfg)
    return cfg


def harness(cfg: RunConfig, masked_sparsity: float | None = None) -> float:
    """Images/s of the harness's training loop for one epoch (optionally with a hard mask)."""
    trainer = Trainer(cfg)
    if masked_sparsity is not None:
        masks = compute_masks("global", trainer.ctx.prunable, masked_sparsity)
        trainer.method.hard_prune(masks)
    trainer.train_epoch(0)
    return trainer.state.throughput.images_per_s


def main(argv: Sequence[str] | None = None) -> None:
    """Print images/s for a bare loop, the dense harness, the masked harness and methods."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet56")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--iters", type=int, default=12, help="timed iterations per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default="", help="comma-separated method names, or 'all'")
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (CUDA if present)")
    parser.add_argument("--deterministic", action="store_true", help="reproducible GPU kernels")
    args = parser.parse_args(argv)

    classes = 10
    try:
        device = resolve_device(args.device)
    except RuntimeError:
        parser.error(f"--device = {args.device!r} is invalid; allowed: auto, cpu, cuda, cuda:N")
    args.runtime = {"device": str(device), "deterministic": args.deterministic}
    configure_kernels(device, args.deterministic)  # the bare loop gets the same kernels
    shape = (3, 32, 32)
    batches = make_batches(args.iters + TIMING_WARMUP_ITERS, args.batch, shape, classes, device)
    DATASETS.add(SYNTHETIC, lambda cfg, device: SyntheticSource(batches, classes))
    dense = bench_config(args.model, {"name": "dense"}, args.batch, args.runtime)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"model {args.model}, batch {args.batch}, {args.iters} timed iterations, {where}, "
        f"{torch.get_num_threads()} threads, median of {args.repeats}"
        + (", deterministic kernels" if args.deterministic else "")
    )
    runs: dict[str, list[float]] = {"bare loop": [], "harness dense": [], "harness + masks": []}
    for _ in range(args.repeats):  # interleaved, so drifts in machine load hit all three
        runs["bare loop"].append(bare_loop(args.model, batches, classes))
        runs["harness dense"].append(harness(dense))
        runs["harness + masks"].append(harness(dense, masked_sparsity=0.9))
    med = {k: statistics.median(v) for k, v in runs.items()}
    for name, value in med.items():
        print(f"{name:18s} {value:9.1f} images/s")
    bare, plain, masked = med["bare loop"], med["harness dense"], med["harness + masks"]
    print(f"harness overhead over the bare loop: {100 * (bare / plain - 1):+.1f}% time")
    print(f"mask application overhead:          {100 * (plain / masked - 1):+.1f}% time")
    if args.methods:
        _bench_methods(args)


METHOD_EPOCHS = 4


def _bench_methods(args: argparse.Namespace) -> None:
    """Each method's training images/s over a short full run, relative to dense training."""
    from methods import METHODS, load_methods

    load_methods()
    names = METHODS.names() if args.methods == "all" else args.methods.split(",")
    # imp/renda retrain a dense parent with a hard mask (the "harness + masks" loop); bimp below
    # covers that loop within one run.
    names = [n for n in names if n not in ("imp", "renda")]
    print(f"\n{METHOD_EPOCHS}-epoch runs")
    print(f"{'method':10s} {'images/s':>9s} {'vs dense':>9s}")
    results = {}
    for name in ["dense", *[n for n in names if n != "dense"]]:
        budget = {"epochs": METHOD_EPOCHS}
        if name == "bimp":
            budget.update(initial_epochs=METHOD_EPOCHS // 2, cycles=2)
        cfg = bench_config(args.model, {"name": name}, args.batch, args.runtime, budget)
        trainer = Trainer(cfg)
        trainer.fit()
        results[name] = trainer.state.throughput.images_per_s
        print(f"{name:10s} {results[name]:9.1f} {results[name] / results['dense']:9.2f}")


if __name__ == "__main__":
    main()
