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
import os
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

from benchmark.core.errors import CorruptFileError
from benchmark.core.files import FILE_MODE, check_regular, make_dirs, read_regular
from benchmark.store.errors import RunLockedError, StoreWarning
from benchmark.store.owners import (  # noqa: F401 (_process_start: for tests)
    Owner,
    _on_this_host,
    _process_start,
    liveness_here,
    stale_reason,
)
from benchmark.store.release import forget, remove_at_exit
from benchmark.store.squeue import slurm_job_active

LOCK_SUFFIX = ".lockfile"
STALE_ENV = "PRUNEBENCH_LOCK_STALE_S"
DEFAULT_STALE_S = 600.0
# A lock file holds one owner's JSON (~300 bytes); more is not a lock file of ours.
MAX_LOCK_BYTES = 64 * 2**10
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
        """Take the lock; ``wait=False`` raises RunLockedError naming the owner when held.

        From here until :meth:`release`, a signal that ends the process removes the lock file
        first (:mod:`benchmark.store.release`); an interruption (Ctrl-C) that lands between
        creating the file and returning removes it too.
        """
        me = Owner.me()
        remove_at_exit(id(self), lambda: self._drop(me))
        try:
            self._take(me, wait, poll_s)
        except BaseException:
            self._drop(me)  # created just before the interruption: it must not stay
            forget(id(self))
            raise

    def _take(self, me: Owner, wait: bool, poll_s: float) -> None:
        delay = poll_s
        noted = False
        while True:
            # Again each time: a holder refused for its configuration removes an empty folder.
            make_dirs(self.path.parent)
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
                warnings.warn(note, StoreWarning, stacklevel=4)
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _drop(self, me: Owner) -> None:
        """Stop the heartbeat and remove the lock file if it names ``me`` (as the process ends:
        nothing waits, nothing is warned)."""
        self._stop.set()
        if self._holder_token() == me.token:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def release(self) -> None:
        """Give the lock up; a lock another process took over meanwhile is left alone (warned)."""
        owner = self.owner
        try:
            self._stop.set()
            if self._beat is not None:
                self._beat.join()
                self._beat = None
            self._let_go()
        finally:
            if owner is not None:  # interrupted above (Ctrl-C): the file goes all the same
                self._drop(owner)
            forget(id(self))  # after the file went: a signal until then still removes it

    def _let_go(self) -> None:
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
                stacklevel=3,
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
        """Whether the lock file exists, the holder it names and its heartbeat's age; raises
        CorruptFileError for a lock name that is not a regular file (never read)."""
        try:
            mtime = check_regular(self.path).st_mtime
        except FileNotFoundError:
            return False, None, 0.0
        except CorruptFileError as err:
            raise CorruptFileError(
                self.path,
                f"{err.reason}, not a lock file (prunebench makes regular files only): remove "
                "it so that runs can take this lock",
            ) from None
        try:
            owner = _read_owner(self.path)
        except FileNotFoundError:
            return False, None, 0.0
        return True, owner, max(0.0, self._server_now() - mtime)

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
            owner = _read_owner(self.path)
        except (OSError, CorruptFileError):
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
                stacklevel=5,
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


def _read_owner(path: Path) -> Owner | None:
    """The owner the lock file ``path`` names; None when it names none (empty, partial, too
    large, unreadable). Only a regular file is read (CorruptFileError otherwise, as for records:
    a FIFO would block, a device never end); FileNotFoundError when there is none."""
    check_regular(path)
    try:
        data = read_regular(path, MAX_LOCK_BYTES)
    except (CorruptFileError, PermissionError):
        return None  # too large, or swapped for something else since: names no owner
    try:
        return Owner.parse(data.decode())
    except UnicodeDecodeError:
        return None


def _write_synced(path: Path, text: str) -> None:
    """Write ``text`` into the new file ``path`` (a unique name: never an existing file, which
    might be a FIFO that would block) and flush it to disk."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, FILE_MODE), "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def lock_path(folder: Path, name: str) -> Path:
    """The lock file of ``name`` in ``folder``."""
    return Path(folder) / f"{name}{LOCK_SUFFIX}"


def is_held(path: Path) -> bool:
    """Whether the lock file ``path`` is held now by an owner that has not abandoned it (what
    taking it would find; nothing is changed). A lock name that is not a regular file counts as
    held (nothing may act on what it guards), named in a warning."""
    lock = LockFile(path)
    try:
        present, holder, age = lock._inspect()
    except CorruptFileError as err:
        warnings.warn(str(err), StoreWarning, stacklevel=2)
        return True
    return present and stale_reason(holder, age, lock.stale_s) is None


def live_holder(path: Path) -> Owner | None:
    """The owner holding the lock file ``path`` now, if it has not abandoned it (else None, as
    for a lock name that is not a lock file); nothing is changed."""
    lock = LockFile(path)
    try:
        present, holder, age = lock._inspect()
    except CorruptFileError:
        return None
    if present and holder is not None and stale_reason(holder, age, lock.stale_s) is None:
        return holder
    return None


@contextlib.contextmanager
def hold(path: Path, *, wait: bool = True) -> Iterator[LockFile]:
    """Hold the lock file ``path`` for the ``with`` block."""
    lock = LockFile(path)
    lock.acquire(wait=wait)
    try:
        yield lock
    finally:
        lock.release()
