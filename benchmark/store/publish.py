"""Making a staged result file a run's result without relying on a lock.

The store lock serialises writers, but a result must not be lost where no lock holds (flock that
is node-local, a lock file broken by mistake). So the final write is safe on its own:

* the record is first written completely to a staged file with a unique name beside the result
  (``.<run>.json.<token>.staged``), so a crash leaves either nothing or a whole file;
* it becomes the result by a hard link to ``<run>.json``, which is atomic and fails when that
  name exists: of two writers, exactly one wins;
* a result that is to be replaced (a failed record, a damaged one, or with ``--force`` the
  finished result the writer started from) is first renamed into ``archive/``; what was renamed
  is read back, and a finished result that another writer published in between is put back:
  it came first, so it stays the result, and the later one goes to the archive.

Hard links work within one folder on every filesystem considered (NFS, Lustre, GPFS, BeeGFS,
local disks). Where a filesystem refuses them, the staged file is renamed onto a result that is
absent, which relies on the store's lock file (still atomic-create there).
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

FINISHED = "finished"


class _AnyResult:
    """``replaces=ANY_RESULT``: a forced write replaces whichever finished result is there."""

    def __repr__(self) -> str:
        return "ANY_RESULT"


ANY_RESULT: Any = _AnyResult()
# Attempts to publish one result before giving up (each lost only to another writer's step).
MAX_ATTEMPTS = 1000
# Errors by which a filesystem refuses a hard link (BeeGFS: EXDEV across folders).
NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}


def claim(staged: Path, path: Path) -> bool:
    """Give the staged file the name ``path`` unless ``path`` exists; True when it did.

    The staged name is removed on success. Atomic where the filesystem has hard links.
    """
    try:
        os.link(staged, path)
    except FileExistsError:
        return False
    except OSError as err:
        if _linked(staged, path):  # NFS: the reply to a link that succeeded was lost
            pass
        elif err.errno in NO_LINK:
            if path.exists():
                return False
            os.replace(staged, path)  # no hard links here: the store lock keeps this safe
            return True
        else:
            raise
    with contextlib.suppress(FileNotFoundError):
        staged.unlink()
    return True


def _linked(staged: Path, path: Path) -> bool:
    try:
        return os.path.samefile(staged, path)
    except OSError:
        return False


def same_result(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two records are the same attempt's result (metrics merged in later, e.g. by
    ``prunebench latency``, do not make it another one)."""
    keys = ("status", "started", "finished")
    if all(k in a and k in b for k in keys):
        return all(a[k] == b[k] for k in keys)
    return dict(a) == dict(b)


def may_replace(
    current: Mapping[str, Any],
    record: Mapping[str, Any],
    *,
    force: bool,
    replaces: Mapping[str, Any] | None,
) -> bool:
    """Whether ``record`` may replace the finished result ``current`` (see :func:`publish`)."""
    if not (record.get("status") == FINISHED and force):
        return False
    return replaces is ANY_RESULT or (replaces is not None and same_result(current, replaces))


def publish(
    staged: Path,
    path: Path,
    record: Mapping[str, Any],
    *,
    force: bool,
    replaces: Mapping[str, Any] | None,
    read: Callable[[Path], dict[str, Any] | None],
    set_aside: Callable[[Path, dict[str, Any] | None], Path | None],
) -> bool:
    """Make ``staged`` (holding ``record``) the result at ``path``; False when a finished result
    that it may not replace is there (the staged file is then left to the caller).

    A finished result is replaced only by a finished record with ``force``, and only if it is
    ``replaces``, the record the writer started from (None: it started from none), so that a
    forced rerun that finishes second does not replace the first; :data:`ANY_RESULT` replaces
    whichever finished result is there. ``read(path)`` returns the record
    there (None when it is damaged; FileNotFoundError when absent); ``set_aside(path,
    current)`` renames it into the archive and returns where it went (None if it vanished).
    """
    for _ in range(MAX_ATTEMPTS):
        if claim(staged, path):
            return True
        try:
            current = read(path)
        except FileNotFoundError:
            continue
        if current is not None and current.get("status") == FINISHED:
            if not may_replace(current, record, force=force, replaces=replaces):
                return False
        moved = set_aside(path, current)
        if moved is None:
            continue
        try:
            taken = read(moved)
        except FileNotFoundError:
            taken = None
        slipped_in = (
            taken is not None
            and taken.get("status") == FINISHED
            and (current is None or not same_result(taken, current))
        )
        if slipped_in:
            # Another writer's finished result arrived between our look and the rename: it came
            # first, so it goes back (if the name is still free; else it stays archived).
            claim(moved, path)
        elif taken is not None and taken.get("status") != FINISHED:
            moved.unlink(missing_ok=True)  # a failed record is replaced, as it always was
    # Each pass loses only to another writer's step: so many in a row mean the reads disagree
    # (a bug), and the final write runs with signals held, so looping would be unstoppable.
    raise RuntimeError(f"result {path}: no stable state after {MAX_ATTEMPTS} attempts to publish")
