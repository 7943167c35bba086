"""Who holds a lock file, and whether that owner is gone: the process table on the owner's own
host, the heartbeat elsewhere (see :mod:`benchmark.store.locking`).

On the owner's host (and boot) a dead process (or a zombie: exited, not yet reaped) is gone at
once and a live one never is. Where the process table cannot tell (a /proc mounted ``hidepid``
hides other users' processes: ``kill(pid, 0)`` answers EPERM for a live one, which cannot be told
from a process that reused the pid; a host without /proc) the heartbeat decides, as from another
host.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass, fields
from pathlib import Path

# A lock file without a readable owner (a writer died between create and write) is given this
# long before it counts as stale.
UNREADABLE_GRACE_S = 60.0


@dataclass(frozen=True)
class Owner:
    """Who holds a lock: written into the lock file as JSON."""

    host: str
    pid: int
    token: str
    boot_id: str = ""
    start: str = ""  # the process's start time in clock ticks since boot (/proc): pid reuse
    slurm_job: str = ""  # SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID, else SLURM_JOB_ID
    slurm_restarts: int = 0
    since: float = 0.0
    slurm_cluster: str = ""  # SLURM_CLUSTER_NAME: job ids repeat across clusters

    @classmethod
    def me(cls) -> Owner:
        """This process."""
        pid = os.getpid()
        return cls(
            host=socket.gethostname(),
            pid=pid,
            token=uuid.uuid4().hex,
            boot_id=_boot_id(),
            start=_process_start(pid) or "",
            slurm_job=slurm_job_id(),
            slurm_restarts=_int(os.environ.get("SLURM_RESTART_COUNT", "0")),
            since=time.time(),
            slurm_cluster=os.environ.get("SLURM_CLUSTER_NAME", ""),
        )

    def text(self) -> str:
        """The lock file's content."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner a lock file names; None when it is not one of ours (empty, partial).
        Fields a later version adds are ignored."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        known = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError:
            return None

    def describe(self) -> str:
        """E.g. ``pid 4242 on node c12 (SLURM job 1234_5) since 12:00:01``."""
        job = f" (SLURM job {self.slurm_job})" if self.slurm_job else ""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on {self.host}{job} since {when}"


def slurm_job_id() -> str:
    """This process's SLURM job (an array task as ``JOB_TASK``), or '' outside SLURM."""
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return os.environ.get("SLURM_JOB_ID", "")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _proc_stat(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (the state) on; None when the process does not exist, []
    when it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return stat[stat.rfind(")") + 2 :].split()


def _process_start(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (start time); None when the process does not exist."""
    fields = _proc_stat(pid)
    if fields is None:
        return None
    return fields[19] if len(fields) > 19 else ""


# Process states of /proc/PID/stat that are no longer running: zombie (exited, not yet reaped
# by its parent) and dead.
GONE_STATES = {"Z", "X", "x"}


def liveness_here(owner: Owner) -> bool | None:
    """Whether ``owner``'s process (on this host and boot) still runs: True, False (gone, a
    zombie, or its pid reused by another process), or None when this host cannot tell.

    A /proc mounted with ``hidepid`` (shared login and compute nodes) shows no process of
    another user, so a missing /proc entry proves nothing: the kernel decides whether the pid
    exists (``kill(pid, 0)``: ESRCH means gone, EPERM means a process of another user runs
    under it). Such a process, or one on a host without /proc, cannot be told from another
    that reused its pid: None, and the heartbeat decides.
    """
    fields = _proc_stat(owner.pid)
    if fields:
        if fields[0] in GONE_STATES:
            return False
        start = fields[19] if len(fields) > 19 else ""
        return not (owner.start and start and start != owner.start)  # else: pid reused
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return None  # another user's process: hidden from this user's /proc, or not ours
    return None  # a process this user may signal that /proc does not show (no /proc here)


def stale_reason(owner: Owner | None, age_s: float, limit_s: float) -> str | None:
    """Why a lock held by ``owner`` (heartbeat ``age_s`` seconds ago) is abandoned, or None."""
    if owner is None:
        return f"it names no owner and is {age_s:.0f} s old" if age_s > UNREADABLE_GRACE_S else None
    me = Owner.me()
    if _on_this_host(owner, me):
        # Here the process table is the truth where it can be read: a live owner (even one
        # stopped with Ctrl-Z, whose heartbeat pauses) keeps its lock, a dead one loses it at
        # once; where it tells nothing (another user's process under hidepid), the heartbeat.
        alive = liveness_here(owner)
        if alive is not None:
            return None if alive else "its process no longer exists"
        if age_s > limit_s:
            return (
                f"its heartbeat stopped {age_s:.0f} s ago (limit {limit_s:.0f} s) and this "
                f"user cannot see its process {owner.pid}"
            )
        return None
    if (
        owner.slurm_job
        and owner.slurm_job == me.slurm_job
        and owner.slurm_cluster == me.slurm_cluster
        and owner.slurm_restarts < me.slurm_restarts
    ):
        return f"its SLURM job {owner.slurm_job} was requeued and now runs here"
    if age_s > limit_s:
        return f"its heartbeat stopped {age_s:.0f} s ago (limit {limit_s:.0f} s)"
    # From another host only the heartbeat tells: the local squeue may not know the owner's
    # cluster (a store two clusters mount), so a fresh heartbeat keeps the lock.
    return None


def _on_this_host(owner: Owner, me: Owner) -> bool:
    return owner.host == me.host and owner.boot_id == me.boot_id
