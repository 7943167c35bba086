"""Where a real training epoch spends its time: torch.profiler over steady-state iterations.

    python -m benchmark.bench.profile_pipeline --device cuda --mode fast-bf16    # BIMP, ResNet-56
    python -m benchmark.bench.profile_pipeline --device cpu --size 1000 --iters 5

Trains the first epoch of the pipeline ``benchmark.bench.pipeline`` measures (stand-in
CIFAR-10, the real data source with its augmentation, the trainer, the method) in this process.
After ``--skip`` iterations (past warm-up and capture) it times ``--iters`` of them, then replays
the captured step ``--iters`` times back to back (the device's own time per step, without the
pipeline's host work between steps), then profiles ``--iters`` more. It prints the wall-clock
per iteration, the replayed step's, the device time the profiled kernels took (so how much of
the window the device was busy: the rest is the device waiting for the host), and the
operations and kernels that took the most time. Prints figures; asserts nothing.

The device time of replayed CUDA graphs comes from CUPTI: before CUDA 13.1 it may time graph
kernels wrongly, and some versions record none of them (the busy figure then says "unknown").
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from benchmark.bench.pipeline import ensure_cifar, pipeline_overrides
from benchmark.bench.throughput import MODES
from benchmark.config.run import DataConfig
from benchmark.training.fast_step import StepRunner
from benchmark.training.trainer import Trainer, sync
from benchmark.training.validation import load_config


def pipeline_config(args: argparse.Namespace, store: Path) -> Any:
    """The config of ``bench_pipeline``'s run in ``args.mode``, two epochs long."""
    args.epochs = 2  # the first epoch is profiled; BIMP needs a second one for its cycle
    return load_config(None, pipeline_overrides(args, args.mode, store))


def device_time_key(events: Any) -> str:
    """The profiler's name for an event's own device time (renamed in torch 2.4)."""
    new = "self_device_time_total"
    return new if not events or hasattr(events[0], new) else "self_cuda_time_total"


def device_events(events: Any) -> list[Any]:
    """The device's own events (kernels, copies): a CPU operation's device time repeats them."""
    return [
        e
        for e in events
        if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
    ]


def device_seconds(events: Any) -> float:
    """Summed time of the kernels (and copies) the device ran (seconds)."""
    key = device_time_key(events)
    return sum(getattr(e, key) for e in device_events(events)) / 1e6


