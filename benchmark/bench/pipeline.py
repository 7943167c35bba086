"""The real pipeline's throughput: ``prunebench run`` end to end, before and after the fast path.

    python -m benchmark.bench.pipeline --device cuda            # BIMP, ResNet-56, 50,000 images
    python -m benchmark.bench.pipeline --device cuda --concurrent 4   # + 4 runs sharing the GPU

Each mode is a fresh ``prunebench run`` process on a stand-in CIFAR-10 (written by
``prunebench fake-data cifar10`` unless ``--root`` holds one), with evaluation and a checkpoint
every epoch, as a user's run. It prints the images/s the result records (capture time and the
iterations on new batch shapes excluded, reported apart), the wall-clock, where each epoch's
wall-clock went, and the wall-clock projected to 200 epochs. With
``--concurrent K`` it also starts K runs at once on the one GPU and prints their aggregate
images/s against one run alone. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.bench.throughput import MODES
from benchmark.training.trainer import EPOCH_PHASES

PAPER_EPOCHS = 200


def ensure_cifar(root: Path, size: int) -> None:
    """Write a stand-in CIFAR-10 of ``size`` training images under ``root`` unless one is there."""
    from benchmark.data.fakedata import write_cifar10

    if not (root / "cifar-10-batches-py").exists():
        write_cifar10(root, per_batch=size // 5, n_test=10_000, signal=0.5)


def pipeline_overrides(
    args: argparse.Namespace, mode: str, store: Path, seed: int = 0
) -> list[str]:
    """The config overrides (``key=value``) of one mode's run: BIMP, ``args.epochs`` epochs."""
    sets = {
        "data.name": "cifar10",
        "data.root": str(args.root),
        "data.check_integrity": False,  # a stand-in: not the real files' checksums
        "data.batch_size": args.batch,
        "model.name": args.model,
        "method.name": "bimp",
        "budget.epochs": args.epochs,
        "budget.initial_epochs": max(args.epochs - 3, 1),
        "budget.cycles": min(3, args.epochs - 1),
        "seed": seed,
        "output.dir": str(store),
        "logging.progress": False,
        "runtime.device": args.device,
    }
    for section, values in MODES[mode].items():
        sets.update({f"{section}.{k}": v for k, v in values.items()})
    return [
        f"{key}={json.dumps(value) if not isinstance(value, str) else repr(value)}"
        for key, value in sets.items()
    ]


def run_command(args: argparse.Namespace, mode: str, store: Path, seed: int = 0) -> list[str]:
    """The ``prunebench run`` command line of one mode."""
    command = [sys.executable, "-m", "benchmark.cli", "run", "--json", "--force"]
    for override in pipeline_overrides(args, mode, store, seed):
        command += ["--set", override]
    return command


def metrics_of(output: str) -> dict[str, Any]:
    """The metrics of the JSON result ``prunebench run --json`` printed."""
    start = output.index("{")
    return json.loads(output[start:])["metrics"]


def projected_minutes(metrics: dict[str, Any], epochs: int = PAPER_EPOCHS) -> tuple[float, float]:
    """Minutes for ``epochs`` epochs, two ways: the measured wall-clock scaled linearly; and
    every measured epoch once plus the median of the epochs after the first for each epoch not
    measured. The first epoch pays one-time costs (autotuning, first captures) and a short run
    is dense with events a long run has once (BIMP's last prune and its evaluations): scaled
    linearly, those would count ``epochs / measured`` times."""
    done = metrics["epoch_seconds"]
    naive = metrics["wall_seconds"] / len(done) * epochs / 60
    if len(done) < 2:
        return naive, naive
    typical = statistics.median(done[1:])
    return naive, (sum(done) + typical * (epochs - len(done))) / 60


def phase_lines(metrics: dict[str, Any]) -> list[str]:
    """Each epoch's wall-clock and where it went (seconds), as printable lines."""
    lines = [f"{'epoch':>5s} {'wall s':>7s} " + " ".join(f"{p:>10s}" for p in EPOCH_PHASES)]
    phases = metrics.get("epoch_phases", [])
    for i, wall in enumerate(metrics["epoch_seconds"]):
        parts = phases[i] if i < len(phases) else {}
        cells = " ".join(f"{parts[p]:10.2f}" if p in parts else f"{'-':>10s}" for p in EPOCH_PHASES)
        lines.append(f"{i + 1:5d} {wall:7.2f} {cells}")
    lines.append(f"warm-up on new batch shapes: {metrics.get('warmup_seconds', 0.0):.2f} s")
    return lines


def data_only(args: argparse.Namespace) -> float:
    """Images/s of the training data pipeline alone (one epoch of augmented batches)."""
    import torch

    from benchmark.config.run import DataConfig
    from benchmark.data.base import build_dataset

    device = torch.device(args.device)
    cfg = DataConfig(
        name="cifar10", root=str(args.root), check_integrity=False, batch_size=args.batch
    )
    data = build_dataset(cfg, device)
    for epoch in range(2):  # the first epoch warms up
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        images = sum(x.shape[0] for x, _ in data.train_batches(epoch, 0))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return images / (time.perf_counter() - start)


