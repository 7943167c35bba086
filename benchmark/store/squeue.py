"""What the local ``squeue`` says about a SLURM job, asked at most once a minute per job.

Only a hint for messages: a store may be mounted by two clusters, so a job the local ``squeue``
does not list may still run elsewhere (:mod:`benchmark.store.locking` decides from heartbeats).
"""

from __future__ import annotations

import shutil
import subprocess
import time

# How often a waiter asks squeue about the same job.
SQUEUE_EVERY_S = 60.0
ACTIVE_SLURM_STATES = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING"}

SEEN: dict[str, tuple[float, bool | None]] = {}


def slurm_job_active(job: str) -> bool | None:
    """What ``squeue`` says about ``job``: True (queued or running), False (gone), None (no
    answer: no SLURM here, or an error other than an unknown job)."""
    now = time.monotonic()
    seen = SEEN.get(job)
    if seen is not None and now - seen[0] < SQUEUE_EVERY_S:
        return seen[1]
    answer: bool | None = None
    if shutil.which("squeue") is not None:
        try:
            out = subprocess.run(
                ["squeue", "-h", "-j", job, "-o", "%T"],
                capture_output=True,
                text=True,
                timeout=20,
            )
            if out.returncode == 0:
                states = set(out.stdout.split())
                answer = bool(states & ACTIVE_SLURM_STATES)
            elif "invalid job id" in out.stderr.lower():
                answer = False
        except (OSError, subprocess.SubprocessError):
            answer = None
    SEEN[job] = (now, answer)
    return answer
