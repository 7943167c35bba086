"""Lock files that hold on shared filesystems, where ``flock`` may fail or be node-local.

``fcntl.flock`` is not used: on Lustre mounted without ``flock``, BeeGFS by default and some NFS
setups it fails (``ENOSYS``), and where it is node-local (Lustre's ``localflock``) two jobs on
two nodes both "hold" it, which no process can detect from its own node. A lock here is a file
that exists only while it is held, ``<folder>/<name>.lockfile``, created atomically:

* the owner writes its description (host, pid, boot id, process start time, SLURM job id and
  restart count, a random token) into a claim file beside it and hard-links the claim to the lock
  name: ``link`` is atomic and fails when the name exists on every filesystem considered (NFSv2+,
  Lustre, GPFS, BeeGFS, local disks); where the filesystem refuses hard links the lock name is
  created with ``O_CREAT | O_EXCL`` instead (atomic on NFSv3+ and the others);
* while held, a daemon thread refreshes the file's modification time (the heartbeat);
* release removes the file if it still holds the owner's token.

A lock whose owner is gone is recovered, with a :class:`StoreWarning` naming the owner and why.
On the owner's own host (and boot) the process table decides: a dead process (or a zombie: exited,
not yet reaped) loses its lock at once, a live one never. Where the process table cannot tell (a
/proc mounted ``hidepid`` hides other users' processes; ``kill(pid, 0)`` then answers EPERM for a
live one, which cannot be told from a process that reused the pid) the heartbeat decides, as from
another host. From another host the heartbeat decides:
an owner whose heartbeat is older than :func:`stale_after` (``PRUNEBENCH_LOCK_STALE_S``, 600 s by
default) loses it, and a fresh heartbeat keeps it whatever the local ``squeue`` says (the store may
be mounted by two clusters, or ``squeue`` may ask another one); only a SLURM job of the same
cluster that was requeued (same job id, a higher ``SLURM_RESTART_COUNT``) takes over its own
earlier lock at once. A waiter says so, once, when the holder's heartbeat has stopped (and whether
``squeue`` still lists its job), and when the lock will count as abandoned. Breaking goes through
a short-lived ``.break`` lock and re-reads the token first, so two waiters never remove a lock that
a third has just taken.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from benchmark.store.errors import RunLockedError, StoreWarning
from benchmark.store.squeue import slurm_job_active

LOCK_SUFFIX = ".lockfile"
STALE_ENV = "PRUNEBENCH_LOCK_STALE_S"
DEFAULT_STALE_S = 600.0
# A lock file without a readable owner (a writer died between create and write) is given this
# long before it counts as stale.
UNREADABLE_GRACE_S = 60.0
# A .break file older than this belongs to a breaker that died (breaking takes milliseconds).
BREAK_STALE_S = 60.0
# A holder whose heartbeat is this many beats late has probably stopped: a waiter says so.
STOPPED_BEATS = 3
# Errors by which a filesystem says it does not do hard links.
NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS, errno.EMLINK}


def stale_after() -> float:
    """Seconds without a heartbeat after which a lock counts as abandoned (from any host)."""
    try:
        return max(1.0, float(os.environ.get(STALE_ENV, DEFAULT_STALE_S)))
    except ValueError:
        return DEFAULT_STALE_S


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


def waiting_note(path: Path, owner: Owner | None, age_s: float, limit_s: float) -> str:
    """What a waiter says about a lock whose holder's heartbeat has stopped."""
    who = owner.describe() if owner is not None else "an unknown owner"
    gone = ""
    if owner is not None and owner.slurm_job:
        active = slurm_job_active(owner.slurm_job)
        if active is False:
            gone = f"; squeue here no longer lists SLURM job {owner.slurm_job}"
    return (
        f"waiting for lock {path}, held by {who}: its heartbeat stopped {age_s:.0f} s ago"
        f"{gone}; it counts as abandoned once that reaches {limit_s:.0f} s "
        f"({STALE_ENV}), in about {max(0.0, limit_s - age_s):.0f} s"
    )


