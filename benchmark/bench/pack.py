"""Benchmark: K runs of one grid sharing one GPU inside one process (grid throughput).

    python -m benchmark.bench.pack --device cuda --models resnet56,vgg16,resnet18 --k 1,2,4,8

For each model and each K it trains K independent dense runs at once and prints the images/s of
all K together, and that total against K = 1:

* ``harness``: K harness trainers (each its own model, optimizer, captured steps) in one
  process, their iterations in turn, each on its own CUDA stream so that their kernels overlap
  on the device (:mod:`benchmark.training.packing`, what ``submit --runs-per-gpu K`` runs);
* ``bare``: K captured training steps replayed round robin from one thread, each on its own
  stream: the ceiling of stream overlap without any harness or thread.

The harness figure counts every image of the timed epoch over its wall-clock less the runs'
one-off costs (each epoch's capture of its graphs, a new batch shape's kernel autotuning), as a
run's own images/s does; ``sum of runs`` adds the images/s each trainer records for itself.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from benchmark.bench.throughput import (
    MODEL_DATA,
    SYNTHETIC,
    make_batches,
    mode_config,
    parse_device,
)
from benchmark.data.base import DATASETS
from benchmark.models.registry import build_model
from benchmark.training.device import configure_kernels, sync
from benchmark.training.fast_step import CudaGraphBackend, DeviceLearningRates
from benchmark.training.packing import PackedRun, RngState, drive_packed
from benchmark.training.trainer import Trainer


def packed_harness(args: argparse.Namespace, model: str, k: int) -> tuple[float, float, int]:
    """(images/s of the timed epoch over its wall-clock, sum of the runs' own images/s, eager
    steps of the timed epoch: 0 where every step after the first ones replayed a graph).

    The K trainers share this process as ``submit --runs-per-gpu K`` runs them: their epoch
    loops advanced in turn, each turn on the run's own stream with its own generators.
    """
    cfg = mode_config(args, args.mode, model, {"name": "dense"}, {"epochs": 2})
    trainers, rngs = [], []
    for _ in range(k):
        trainer = Trainer(cfg)
        trainer.stream_only = True
        trainers.append(trainer)
        rngs.append(RngState.capture(trainer.device))

    def epoch(e: int) -> float:
        runs = [
            PackedRun(f"run {i}", t.epoch_steps(e), t.device, rngs[i])
            for i, t in enumerate(trainers)
        ]
        sync(args.dev)
        start = time.perf_counter()
        drive_packed(runs)
        sync(args.dev)
        elapsed = time.perf_counter() - start
        for i, run in enumerate(runs):
            if run.error is not None:
                raise run.error
            rngs[i] = run.rng
        return elapsed

    def untimed() -> float:
        # Capture (each epoch's graphs) and kernel warm-up: one-off costs, serial per run.
        return sum(t.state.throughput.compile_seconds + t.state.throughput.warmup_seconds
                   for t in trainers)  # fmt: skip

    epoch(0)  # warm-up: cuDNN autotuning, first captures
    before = [(t.state.throughput.images, t.state.throughput.seconds) for t in trainers]
    eager_before = sum(t.runner.stats.eager for t in trainers)
    untimed_before = untimed()
    seconds = epoch(1) - (untimed() - untimed_before)
    eager = sum(t.runner.stats.eager for t in trainers) - eager_before
    images = sum(t.data.num_train for t in trainers)
    own = sum(
        (t.state.throughput.images - i) / max(t.state.throughput.seconds - s, 1e-9)
        for t, (i, s) in zip(trainers, before, strict=True)
    )
    return images / seconds, own, eager


def captured_step(
    model_name: str, batch: tuple[Tensor, Tensor], classes: int, bf16: bool
) -> tuple[Callable[[], None], Tensor, Tensor]:
    """One model's whole SGD step captured as a graph on the current stream (CUDA only)."""
    x0, y0 = batch
    device = x0.device
    model = build_model(model_name, classes, tuple(x0.shape[1:])).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, fused=True)
    lrs = DeviceLearningRates(opt, device)
    loss_fn = nn.CrossEntropyLoss()
    static_x = x0.contiguous(memory_format=torch.channels_last).clone()
    static_y = y0.clone()

    def step() -> None:
        with torch.autocast(device.type, torch.bfloat16, enabled=bf16, cache_enabled=False):
            loss = loss_fn(model(static_x), static_y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(3):  # momentum buffers and cuDNN's choices exist before capture
        lrs.set(0.1)
        step()
    sync(device)
    return CudaGraphBackend(device).capture(step), static_x, static_y


def packed_bare(args: argparse.Namespace, model: str, k: int) -> float:
    """Images/s of K captured steps replayed round robin, each on its own stream."""
    streams = [torch.cuda.Stream(args.dev) for _ in range(k)]
    steps = []
    for s in streams:
        with torch.cuda.stream(s):
            steps.append(captured_step(model, args.batches[0], args.classes, args.bf16))
    sync(args.dev)

    def replay_all(batches: Sequence[tuple[Tensor, Tensor]]) -> None:
        for x, y in batches:
            for s, (replay, sx, sy) in zip(streams, steps, strict=True):
                with torch.cuda.stream(s):
                    sx.copy_(x)
                    sy.copy_(y)
                    replay()

    replay_all(args.batches[:2])
    sync(args.dev)
    start = time.perf_counter()
    replay_all(args.batches)
    sync(args.dev)
    return k * args.batch * len(args.batches) / (time.perf_counter() - start)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the grid throughput of K runs sharing the device, per model and K."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet56")
    parser.add_argument("--k", default="1,2,4,8", help="comma-separated runs per device")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--iters", type=int, default=60, help="iterations per timed epoch")
    parser.add_argument("--mode", default="fast-bf16", help="a mode of benchmark.bench")
    parser.add_argument("--device", default="auto", help="cpu, cuda, or auto (CUDA if present)")
    args = parser.parse_args(argv)
    args.dev = parse_device(parser, args.device)
    try:
        ks = [int(k) for k in args.k.split(",")]
    except ValueError:
        parser.error(f"--k = {args.k!r} is invalid; allowed: comma-separated integers >= 1")
    if min(ks) < 1:
        parser.error(f"--k = {args.k!r} is invalid; allowed: comma-separated integers >= 1")
    args.bf16 = args.mode == "fast-bf16"
    args.runtime = {"device": str(args.dev), "deterministic": False}
    configure_kernels(args.dev, False)
    cuda = args.dev.type == "cuda"
    where = torch.cuda.get_device_name(args.dev) if cuda else "CPU"
    print(f"batch {args.batch}, {args.iters} iterations per run, {args.mode}, {where}")
    try:
        for model in args.models.split(","):
            shape, classes = MODEL_DATA.get(model, ((3, 32, 32), 10))
            args.batches = make_batches(args.iters, args.batch, shape, classes, args.dev)
            args.classes = classes
            batches = args.batches
            DATASETS.replace(SYNTHETIC, lambda cfg, device, b=batches, c=classes: _source(b, c))
            print(
                f"\n{model:10s}{'K':>4s}{'harness':>12s}{'x K=1':>8s}{'sum of runs':>14s}"
                + f"{'eager':>7s}"
                + (f"{'bare':>12s}{'x K=1':>8s}" if cuda else "")
            )
            base: dict[str, float] = {}
            for k in ks:
                line = f"{'':10s}{k:4d}"
                try:
                    total, own, eager = packed_harness(args, model, k)
                    base.setdefault("h", total)
                    line += f"{total:12,.0f}{total / base['h']:8.2f}{own:14,.0f}{eager:7d}"
                except Exception as err:  # noqa: BLE001 - a figure per K, whatever fails
                    line += f"  harness failed: {type(err).__name__}: {err}"[:200]
                if cuda:
                    try:
                        bare = packed_bare(args, model, k)
                        base.setdefault("b", bare)
                        line += f"{bare:12,.0f}{bare / base['b']:8.2f}"
                    except Exception as err:  # noqa: BLE001
                        line += f"  bare failed: {type(err).__name__}: {err}"[:200]
                print(line, flush=True)
    finally:
        DATASETS.discard(SYNTHETIC)


def _source(batches: list[tuple[Tensor, Tensor]], classes: int):  # noqa: ANN202
    from benchmark.bench.throughput import SyntheticSource

    return SyntheticSource(batches, classes)


if __name__ == "__main__":
    main()
