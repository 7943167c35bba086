"""Local workers (``submit --executor local``): one stop for the whole worker, and dead workers.

A local worker is two processes: submitit's controller (the pid ``submit`` prints) and the task
it starts, which trains the runs. submitit ignores SIGTERM in the task (on SLURM it comes with
every preemption) and nothing stops the task when the controller dies, so stopping the
controller alone used to leave the task training, as an orphan, after ``submit`` had returned.
In a local worker's task :func:`follow_local_worker` makes SIGTERM and SIGINT stop it (the
controller forwards its own SIGTERM: ``kill PID`` stops both), asks the kernel to send it SIGTERM
when the controller dies (``kill -9 PID`` too), and watches its parent as well (where the kernel
cannot be asked, or the parent is a shell). Both handlers are set by the task itself, so signals
that the shell which started ``submit`` ignores (a script's background job ignores SIGINT) stop
it all the same. Either way the run stops as on Ctrl-C, releasing its locks, and resumes from its
checkpoint when submitted again. A task that outlived its worker all the same (it holds its run's
lock) is named, with its pid, by ``submit`` and by the next ``submit`` (:func:`outliving_tasks`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from benchmark.core.files import append_regular, make_dirs
from benchmark.launch.planning import _plural
from benchmark.launch.scheduler import JobState
from benchmark.store.owners import Owner
from benchmark.store.results import Store
from benchmark.store.submissions import JobRef

# prctl(2): PR_SET_PDEATHSIG, the signal the kernel sends this process when its parent dies.
PR_SET_PDEATHSIG = 1


# How often a task looks whether its worker (its parent) still lives.
WATCH_PARENT_S = 1.0


def follow_local_worker() -> None:
    """In the task of a local worker: stop when the worker is stopped (see the module doc).
    Does nothing in other executors (SLURM's SIGTERM stays submitit's)."""
    if os.environ.get("SUBMITIT_EXECUTOR") != "local":
        return
    # Set here whatever the launching shell ignored: both raise KeyboardInterrupt.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the watcher below only
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    controller = os.environ.get("SUBMITIT_LOCAL_JOB_ID", "")
    direct = not os.environ.get("SUBMITIT_LOCAL_WITH_SHELL")
    if direct and controller.isdigit() and os.getppid() != int(controller):
        # The controller died before the kernel could be told: this task is already orphaned.
        raise KeyboardInterrupt(f"local worker {controller} is gone")
    watch_parent(os.getppid())


def watch_parent(parent: int, every_s: float = WATCH_PARENT_S) -> threading.Thread:
    """Send this process SIGTERM once ``parent`` is no longer its parent (it died: the task is
    reparented), in case the kernel's parent-death signal does not come."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="watch local worker", daemon=True)
    thread.start()
    return thread


def outliving_tasks(store: Store, runs: Iterable[str]) -> dict[str, Owner]:
    """Runs of ``runs`` that a submitit task of this host still trains (it holds the run's lock)
    although their worker ended: run id -> that process."""
    here = socket.gethostname()
    found = {}
    for rid in runs:
        owner = store.lock_holder(f"run-{rid}")
        if owner is not None and owner.host == here and _submitit_task(owner.pid):
            found[rid] = owner
    return found


def _submitit_task(pid: int) -> bool:
    """Whether process ``pid`` is a submitit task (not another job that trains the run)."""
    try:
        return b"submitit.core._submit" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def outlived_note(tasks: Mapping[str, Owner]) -> str:
    """E.g. ``run X is still trained by pid 4243, the task of a local worker that ended: stop
    it with kill 4243``."""
    parts = [f"run {rid} is still trained by pid {o.pid}" for rid, o in sorted(tasks.items())]
    pids = " ".join(str(o.pid) for o in tasks.values())
    return (
        f"{'; '.join(parts)}, the task of a local worker that ended: stop it with `kill {pids}` "
        "(it resumes from its checkpoint when submitted again)"
    )


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


@contextlib.contextmanager
def stderr_into(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` (appending) while child processes are started."""
    make_dirs(path.parent)
    sys.stderr.flush()
    with append_regular(path) as log:  # a FIFO or a device there is refused, never blocks
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