def main(argv: Sequence[str] | None = None) -> None:
    """Profile steady-state iterations of the real pipeline and print where the time goes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None, help="stand-in CIFAR-10 folder")
    parser.add_argument("--size", type=int, default=50_000, help="training images to write")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--model", default="resnet56")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", default="fast-bf16", help=f"one of {', '.join(MODES)}")
    parser.add_argument("--skip", type=int, default=20, help="iterations before the windows")
    parser.add_argument("--iters", type=int, default=50, help="iterations of each window")
    parser.add_argument("--top", type=int, default=15, help="rows of the table")
    args = parser.parse_args(argv)
    if args.mode not in MODES:
        parser.error(f"--mode = {args.mode!r} is invalid; allowed: {', '.join(MODES)}")
    if args.skip < 0:
        parser.error(f"--skip = {args.skip} is invalid; allowed: an integer >= 0")
    if args.iters < 1:
        parser.error(f"--iters = {args.iters} is invalid; allowed: an integer >= 1")
    # The training split is what the validation fraction leaves of --size.
    batches = args.skip + 2 * args.iters  # the timed window, then the profiled one
    needed = math.ceil(batches * args.batch / (1 - DataConfig().val_fraction))
    if args.size < needed:
        parser.error(
            f"--size = {args.size} is invalid; allowed: >= {needed} "
            "(the timed and the profiled batches)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        if args.root is None:
            args.root = Path(tmp) / "cifar"
        ensure_cifar(args.root, args.size)
        trainer = Trainer(pipeline_config(args, Path(tmp) / "runs"))
        window = _profile_epoch(trainer, args)
    _report(window, trainer, args)


def back_to_back_ms(runner: StepRunner, replays: int) -> float | None:
    """Milliseconds per replay of the last captured step, replayed back to back (None: none).

    Nothing runs between the replays, so this is the device's time for one step (or the host's
    launch time, if that is longer): the floor of an iteration of the pipeline.
    """
    if not runner.graphs or replays < 1:
        return None
    replay = list(runner.graphs.values())[-1].replay
    sync(runner.device)
    start = time.perf_counter()
    for _ in range(replays):
        replay()
    sync(runner.device)
    return 1e3 * (time.perf_counter() - start) / replays


def _profile_epoch(trainer: Trainer, args: argparse.Namespace) -> dict[str, Any]:
    """Train one epoch: time [skip, skip + iters), replay, profile the next ``iters``."""
    device = trainer.device
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    run = trainer.runner.run
    state: dict[str, Any] = {"done": 0}
    prof = profile(activities=activities)
    timed_end, profiled_end = args.skip + args.iters, args.skip + 2 * args.iters

    def profiled_run(x: torch.Tensor, y: torch.Tensor, step: int) -> float:
        done = state["done"]
        if done in (args.skip, timed_end):
            sync(device)
            now = time.perf_counter()
        if done == args.skip:  # the timed window opens
            state["start"] = now
        if done == timed_end:  # it closes; the replays; the profiled window opens
            state["seconds"] = now - state["start"]
            state["replay_ms"] = back_to_back_ms(trainer.runner, args.iters)
            prof.__enter__()
            state["profiled_start"] = time.perf_counter()
        spent = run(x, y, step)
        state["done"] += 1
        if state["done"] == profiled_end:
            sync(device)
            state["profiled_seconds"] = time.perf_counter() - state["profiled_start"]
            prof.__exit__(None, None, None)
        return spent

    trainer.runner.run = profiled_run  # type: ignore[method-assign]
    trainer.train_epoch(0)
    state["profile"] = prof
    return state


def _report(window: dict[str, Any], trainer: Trainer, args: argparse.Namespace) -> None:
    prof = window["profile"]
    events = prof.key_averages()
    seconds = window["profiled_seconds"]
    busy = device_seconds(events)
    print(
        f"bimp, {args.model}, batch {args.batch}, mode {args.mode}, "
        f"{trainer.device}: windows of {args.iters} iterations after {args.skip}; "
        f"step {trainer.step_record()}"
    )
    per_iter_ms = 1e3 * window["seconds"] / args.iters
    print(f"wall-clock {per_iter_ms:.3f} ms per iteration ({_rate(args, per_iter_ms)})")
    replay_ms = window["replay_ms"]
    if replay_ms is None:
        print("back-to-back replays: none, no captured step (eager steps)")
    else:
        print(
            f"back-to-back replays of the captured step {replay_ms:.3f} ms per step "
            f"({_rate(args, replay_ms)}): the pipeline's work between steps costs "
            f"{per_iter_ms - replay_ms:+.3f} ms per iteration"
        )
    profiled_ms = 1e3 * seconds / args.iters
    print(f"profiled: {profiled_ms:.3f} ms per iteration (profiler overhead included)")
    if trainer.device.type == "cuda" and not device_events(events):
        # Kernels replayed from a CUDA graph reach the profiler through CUPTI, which some
        # driver/CUDA versions do not trace: no events is "not seen", not "idle".
        print("device busy: unknown, the profiler recorded no device events (graph replays)")
    elif trainer.device.type == "cuda":
        print(
            f"device busy {1e3 * busy / args.iters:.3f} ms per iteration: "
            f"{100 * busy / seconds:.0f}% of the profiled window (the rest: the device waiting)"
        )
    sort = device_time_key(events) if trainer.device.type == "cuda" else "self_cpu_time_total"
    print(events.table(sort_by=sort, row_limit=args.top))


def _rate(args: argparse.Namespace, ms_per_iteration: float) -> str:
    return f"{args.batch / ms_per_iteration * 1e3:.0f} images/s"


if __name__ == "__main__":
    main()
