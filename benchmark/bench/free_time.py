"""Time ``prunebench free`` (dry run, then the real one) on a store of a few hundred runs.

``python -m benchmark.bench.free_time [--spec ID] [--runs N]`` writes a store of ``N`` finished
runs of ``ID``'s smoke plan (records with seeded accuracies, each with a small weights file; no
training), then runs ``prunebench free --dry-run`` and ``prunebench free`` on it as a user would
(a fresh process each: imports included) and prints each one's wall-clock and CPU time.
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SPEC = "appendix-schedule-comparison-cifar10-oneshot"


def write_store(root: Path, spec: str, runs: int, seed: int = 0) -> int:
    """``runs`` finished runs of ``spec``'s smoke plan (and their dense parents) in ``root``,
    each with a 1 kB weights file; returns how many records were written."""
    from benchmark.config.parse import config_to_dict
    from benchmark.core.files import write_json_atomic
    from benchmark.experiments import get_experiment
    from benchmark.store.results import Store
    from methods import get_method

    store = Store(root)
    rng = random.Random(seed)
    configs = {r.cfg.run_id: r.cfg for r in get_experiment(spec).runs("smoke", root)}
    chosen = list(configs.values())[:runs]
    for cfg in list(chosen):
        parent = get_method(cfg.method.name)(cfg).parent_config()
        if parent is not None and parent.run_id not in {c.run_id for c in chosen}:
            chosen.append(parent)
    for cfg in chosen:
        parent = get_method(cfg.method.name)(cfg).parent_config()
        acc = rng.uniform(0.5, 0.99)
        record = {
            "run_id": cfg.run_id,
            "status": "finished",
            "method": cfg.method.name,
            "parent_run_id": None if parent is None else parent.run_id,
            "config": config_to_dict(cfg),
            "metrics": {
                "val": {"top1": acc},
                "test": {"top1": acc - 0.01},
                "sparsity": cfg.method.sparsity if cfg.method.name != "dense" else 0.0,
                "speedup": 2.0,
                "images_per_s": 1000.0,
                "wall_seconds": 2.0,
            },
        }
        write_json_atomic(store.result_path(cfg.run_id), record)
        weights = store.weights_path(cfg.run_id)
        weights.parent.mkdir(parents=True, exist_ok=True)
        weights.write_bytes(bytes(1024))
    return len(chosen)


def time_command(args: list[str]) -> tuple[float, float, str]:
    """Wall-clock and CPU seconds (user + system) of ``prunebench ARGS`` in a new process, and
    the last line it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "benchmark.cli", *args], capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stdout.strip().splitlines()
    return wall, cpu, lines[0] if lines else ""


def main(argv: list[str] | None = None) -> int:
    """Print the wall-clock and CPU time of ``free --dry-run`` and ``free`` on a fresh store."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", default=DEFAULT_SPEC, help="whose smoke plan the runs are")
    parser.add_argument("--runs", type=int, default=400, help="finished runs in the store")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "runs"
        written = write_store(root, args.spec, args.runs)
        print(f"store: {written} finished runs of {args.spec} (smoke), weights 1 kB each")
        for label, extra in (("free --dry-run", ["--dry-run"]), ("free", [])):
            wall, cpu, said = time_command(["free", "--store", str(root), *extra])
            print(f"{label:15s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  ({said})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
