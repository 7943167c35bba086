"""Local workers (``submit --executor local``): one stop for the whole worker, and dead workers.

A local worker is two processes: submitit's controller (the pid ``submit`` prints) and the task
it starts, which trains the runs. submitit ignores SIGTERM in the task (on SLURM it comes with
every preemption) and nothing stops the task when the controller dies, so stopping the
controller alone used to leave the task training, as an orphan, after ``submit`` had returned.
In a local worker's task :func:`follow_local_worker` makes SIGTERM stop it (the controller
forwards its own SIGTERM: ``kill PID`` stops both), and asks the kernel to send it SIGINT when
the controller dies (``kill -9 PID`` too). Either way the run stops as on Ctrl-C and resumes from
its checkpoint when submitted again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
from collections.abc import Mapping
from typing import Any

from benchmark.launch.planning import _plural
from benchmark.launch.scheduler import JobState
from benchmark.store.submissions import JobRef

# prctl(2): PR_SET_PDEATHSIG, the signal the kernel sends this process when its parent dies.
PR_SET_PDEATHSIG = 1


def follow_local_worker() -> None:
    """In the task of a local worker: stop when the worker is stopped (see the module doc).
    Does nothing in other executors (SLURM's SIGTERM stays submitit's)."""
    if os.environ.get("SUBMITIT_EXECUTOR") != "local":
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(OSError, AttributeError):  # not Linux: only SIGTERM stops it
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
    controller = os.environ.get("SUBMITIT_LOCAL_JOB_ID", "")
    direct = not os.environ.get("SUBMITIT_LOCAL_WITH_SHELL")
    if direct and controller.isdigit() and os.getppid() != int(controller):
        # The controller died before the kernel could be told: this task is already orphaned.
        raise KeyboardInterrupt(f"local worker {controller} is gone")


def dead_local_workers(
    index: Mapping[str, JobRef],
    records: Mapping[str, dict[str, Any] | None],
    states: Mapping[str, JobState],
) -> dict[str, list[str]]:
    """Local workers of this host that ended without writing a result for some of their runs
    (killed or stopped): worker pid -> those runs."""
    here = socket.gethostname()
    dead: dict[str, list[str]] = {}
    for rid, record in records.items():
        ref = index.get(rid)
        if record is not None or ref is None or ref.executor != "local" or ref.host != here:
            continue
        state = states.get(ref.job_id)
        if state is not None and not state.active:
            dead.setdefault(ref.job_id, []).append(rid)
    return dead


def dead_worker_note(dead: Mapping[str, list[str]]) -> str:
    """E.g. ``local worker 4242 (3 runs) ended without a result for their runs (killed or
    stopped); ...``."""
    parts = [f"{pid} ({_plural(len(runs), 'run')})" for pid, runs in sorted(dead.items())]
    return (
        f"local worker{'s' if len(dead) > 1 else ''} {', '.join(parts)} ended without a result "
        "for their runs (killed or stopped); submitted again, they resume from their checkpoints"
    )