def run_mode(args: argparse.Namespace, mode: str, store: Path) -> dict[str, Any]:
    """Run one mode in a fresh process; its metrics plus the process's own wall-clock."""
    start = time.perf_counter()
    done = subprocess.run(
        run_command(args, mode, store), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        print(f"{mode}: prunebench run failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return {}
    metrics = metrics_of(done.stdout)
    metrics["process_seconds"] = time.perf_counter() - start
    for line in done.stderr.splitlines():
        if "Warning" in line:
            print(f"{mode}: {line.strip()}")
    return metrics


def concurrent(args: argparse.Namespace, mode: str, store: Path, k: int) -> dict[str, float]:
    """Start ``k`` runs (different seeds) at once; their summed and aggregate images/s."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            run_command(args, mode, store, seed=100 + i),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(k)
    ]
    outputs = [p.communicate() for p in procs]
    wall = time.perf_counter() - start
    rates = []
    for p, (out, err) in zip(procs, outputs, strict=True):
        if p.returncode != 0:
            print(f"concurrent run failed ({p.returncode}):\n{err[-2000:]}")
            return {}
        rates.append(metrics_of(out)["images_per_s"])
    images = k * args.epochs * args.size
    return {"sum_images_per_s": sum(rates), "aggregate_with_startup": images / wall}


def main(argv: Sequence[str] | None = None) -> None:
    """Print the pipeline's images/s per mode, the projected 200-epoch wall-clock and sharing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None, help="stand-in CIFAR-10 folder")
    parser.add_argument("--size", type=int, default=50_000, help="training images to write")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--model", default="resnet56")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--modes", default="eager,fast,fast-bf16")
    parser.add_argument("--concurrent", type=int, nargs="*", default=[], help="runs per GPU")
    parser.add_argument("--concurrent-mode", default="fast-bf16")
    args = parser.parse_args(argv)
    modes = args.modes.split(",")
    unknown = [m for m in [*modes, args.concurrent_mode] if m not in MODES]
    if unknown:
        parser.error(f"--modes = {unknown[0]!r} is invalid; allowed: {', '.join(MODES)}")
    if any(k < 1 for k in args.concurrent):
        bad = min(args.concurrent)
        parser.error(f"--concurrent = {bad} is invalid; allowed: integers >= 1 (runs per GPU)")
    if args.epochs < 2:
        parser.error(f"--epochs = {args.epochs} is invalid; allowed: an integer >= 2 (BIMP)")
    if args.batch < 1:
        parser.error(f"--batch = {args.batch} is invalid; allowed: an integer >= 1")
    if args.size < 5:
        bad = args.size
        parser.error(f"--size = {bad} is invalid; allowed: an integer >= 5 (5 training batches)")
    with tempfile.TemporaryDirectory() as tmp:
        if args.root is None:
            args.root = Path(tmp) / "cifar"
        started = time.perf_counter()
        ensure_cifar(args.root, args.size)
        print(f"stand-in CIFAR-10 ready in {time.perf_counter() - started:.1f} s ({args.root})")
        print(
            f"the data pipeline alone (load, crop, flip, normalise): {data_only(args):.0f} images/s"
        )
        print(
            f"\nprunebench run: BIMP, {args.model}, batch {args.batch}, {args.size} images, "
            f"{args.epochs} epochs, evaluation and checkpoint every epoch"
        )
        print(
            f"{'mode':10s} {'images/s':>9s} {'compile s':>9s} {'wall s':>7s} {'process s':>9s} "
            f"{'200 epochs: linear':>18s} {'measured + median':>17s}  steps"
        )
        single: dict[str, float] = {}
        for mode in modes:
            m = run_mode(args, mode, Path(tmp) / "runs")
            if not m:
                continue
            single[mode] = m["images_per_s"]
            naive, steady = projected_minutes(m)
            step = m.get("step", {})
            print(
                f"{mode:10s} {m['images_per_s']:9.0f} {m.get('compile_seconds', 0.0):9.2f} "
                f"{m['wall_seconds']:7.1f} {m['process_seconds']:9.1f} {naive:14.1f} min "
                f"{steady:13.1f} min  "
                f"{step.get('mode')} (captures {step.get('captures')}, "
                f"eager {step.get('eager_iterations')}) {step.get('why_eager', '')}"
            )
            for line in phase_lines(m):
                print(f"{'':10s} {line}")
        for k in args.concurrent:
            res = concurrent(args, args.concurrent_mode, Path(tmp) / f"shared{k}", k)
            if not res:
                continue
            one = single.get(args.concurrent_mode, float("nan"))
            print(
                f"{k} concurrent {args.concurrent_mode} runs: summed {res['sum_images_per_s']:.0f} "
                f"images/s ({res['sum_images_per_s'] / one:.2f}x one run alone), "
                f"{res['aggregate_with_startup']:.0f} counting process start-up"
            )


if __name__ == "__main__":
    main()
