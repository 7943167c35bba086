"""What can go wrong in a store: a result that exists, a run that is locked, a damaged file, a
write the filesystem refuses (said in one line with the fix)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class ResultExistsError(RuntimeError):
    """A finished result would be overwritten."""


class RunLockedError(RuntimeError):
    """Another process is running the same run id right now."""


class StoreWarning(UserWarning):
    """A store file is damaged: it is named, set aside or skipped, and the rest goes on."""


class CorruptRecord(ValueError):
    """A result JSON that is not a run record."""


# The folders of a store (a file's store root is the folder that holds them).
STORE_FOLDERS = frozenset({".locks", "weights", "checkpoints", "archive", "grids", "calibration"})


def store_root(path: Path) -> Path:
    """The store a file or folder of it belongs to: the folder holding its ``.locks``,
    ``weights``, ... (``path``'s own folder when it is a record at the top)."""
    path = Path(path)
    for folder in path.parents:
        if folder.name in STORE_FOLDERS:
            return folder.parent
    return path.parent


def storage_error(err: OSError) -> str | None:
    """One line for a write the filesystem refused: the file, what is wrong and the fix; None
    for other errors (permission denied, read-only filesystem, no space or quota left)."""
    if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT):
        return None
    name = err.filename or "a store file"
    if err.errno == errno.EROFS:
        return f"cannot write {name}: the filesystem is read-only; use a writable store (--store)"
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "no space is left on its device" if err.errno == errno.ENOSPC else "quota exceeded"
        return (
            f"cannot write {name}: {what}; free some (prunebench free removes the final weights "
            "no table needs) or use another store; nothing written so far is lost"
        )
    path = Path(name)
    folder = path if path.is_dir() else path.parent
    root = store_root(path)
    owner = _owner(folder)
    return (
        f"cannot write {name}: permission denied ({folder} is {_mode(folder)}{owner}); a "
        f"store's folders must be writable by everyone who writes to it: for a group's store, "
        f"chmod -R g+w {root} (as the owner of its folders), or create it under umask 002"
    )


def _mode(folder: Path) -> str:
    try:
        return stat.filemode(os.stat(folder).st_mode)
    except OSError:
        return "not accessible"


def _owner(folder: Path) -> str:
    try:
        uid = os.stat(folder).st_uid
    except OSError:
        return ""
    try:
        import pwd

        return f", owned by {pwd.getpwuid(uid).pw_name}"
    except (ImportError, KeyError):
        return f", owned by uid {uid}"
