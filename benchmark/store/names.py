"""Second names of store files: a hard link where the filesystem has them, an atomic copy where
it does not (SMB, FUSE object stores), and names made ahead of time so that the final write's
held-signal window (:mod:`benchmark.store.deferred`) holds only renames, never a copy of weights.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from benchmark.core.files import TMP_SUFFIX, make_dirs, tmp_prefix


def link_or_copy(source: Path, target: Path) -> None:
    """Give ``source`` the further name ``target``: a hard link, else an atomic copy."""
    try:
        os.link(source, target)
    except FileNotFoundError:
        raise
    except OSError:
        tmp = temporary_name(target)
        try:
            shutil.copy2(source, tmp)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)


def link_over(source: Path, target: Path) -> None:
    """Make ``target`` another name of ``source``, replacing ``target`` atomically."""
    tmp = temporary_name(target)
    make_dirs(target.parent)
    try:
        link_or_copy(source, tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are names of one file (False when either is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def temporary_name(target: Path) -> Path:
    """A unique temporary name beside ``target`` (``.<name>.<random>.tmp``)."""
    return target.with_name(f"{tmp_prefix(target)}{uuid.uuid4().hex}{TMP_SUFFIX}")


@dataclass
class SecondName:
    """A second name of ``source`` made ahead of time, at ``path`` (a temporary name beside
    where it is to go): :meth:`move_to` later gives it its place by one rename."""

    source: Path
    path: Path
    seen: tuple[int, int, int, int]  # the source's device, inode, size and mtime when named

    @classmethod
    def make(cls, source: Path, near: Path) -> SecondName:
        """A hard link to (else a copy of) ``source`` under a temporary name beside ``near``;
        FileNotFoundError when ``source`` does not exist."""
        seen = _identity(source)
        make_dirs(near.parent)
        path = temporary_name(near)
        link_or_copy(source, path)
        return cls(source, path, seen)

    def move_to(self, target: Path) -> bool:
        """Rename the second name to ``target`` if ``source`` is still the file it named (else
        False: the caller names the new one); FileNotFoundError when ``source`` is gone."""
        if _identity(self.source) != self.seen:
            return False
        os.replace(self.path, target)
        return True

    def discard(self) -> None:
        """Remove the second name if it was not moved into place."""
        self.path.unlink(missing_ok=True)


def _identity(path: Path) -> tuple[int, int, int, int]:
    info = os.stat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
