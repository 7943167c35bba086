"""Throughput benchmark: the harness against a bare PyTorch loop, every method against dense,
before (eager steps) and after (captured CUDA graphs, channels_last, bf16) side by side.

    python -m benchmark.bench                       # ResNet-56, batch 128, CPU: bare vs harness
    python -m benchmark.bench --methods all         # also each method's images/s relative to dense
    python -m benchmark.bench --device cuda --methods all --models resnet18,vgg16,wrn28_10,resnet50
    python -m benchmark.bench --ops --methods str,cs,dst   # operations per iteration (any device)

On CUDA every figure is printed for three modes: ``eager`` (``runtime.cuda_graphs = "off"``,
fp32, NCHW: the harness before the fast path), ``fast`` (the defaults: captured steps and
channels_last, fp32) and ``fast-bf16`` (the same with ``optim.bf16 = true``). Prints figures;
asserts nothing (speed targets live here, never in timed tests).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import Tensor, nn

from benchmark.config.parse import config_from_dict
from benchmark.config.run import RunConfig
from benchmark.data.base import DATASETS, DataSource
from benchmark.models.registry import build_model
from benchmark.pruning import compute_masks
from benchmark.training.fast_step import EAGER_WARMUP_ITERS, CudaGraphBackend, DeviceLearningRates
from benchmark.training.loop import TIMING_WARMUP_ITERS
from benchmark.training.trainer import Trainer, configure_kernels, resolve_device, sync
from benchmark.training.validation import validate

SYNTHETIC = "bench-synthetic"

# The runtime and optimizer settings of each mode.
MODES: dict[str, dict[str, dict[str, object]]] = {
    "eager": {"runtime": {"cuda_graphs": "off", "channels_last": "off"}, "optim": {}},
    "fast": {"runtime": {}, "optim": {}},
    "fast-bf16": {"runtime": {}, "optim": {"bf16": True}},
    "fast-fp16": {"runtime": {}, "optim": {"fp16": True}},
    "channels-last": {"runtime": {"cuda_graphs": "off", "channels_last": "on"}, "optim": {}},
    # The fast path with STR, CS and DST reparametrizing layer by layer (before batching them).
    "fast-per-layer": {"runtime": {"reparam": "per-layer"}, "optim": {}},
}

# Input shape and classes of the models benchmarked dense (ImageNet's for resnet50).
MODEL_DATA = {"resnet50": ((3, 224, 224), 1000)}


class SyntheticSource(DataSource):
    """Fixed random batches already on the device (no loading, no augmentation)."""

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


def bare_loop(
    model_name: str,
    batches: list[tuple[Tensor, Tensor]],
    classes: int,
    mode: str = "eager",
) -> float:
    """Images/s of a plain PyTorch SGD loop (same warm-up exclusion as the harness).

    ``eager``: the textbook loop. The fast modes: channels_last, and on CUDA the whole step
    (forward, backward, fused SGD with a device learning rate) captured as one CUDA graph, in
    fp32 or bf16 autocast: the ceiling the harness's fast path is measured against.
    """
    torch.manual_seed(0)
    device = batches[0][0].device
    model = build_model(model_name, classes, tuple(batches[0][0].shape[1:])).to(device)
    fast = mode != "eager"
    bf16 = mode == "fast-bf16"
    nhwc = torch.channels_last if fast else torch.contiguous_format
    model = model.to(memory_format=nhwc)
    capture = fast and device.type == "cuda"
    opt = torch.optim.SGD(
        model.parameters(),
        lr=0.1,
        momentum=0.9,
        weight_decay=5e-4,
        fused=True if capture else None,
    )
    lrs = DeviceLearningRates(opt, device) if capture else None
    loss_fn = nn.CrossEntropyLoss()
    model.train()

    def step(x: Tensor, y: Tensor) -> None:
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16, cache_enabled=False):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    static_x = batches[0][0].contiguous(memory_format=nhwc).clone()
    static_y = batches[0][1].clone()
    replay: Callable[[], None] | None = None
    images, start = 0, 0.0
    for i, (x, y) in enumerate(batches):
        if i == TIMING_WARMUP_ITERS:
            sync(device)
            start = time.perf_counter()
        if lrs is not None:
            lrs.set(0.1)
        else:
            for group in opt.param_groups:
                group["lr"] = 0.1
        if capture and i >= EAGER_WARMUP_ITERS:
            static_x.copy_(x)
            static_y.copy_(y)
            if replay is None:
                sync(device)
                begin = time.perf_counter()
                replay = CudaGraphBackend(device).capture(lambda: step(static_x, static_y))
                sync(device)
                start += time.perf_counter() - begin if i >= TIMING_WARMUP_ITERS else 0.0
            replay()
        else:
            step(x.contiguous(memory_format=nhwc), y)
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
    optim: dict | None = None,
) -> RunConfig:
    """A config on the synthetic data for ``method`` (one epoch unless ``budget`` says)."""
    cfg = config_from_dict(
        {
            "data": {"name": SYNTHETIC, "batch_size": batch},
            "model": {"name": model_name},
            "schedule": {"name": "constant", "lr": 0.1},
            "budget": budget or {"epochs": 1},
            "method": method,
            "optim": optim or {},
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


def parse_device(parser: argparse.ArgumentParser, text: str) -> torch.device:
    """The benchmarks' ``--device`` as a torch device (else a usage error naming the values)."""
    try:
        return resolve_device(text)
    except RuntimeError:
        parser.error(f"--device = {text!r} is invalid; allowed: auto, cpu, cuda, cuda:N")


