"""Time submitting a 1,000-run grid to a real SLURM cluster, and the status query of that grid.

Nothing trains: the arrays are queued held (``sbatch --hold``) and cancelled at the end, so the
figures are the launcher's own cost: expanding and validating the grid, planning against the store
and the scheduler, pickling one submitit task per array task, ``sbatch`` and the submission
record; then ``prunebench status`` (store scan, one ``squeue``) over the 1,000 queued runs, and a
re-submission that must submit nothing. Each step is timed in-process and as the whole command
(``python -m benchmark.cli ...``, interpreter start-up and imports included).

    bash slurm/dev-cluster.sh start   # as root (sudo otherwise)
    .venv/bin/python -m benchmark.bench.submit [--runs 1000] [--runs-per-task 1 10] [--json F]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GRID = """\
name = "bench{runs}"
seeds = {seeds}

[base]
data.name = "digits"
data.batch_size = 128
budget.epochs = 10
logging.progress = false

[methods.bimp]
axes = {{ "method.sparsity" = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98] }}
zip = [{{ "budget.initial_epochs" = [2, 3, 4, 5, 6, 7, 8, 2, 4, 6], \
"budget.cycles" = [1, 1, 1, 1, 1, 1, 1, 2, 2, 2] }}]
"""


def cluster_reason() -> str | None:
    """None when sbatch exists and slurmctld answers, else why not."""
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if ping.returncode != 0:
        return "slurmctld does not answer: " + (ping.stdout + ping.stderr).strip()
    return None


def timed_command(args: list[str]) -> tuple[float, str]:
    """Run ``python -m benchmark.cli ARGS``; (seconds, stdout). Raises on failure."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "benchmark.cli", *args], capture_output=True, text=True
    )
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"prunebench {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return seconds, out.stdout


def bench(runs: int, runs_per_task: int, profile: str, folder: Path) -> dict[str, Any]:
    """One measurement: submit (held), status, re-submit, then cancel the arrays."""
    from benchmark.launch import LaunchSettings, load_profile, prepare, submit_grid
    from benchmark.launch.grid import load_grid
    from benchmark.launch.status import format_status, grid_status

    grid_file = folder / f"bench{runs}-{runs_per_task}.toml"
    grid_file.write_text(GRID.format(runs=runs, seeds=runs // 100))
    store = folder / f"store-{runs_per_task}"
    settings = LaunchSettings(
        executor="slurm", runs_per_task=runs_per_task, profile=load_profile(profile), hold=True
    )
    row: dict[str, Any] = {"runs": runs, "runs_per_task": runs_per_task}
    t0 = time.perf_counter()
    exp = prepare(load_grid(grid_file), store, settings)
    row["expand_s"] = time.perf_counter() - t0
    assert len(exp.runs) == runs, f"the grid has {len(exp.runs)} runs, not {runs}"
    t0 = time.perf_counter()
    result = submit_grid(exp, store, settings)
    row["submit_s"] = time.perf_counter() - t0
    row["jobs"] = len(result.jobs)
    arrays = sorted({j.split("_")[0] for j in result.jobs})
    try:
        t0 = time.perf_counter()
        status = grid_status(exp, store)
        format_status(status)
        row["status_s"] = time.perf_counter() - t0
        assert status.counts()["all"]["pending"] == runs, status.counts()
        common = [str(grid_file), "--store", str(store)]
        row["status_cli_s"], _ = timed_command(["status", *common])
        seconds, out = timed_command(
            ["submit", *common, "--executor", "slurm", "--profile", profile]
        )
        assert "submitted 0 jobs" in out, out
        row["resubmit_cli_s"] = seconds
    finally:
        subprocess.run(["scancel", *arrays], check=False, timeout=120)
    # The whole command once more, on a fresh store: what a user waits for.
    store2 = folder / f"store-cli-{runs_per_task}"
    args = [str(grid_file), "--store", str(store2), "--executor", "slurm", "--profile", profile]
    seconds, out = timed_command(["submit", *args, "--runs-per-task", str(runs_per_task), "--hold"])
    row["submit_cli_s"] = seconds
    for line in out.splitlines():
        if line.strip().startswith(("array ", "job ")):
            subprocess.run(["scancel", line.split()[1].rstrip(":")], check=False, timeout=120)
    return row


def main(argv: list[str] | None = None) -> int:
    """Print a table of the timings (and write them as JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="grid size (a multiple of 100)")
    parser.add_argument("--runs-per-task", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--profile", default="dev", help="cluster profile (default: dev)")
    parser.add_argument("--json", help="also write the timings to this JSON file")
    args = parser.parse_args(argv)
    if args.runs < 100 or args.runs % 100:
        parser.error("--runs must be a multiple of 100")
    reason = cluster_reason()
    if reason:
        print(
            f"bench_submit: no SLURM cluster ({reason}); start one with: "
            "bash slurm/dev-cluster.sh start (as root)",
            file=sys.stderr,
        )
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="prunebench-bench-submit-") as tmp:
        for k in args.runs_per_task:
            rows.append(bench(args.runs, k, args.profile, Path(tmp)))
    header = (
        f"{'runs':>5} {'runs/task':>9} {'jobs':>5} {'expand':>8} {'submit':>8} "
        f"{'status':>8} | {'submit cmd':>10} {'status cmd':>10} {'resubmit cmd':>12}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['runs']:>5} {r['runs_per_task']:>9} {r['jobs']:>5} {r['expand_s']:>7.2f}s "
            f"{r['submit_s']:>7.2f}s {r['status_s']:>7.2f}s | {r['submit_cli_s']:>9.2f}s "
            f"{r['status_cli_s']:>9.2f}s {r['resubmit_cli_s']:>11.2f}s"
        )
    print(
        "expand/submit/status: in-process (submit includes planning, pickling, sbatch and the "
        "record); '... cmd': the whole prunebench command, Python start-up and imports included."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
