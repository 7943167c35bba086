#!/usr/bin/env python3
"""Smoke check: submitit against the running dev cluster (slurm/dev-cluster.sh).

Submits one job and a 4-task array (``map_array``) through ``submitit.AutoExecutor``,
checks the results (values, SLURM job / array-task ids, the sacct state), and prints the
elapsed seconds. Not part of the unit tests.

    bash slurm/dev-cluster.sh start
    .venv/bin/python slurm/check_submitit.py [--partition debug] [--folder DIR] [--keep]

Exit status: 0 on success, 1 if a check failed, 2 if no cluster is reachable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

try:
    import submitit
except ImportError:  # pragma: no cover - depends on the environment
    sys.exit(
        "check_submitit: submitit is not importable; run it with the project venv "
        "(.venv/bin/python slurm/check_submitit.py)"
    )


def add(a: int, b: int) -> dict:
    """The single job: return the sum plus what SLURM told the job about itself."""
    return {
        "value": a + b,
        "job_id": os.environ.get("SLURM_JOB_ID"),
        "partition": os.environ.get("SLURM_JOB_PARTITION"),
        "host": socket.gethostname(),
    }


def square(x: int) -> dict:
    """One array task."""
    return {
        "value": x * x,
        "array_job_id": os.environ.get("SLURM_ARRAY_JOB_ID"),
        "task_id": os.environ.get("SLURM_ARRAY_TASK_ID"),
    }


def cluster_reachable() -> str | None:
    """Return None if sbatch exists and slurmctld answers, else a reason."""
    if shutil.which("sbatch") is None:
        return "sbatch not found on PATH"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scontrol ping failed: {exc}"
    if ping.returncode != 0:
        return "slurmctld does not answer (scontrol ping: " + ping.stdout.strip() + ")"
    return None


def wait_done(jobs: list, deadline: float) -> None:
    """Wait for jobs with a hard deadline (job.result() alone can wait forever)."""
    while not all(job.done() for job in jobs):
        if time.monotonic() > deadline:
            for job in jobs:
                if not job.done():
                    job.cancel(check=False)
            raise TimeoutError(
                "jobs not done before the deadline: "
                + ", ".join(j.job_id for j in jobs if not j.done())
            )
        time.sleep(0.2)


def sacct_state(job, timeout_s: float = 20.0) -> str:
    """The job state as sacct reports it (it lags slurmctld by 1-2 s)."""
    deadline = time.monotonic() + timeout_s
    state = "UNKNOWN"
    while time.monotonic() < deadline:
        job.done(force_check=True)
        state = job.state
        if state not in ("UNKNOWN", "PENDING", "RUNNING", "COMPLETING"):
            break
        time.sleep(0.5)
    return state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partition", default="debug")
    parser.add_argument("--timeout-min", type=int, default=2)
    parser.add_argument("--folder", help="submitit log folder (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the log folder")
    parser.add_argument(
        "--deadline-s",
        type=float,
        default=120.0,
        help="give up (and cancel) after this many seconds",
    )
    parser.add_argument(
        "--no-sacct",
        action="store_true",
        help="do not require sacct states (cluster without accounting)",
    )
    args = parser.parse_args()

    reason = cluster_reachable()
    if reason:
        print(
            f"check_submitit: no SLURM cluster: {reason}. "
            "Start one with: bash slurm/dev-cluster.sh start",
            file=sys.stderr,
        )
        return 2

    base = args.folder or tempfile.mkdtemp(prefix="prunebench-submitit-check-")
    folder = os.path.join(base, "%j")
    failures: list[str] = []

    def check(cond: bool, what: str) -> None:
        print(("  ok    " if cond else "  FAIL  ") + what)
        if not cond:
            failures.append(what)

    executor = submitit.AutoExecutor(folder=folder)
    check(executor.cluster == "slurm", f"AutoExecutor chose the slurm backend ({executor.cluster})")
    executor.update_parameters(
        slurm_partition=args.partition,
        timeout_min=args.timeout_min,
        cpus_per_task=1,
        slurm_array_parallelism=4,
    )

    t_start = time.monotonic()
    deadline = t_start + args.deadline_s
    try:
        # --- one job
        t0 = time.monotonic()
        job = executor.submit(add, 2, 3)
        wait_done([job], deadline)
        res = job.result()
        t_single = time.monotonic() - t0
        print(f"single job {job.job_id}: {t_single:.2f}s")
        check(res["value"] == 5, f"single job result value == 5 ({res['value']})")
        check(
            res["job_id"] == str(job.job_id),
            f"job ran under SLURM_JOB_ID {res['job_id']} (submitit id {job.job_id})",
        )
        check(res["partition"] == args.partition, f"job ran in partition {res['partition']}")

        # --- a 4-task array
        items = [0, 1, 2, 3]
        t0 = time.monotonic()
        jobs = executor.map_array(square, items)
        wait_done(jobs, deadline)
        results = [j.result() for j in jobs]
        t_array = time.monotonic() - t0
        print(f"array {jobs[0].job_id.split('_')[0]} of {len(jobs)}: {t_array:.2f}s")
        check(
            [r["value"] for r in results] == [x * x for x in items],
            f"array values {[r['value'] for r in results]}",
        )
        check(
            sorted(r["task_id"] for r in results) == [str(i) for i in range(len(items))],
            f"array task ids {[r['task_id'] for r in results]}",
        )
        array_ids = {r["array_job_id"] for r in results}
        check(
            len(array_ids) == 1
            and all(j.job_id.startswith(f"{a}_") for j in jobs for a in array_ids),
            f"one array job {sorted(array_ids)} with ids {[j.job_id for j in jobs]}",
        )

        # --- accounting: sacct must know the jobs (submitit relies on it for cancel/kill)
        if not args.no_sacct:
            t0 = time.monotonic()
            states = [sacct_state(j) for j in [job, *jobs]]
            check(
                all(s == "COMPLETED" for s in states),
                f"sacct states {states} ({time.monotonic() - t0:.2f}s)",
            )
    except Exception as exc:  # report any submitit / timeout error as a failure
        failures.append(f"{type(exc).__name__}: {exc}")
        print(f"  FAIL  {type(exc).__name__}: {exc}")

    total = time.monotonic() - t_start
    if failures:
        print(
            f"check_submitit: FAILED ({len(failures)} check(s)) after {total:.2f}s; logs in {base}",
            file=sys.stderr,
        )
        return 1
    if not args.keep and not args.folder:
        shutil.rmtree(base, ignore_errors=True)
    print(f"check_submitit: OK in {total:.2f}s (1 job + array of {len(items)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