def mode_config(
    args: argparse.Namespace, mode: str, model: str, method: dict, budget: dict | None = None
) -> RunConfig:
    """``bench_config`` with the runtime/optimizer settings of ``mode``."""
    settings = MODES[mode]
    runtime = {**args.runtime, **settings["runtime"]}
    return bench_config(model, method, args.batch, runtime, budget, dict(settings["optim"]))


def register_batches(args: argparse.Namespace, shape: Sequence[int], classes: int) -> None:
    """Make the synthetic dataset serve ``args.iters`` (+ warm-up) batches of ``shape``."""
    batches = make_batches(args.iters + TIMING_WARMUP_ITERS, args.batch, shape, classes, args.dev)
    args.batches, args.classes = batches, classes
    DATASETS.replace(SYNTHETIC, lambda cfg, device: SyntheticSource(batches, classes))


def main(argv: Sequence[str] | None = None) -> None:
    """Print images/s for a bare loop, the dense harness, the masked harness and methods."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet56")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--iters", type=int, default=12, help="timed iterations per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default="", help="comma-separated method names, or 'all'")
    parser.add_argument("--models", default="", help="more models, dense only (comma-separated)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (CUDA if present)")
    parser.add_argument("--deterministic", action="store_true", help="reproducible GPU kernels")
    parser.add_argument(
        "--ops",
        action="store_true",
        help="print the operations (~kernel launches) one forward and backward pass runs per "
        "method, per-layer and batched reparametrization, and exit",
    )
    parser.add_argument(
        "--modes",
        default="",
        help=f"comma-separated, of {', '.join(MODES)} (default: eager,fast,fast-bf16 on "
        "CUDA, eager on the CPU)",
    )
    args = parser.parse_args(argv)

    device = parse_device(parser, args.device)
    default_modes = "eager,fast,fast-bf16" if device.type == "cuda" else "eager"
    args.modes = (args.modes or default_modes).split(",")
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        parser.error(f"--modes = {unknown[0]!r} is invalid; allowed: {', '.join(MODES)}")
    _check_names(parser, args)
    args.dev = device
    args.runtime = {"device": str(device), "deterministic": args.deterministic}
    try:
        _benchmark(args)
    finally:
        DATASETS.discard(SYNTHETIC)  # the synthetic data is this benchmark's, not the caller's


def _benchmark(args: argparse.Namespace) -> None:
    """Time and print what ``args`` asks for (checked by ``main``)."""
    device = args.dev
    configure_kernels(device, args.deterministic)  # the bare loop gets the same kernels
    register_batches(args, (3, 32, 32), 10)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(
        f"model {args.model}, batch {args.batch}, {args.iters} timed iterations, {where}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of "
        f"{args.repeats}" + (", deterministic kernels" if args.deterministic else "")
    )
    if args.ops:
        _count_methods(args)
        return
    rows = ("bare loop", "harness dense", "harness + masks")
    table: dict[str, dict[str, float]] = {row: {} for row in rows}
    for mode in args.modes:
        dense = mode_config(args, mode, args.model, {"name": "dense"})
        runs: dict[str, list[float]] = {row: [] for row in rows}
        for _ in range(args.repeats):  # interleaved, so drifts in machine load hit all three
            runs["bare loop"].append(bare_loop(args.model, args.batches, args.classes, mode))
            runs["harness dense"].append(harness(dense))
            runs["harness + masks"].append(harness(dense, masked_sparsity=0.9))
        for row in rows:
            table[row][mode] = statistics.median(runs[row])
    print_table("images/s", table, args.modes)
    for mode in args.modes:
        bare, plain = table["bare loop"][mode], table["harness dense"][mode]
        masked = table["harness + masks"][mode]
        print(
            f"{mode}: harness overhead over the bare loop {100 * (bare / plain - 1):+.1f}% time, "
            f"mask application {100 * (plain / masked - 1):+.1f}% time"
        )
    if args.methods:
        _bench_methods(args)
    if args.models:
        _bench_models(args)


def print_table(title: str, table: dict[str, dict[str, float]], modes: list[str]) -> None:
    """Rows of figures, one column per mode, plus each fast mode's speedup over eager."""
    fast = [m for m in modes if m != "eager"] if "eager" in modes else []
    head = f"{title:22s}" + "".join(f"{m:>14s}" for m in modes)
    head += "".join(f"{m + '/eager':>18s}" for m in fast)
    print("\n" + head)
    for row, values in table.items():
        line = f"{row:22s}" + "".join(f"{values.get(m, float('nan')):14.1f}" for m in modes)
        line += "".join(f"{values[m] / values['eager']:17.2f}x" for m in fast if "eager" in values)
        print(line)