class LockFile:
    """An exclusive lock on ``path`` (see the module docstring); a context manager.

    Not re-entrant: a second acquire of the same path, even from the same thread, waits.
    """

    def __init__(
        self,
        path: Path,
        *,
        stale_s: float | None = None,
        heartbeat_s: float | None = None,
    ) -> None:
        self.path = Path(path)
        self.stale_s = stale_after() if stale_s is None else stale_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else min(30.0, self.stale_s / 10)
        self.owner: Owner | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # ------------------------------------------------------------------ acquire / release
    def acquire(self, wait: bool = True, poll_s: float = 0.05) -> None:
        """Take the lock; ``wait=False`` raises RunLockedError naming the owner when held."""
        me = Owner.me()
        delay = poll_s
        noted = False
        while True:
            # Again each time: a holder refused for its configuration removes an empty folder.
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                created = self._create(me)
            except FileNotFoundError:  # the folder went between the two lines: again
                continue
            if created:
                self.owner = me
                self._start_heartbeat()
                return
            present, holder, age = self._inspect()
            if not present:
                continue  # released between our two looks
            reason = stale_reason(holder, age, self.stale_s)
            if reason is not None:
                self._break(holder, reason)
                continue
            if not wait:
                who = holder.describe() if holder is not None else "an unknown owner"
                raise RunLockedError(f"{self.path.name} is held by {who} ({self.path})")
            if (
                not noted
                and age > STOPPED_BEATS * self.heartbeat_s
                and (
                    holder is None or not _on_this_host(holder, me) or liveness_here(holder) is None
                )
            ):
                # A holder on another node that died: say why this waits (up to the limit).
                noted = True
                note = waiting_note(self.path, holder, age, self.stale_s)
                warnings.warn(note, StoreWarning, stacklevel=3)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def release(self) -> None:
        """Give the lock up; a lock another process took over meanwhile is left alone (warned)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        owner, self.owner = self.owner, None
        if owner is None:
            return
        if self._holder_token() == owner.token:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        else:
            warnings.warn(
                f"lock {self.path} was recovered by another process while this one "
                f"({owner.describe()}) held it; it is left to that process",
                StoreWarning,
                stacklevel=2,
            )

    def __enter__(self) -> LockFile:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ------------------------------------------------------------------ internals
    def _create(self, me: Owner) -> bool:
        """Atomically create the lock file naming ``me``; False when it exists."""
        claim = self.path.with_name(f".{self.path.name}.{me.token}.claim")
        _write_synced(claim, me.text())
        try:
            try:
                os.link(claim, self.path)
                return True
            except FileExistsError:
                return False
            except OSError as err:
                # NFS: the reply to a link that succeeded can be lost; the claim then has two
                # names (the classic check of NFS-safe lock files).
                with contextlib.suppress(OSError):
                    if os.stat(claim).st_nlink == 2 and self._holder_token() == me.token:
                        return True
                if err.errno not in NO_LINK:
                    raise
            return self._create_exclusive(me)
        finally:
            with contextlib.suppress(OSError):
                claim.unlink()

    def _create_exclusive(self, me: Owner) -> bool:
        """O_CREAT | O_EXCL, for filesystems without hard links."""
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as fh:
            fh.write(me.text())
            fh.flush()
            os.fsync(fh.fileno())
        return True

    def _inspect(self) -> tuple[bool, Owner | None, float]:
        """Whether the lock file exists, the holder it names and its heartbeat's age."""
        try:
            text = self.path.read_text()
            mtime = os.stat(self.path).st_mtime
        except FileNotFoundError:
            return False, None, 0.0
        except (OSError, UnicodeDecodeError):
            text, mtime = "", _mtime(self.path)
        return True, Owner.parse(text), max(0.0, self._server_now() - mtime)

    def _server_now(self) -> float:
        """Now, by the clock of the filesystem that stamps the heartbeats (nodes' clocks drift)."""
        probe = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.now")
        try:
            probe.touch()
            try:
                return os.stat(probe).st_mtime
            finally:
                probe.unlink()
        except OSError:
            return time.time()

    def _holder_token(self) -> str | None:
        try:
            owner = Owner.parse(self.path.read_text())
        except (OSError, UnicodeDecodeError):
            return None
        return owner.token if owner is not None else None

    def _break(self, holder: Owner | None, reason: str) -> None:
        """Remove an abandoned lock, under a short ``.break`` lock, if it is still that one."""
        breaker = self.path.with_name(self.path.name + ".break")
        try:
            fd = os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if time.time() - _mtime(breaker) > BREAK_STALE_S:
                with contextlib.suppress(FileNotFoundError):
                    breaker.unlink()
            else:
                time.sleep(0.01)  # another process is breaking it right now
            return
        os.close(fd)
        try:
            token = holder.token if holder is not None else None
            if self._holder_token() != token:
                return  # released or taken over meanwhile: look again
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            who = holder.describe() if holder is not None else "an unknown owner"
            warnings.warn(
                f"recovered the stale lock {self.path} of {who}: {reason}",
                StoreWarning,
                stacklevel=4,
            )
        finally:
            with contextlib.suppress(FileNotFoundError):
                breaker.unlink()

    def _start_heartbeat(self) -> None:
        self._stop = threading.Event()
        self._beat = threading.Thread(
            target=self._heartbeat, name=f"heartbeat {self.path.name}", daemon=True
        )
        self._beat.start()

    def _heartbeat(self) -> None:
        owner = self.owner
        while not self._stop.wait(self.heartbeat_s):
            if owner is None or self._holder_token() != owner.token:
                return  # taken over: release() says so
            with contextlib.suppress(OSError):
                os.utime(self.path)


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return time.time()


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def lock_path(folder: Path, name: str) -> Path:
    """The lock file of ``name`` in ``folder``."""
    return Path(folder) / f"{name}{LOCK_SUFFIX}"


def is_held(path: Path) -> bool:
    """Whether the lock file ``path`` is held now by an owner that has not abandoned it (what
    taking it would find; nothing is changed)."""
    lock = LockFile(path)
    present, holder, age = lock._inspect()
    return present and stale_reason(holder, age, lock.stale_s) is None


@contextlib.contextmanager
def hold(path: Path, *, wait: bool = True) -> Iterator[LockFile]:
    """Hold the lock file ``path`` for the ``with`` block."""
    lock = LockFile(path)
    lock.acquire(wait=wait)
    try:
        yield lock
    finally:
        lock.release()
