"""CPU time (user + sys) of the commands that only read: each in a fresh interpreter, as a user
runs them, so that imports count.

``python -m benchmark.bench.cli_times [--repeats N]`` prints, per command, the least CPU time of
``N`` runs (the least, since other processes on the machine only ever add) and its target:
a paper-scale dry run of ``appendix-cifar10-results`` at most 3 s, ``table`` on an empty store
at most 2 s, the others as close as their work allows; then the CPU time of their imports
alone (torch, pandas), which no command that validates a config can go below. It first stores
one short digits run (a few seconds) in a temporary store, for ``show`` and ``grid
show``/``status`` to read.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

TABLE_ID = "appendix-cifar10-results"
FIGURE_ID = "cifar10-envelope"
# Targets in CPU seconds (user + sys); None: as close as the command's work allows.
TARGETS: dict[str, float | None] = {"dry run": 3.0, "table": 2.0}
# What the commands cannot go below: their imports, also as the commands that train nothing run
# them (the cyclic garbage collector paused, its passes at exit skipped: benchmark.cli.collector).
_PAUSED = "import gc; gc.disable(); import {}; gc.freeze()"
IMPORTS = {
    "import torch": "import torch",
    "import torch (collector paused, as the commands)": _PAUSED.format("torch"),
    "import pandas (collector paused)": _PAUSED.format("pandas"),
    "import torch, pandas (collector paused)": _PAUSED.format("torch, pandas"),
}


def child_cpu(command: list[str], cwd: Path) -> tuple[float, int]:
    """(user + sys CPU seconds, exit status) of ``command`` in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return used, done.returncode


def cpu_seconds(args: list[str], cwd: Path) -> tuple[float, int]:
    """(user + sys CPU seconds, exit status) of ``prunebench ARGS`` in a fresh interpreter."""
    return child_cpu([sys.executable, "-m", "benchmark.cli", *args], cwd)


def stored_run(store: Path, cwd: Path) -> str:
    """Train one short digits run into ``store``; return its run id."""
    sets = ["budget.epochs=3", "budget.initial_epochs=1", f"output.dir={store}"]
    sets += ["runtime.threads=1", "logging.progress=false"]
    args = [arg for s in sets for arg in ("--set", s)]
    command = [sys.executable, "-m", "benchmark.cli", "run", *args]
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return next(store.glob("*.json")).stem


def commands(store: Path, grid: Path, run_id: str) -> dict[str, list[str]]:
    """The timed commands by name."""
    empty = str(store.parent / "empty")
    return {
        "dry run": ["reproduce", TABLE_ID, "--scale", "paper", "--dry-run", "--store", empty],
        "table": ["table", TABLE_ID, "--store", empty],
        "plot": ["plot", FIGURE_ID, "--store", empty, "--out", str(store.parent / "fig")],
        "grid show": ["grid", "show", str(grid), "--store", str(store)],
        "status": ["status", str(grid), "--store", str(store)],
        "methods": ["methods"],
        "show": ["show", run_id, "--store", str(store)],
        "list": ["list", "--store", empty],
    }


def main(argv: list[str] | None = None) -> None:
    """Print each command's least CPU time over the repeats, with its target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per command (least counts)")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs"
        run_id = stored_run(store, root)
        grid = root / "slurm" / "grids" / "smoke.toml"
        print(f"{'command':<10} | CPU s (least of {args.repeats}) | target | exit")
        for name, command in commands(store, grid, run_id).items():
            results = [cpu_seconds(command, root) for _ in range(args.repeats)]
            least = min(t for t, _ in results)
            target = TARGETS.get(name)
            shown = f"<= {target:g} s" if target else "-"
            print(f"{name:<10} | {least:>21.2f} | {shown:>6} | {results[0][1]}")
        print("for scale, imports alone (least of the repeats):")
        for name, code in IMPORTS.items():
            least = min(
                child_cpu([sys.executable, "-c", code], root)[0] for _ in range(args.repeats)
            )
            print(f"  {name:<50} {least:.2f} s")


if __name__ == "__main__":
    main()