METHOD_EPOCHS = 4


def _check_names(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse an unknown model or method name before anything is timed, naming the flag."""
    from benchmark.models.registry import MODELS
    from methods import METHODS, load_methods

    load_methods()
    models = [args.model, *filter(None, args.models.split(","))]
    methods = [] if args.methods in ("", "all") else args.methods.split(",")
    if "all" in methods:
        parser.error(f"--methods = {args.methods!r} is invalid; allowed: all alone, or names")
    for flag, names, registry in (("--model(s)", models, MODELS), ("--methods", methods, METHODS)):
        unknown = [n for n in names if n not in registry]
        if unknown:
            allowed = ", ".join(registry.names()) + (", or all" if flag == "--methods" else "")
            parser.error(f"{flag} = {unknown[0]!r} is invalid; allowed: {allowed}")


def timed_methods(spec: str) -> list[str]:
    """The methods ``--methods spec`` times: dense first, then each named one ('all': every one)."""
    from methods import METHODS, load_methods

    load_methods()
    # 'all': every method of every task (the language-model methods train causal_lm models only).
    every_task = [n for n in METHODS.names() if METHODS.get(n).tasks is None]
    names = every_task if spec == "all" else spec.split(",")
    # imp/renda retrain a dense parent with a hard mask (the "harness + masks" loop); bimp
    # covers that loop within one run.
    return ["dense", *[n for n in names if n not in ("imp", "renda", "dense")]]


def method_budget(name: str) -> dict[str, int]:
    """The budget of a method's short run: METHOD_EPOCHS epochs (BIMP: half of them T0)."""
    if name == "bimp":
        return {"epochs": METHOD_EPOCHS, "initial_epochs": METHOD_EPOCHS // 2, "cycles": 2}
    return {"epochs": METHOD_EPOCHS}


def _bench_methods(args: argparse.Namespace) -> None:
    """Each method's training images/s over a short full run, relative to dense training."""
    names = timed_methods(args.methods)
    print(f"\n{METHOD_EPOCHS}-epoch runs of {args.model}: images/s (ratio to dense)")
    print(f"{'method':10s}" + "".join(f"{m:>22s}" for m in args.modes))
    results: dict[str, dict[str, float]] = {}
    for name in names:
        results[name] = {}
        for mode in args.modes:
            cfg = mode_config(args, mode, args.model, {"name": name}, method_budget(name))
            trainer = Trainer(cfg)
            trainer.fit()
            results[name][mode] = trainer.state.throughput.images_per_s
        cells = "".join(
            f"{results[name][m]:13.1f} ({results[name][m] / results['dense'][m]:5.2f})"
            for m in args.modes
        )
        print(f"{name:10s}" + cells)


def _count_methods(args: argparse.Namespace) -> None:
    """Operations of one forward and backward pass per method: a proxy for GPU launches."""
    from benchmark.bench.op_count import count_ops, training_pass

    names = timed_methods(args.methods or "str,cs,dst")
    x, y = args.batches[0]
    print(f"\noperations per forward and backward pass of {args.model} (optimizer step left out)")
    print(f"{'method':10s}{'per-layer':>12s}{'batched':>12s}")
    for name in names:
        counts = []
        for reparam in ("per-layer", "batched"):
            runtime = {**args.runtime, "reparam": reparam, "cuda_graphs": "off"}
            cfg = bench_config(args.model, {"name": name}, args.batch, runtime, method_budget(name))
            trainer = Trainer(cfg)
            training_pass(trainer, x, y)  # the first pass makes layouts and constants
            counts.append(sum(count_ops(lambda t=trainer: training_pass(t, x, y)).values()))
        print(f"{name:10s}{counts[0]:12d}{counts[1]:12d}")


def _bench_models(args: argparse.Namespace) -> None:
    """Dense harness images/s of more models, in every mode."""
    table: dict[str, dict[str, float]] = {}
    for model in args.models.split(","):
        shape, classes = MODEL_DATA.get(model, ((3, 32, 32), 10))
        register_batches(args, shape, classes)
        table[model] = {}
        for mode in args.modes:
            table[model][mode] = harness(mode_config(args, mode, model, {"name": "dense"}))
    print_table(f"dense, batch {args.batch}", table, args.modes)


if __name__ == "__main__":
    main()
