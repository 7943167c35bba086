"""Atomic checkpoint and JSON writes, and loads that never run code from a file.

A crash never leaves a half-written file behind: every write goes to a temporary file beside the
target (``.<name>.<random>.tmp``) and is renamed over it. Checkpoints and weights are read with
``torch.load(weights_only=True)``, which only rebuilds tensors, plain containers, numbers and
strings, so a crafted ``.pt`` file in a store copied from elsewhere cannot run code; a file that
does not load that way is reported as :class:`CorruptFileError`, naming it.

Final weights are written packed (:mod:`benchmark.core.packed`: the nonzero values and a bitmask
or their positions) and every load unpacks them, so readers always get the plain state dict.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import stat
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from benchmark.core.errors import CorruptFileError
from benchmark.core.packed import is_packed, pack_state, unpack_state

if TYPE_CHECKING:
    import torch

__all__ = [
    "CorruptFileError",
    "load_checkpoint",
    "save_checkpoint",
    "save_weights",
    "write_json_atomic",
]

TMP_SUFFIX = ".tmp"
# New files get these permission bits less the umask, as ``open()`` creates them: a store that a
# group shares is readable (and, under umask 002, writable) by the group.
FILE_MODE = 0o666


def make_dirs(path: Path) -> None:
    """``path`` and its missing parents, as ``mkdir -p`` makes them (modes from the umask),
    except that a folder made inside a group-writable folder is group-writable too, whatever the
    umask: a store whose root folder a group may write (``chmod g+ws``) stays writable by the
    group when a member whose umask is 022 creates its ``.locks``, ``weights`` or ``archive``."""
    path = Path(path)
    if path.is_dir():
        return
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    path.mkdir(parents=True, exist_ok=True)
    for folder in reversed(missing):  # parents first: each one's mode decides its child's
        _writable_like_parent(folder)


def _writable_like_parent(folder: Path) -> None:
    try:
        parent, mine = os.stat(folder.parent), os.stat(folder)
    except OSError:
        return
    group = stat.S_IRGRP | stat.S_IWGRP | stat.S_IXGRP
    wanted = stat.S_IMODE(mine.st_mode) | group
    if (
        parent.st_mode & stat.S_IWGRP
        and mine.st_uid == os.geteuid()
        and (stat.S_IMODE(mine.st_mode) != wanted)
    ):
        with contextlib.suppress(OSError):
            os.chmod(folder, wanted)


def unique_stamp() -> str:
    """A time stamp that no other call, here or in another process, returns."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:12]}"


def tmp_prefix(path: Path) -> str:
    """The name prefix of the temporary files that a write of ``path`` creates."""
    return f".{path.name}."


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path`` (``.<name>.<random>.tmp``), its mode as the umask
    makes it (``tempfile.mkstemp`` would make it 0600 for good once renamed)."""
    while True:
        tmp = str(path.parent / f"{tmp_prefix(path)}{uuid.uuid4().hex[:12]}{TMP_SUFFIX}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        try:
            return os.open(tmp, flags, FILE_MODE), tmp
        except FileExistsError:
            continue


def _atomic_replace(path: Path, write: Any) -> None:
    """Write through ``write(file)`` into a temporary file beside ``path``, then rename it."""
    make_dirs(path.parent)
    fd, tmp = _create_temporary(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Atomically save a checkpoint dict with torch.save (tensors and plain values only)."""
    import torch  # here, not at the top: the command line reads stores without loading torch

    _atomic_replace(path, lambda fh: torch.save(state, fh))


def save_weights(state: dict[str, Any], path: Path) -> None:
    """Atomically save a model's final state dict, its sparse tensors packed
    (:func:`benchmark.core.packed.pack_state`); :func:`load_checkpoint` reads it back exactly."""
    import torch

    _atomic_replace(path, lambda fh: torch.save(pack_state(state), fh))


def load_checkpoint(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Load a checkpoint or weights file without running code (packed weights unpacked);
    raises CorruptFileError."""
    import torch

    with open_regular(path) as fh:  # a FIFO or a device would hang torch.load
        try:
            state = torch.load(fh, map_location=device, weights_only=True)
        except Exception as err:  # unpickling refused, truncated zip, garbage: all unusable
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise CorruptFileError(
                path, f"not a loadable checkpoint ({type(err).__name__}: {first[:200]})"
            ) from None
    if not isinstance(state, dict):
        raise CorruptFileError(path, f"holds a {type(state).__name__}, not a checkpoint dict")
    if is_packed(state):
        try:
            state = unpack_state(state)
        except ValueError as err:
            raise CorruptFileError(path, str(err)) from None
    return state


def read_regular(path: Path, limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; raises
    CorruptFileError otherwise (a FIFO, a device, a folder, a file too large), without blocking
    or reading more than ``limit`` bytes. FileNotFoundError when it does not exist."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise CorruptFileError(path, f"{size} bytes, over the limit of {limit}")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise CorruptFileError(path, f"over the limit of {limit} bytes")
    return data


def check_regular(path: Path) -> os.stat_result:
    """``path``'s status if it is a regular file (links followed); raises CorruptFileError naming
    what it is otherwise (a FIFO would block a reader, a device never end), FileNotFoundError
    when it does not exist. Nothing is opened."""
    info = os.stat(path)
    kind = _kind(info.st_mode)
    if kind != "regular file":
        raise CorruptFileError(path, f"not a regular file (a {kind})")
    return info


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (see :func:`check_regular`), checked
    before opening (opening a device may act) and again on the open file; never blocks."""
    check_regular(path)
    # O_NONBLOCK: a FIFO swapped in after the check must not block the open.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    fh = os.fdopen(fd, "rb")
    kind = _kind(os.fstat(fd).st_mode)
    if kind != "regular file":
        fh.close()
        raise CorruptFileError(path, f"not a regular file (a {kind})")
    return fh


def append_regular(path: Path) -> BinaryIO:
    """``path`` opened for appending (created if absent), if it is a regular file: a FIFO or a
    device under its name is refused (CorruptFileError) and never blocks the open."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as err:
        if err.errno == errno.ENXIO:  # a FIFO that nothing reads
            raise CorruptFileError(path, "not a regular file (a FIFO)") from None
        raise
    kind = _kind(os.fstat(fd).st_mode)
    if kind != "regular file":
        os.close(fd)
        raise CorruptFileError(path, f"not a regular file (a {kind})")
    return os.fdopen(fd, "ab")


def _kind(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    for test, name in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "special file"


def move_aside(path: Path, folder: Path | None = None) -> Path:
    """Rename a damaged file out of the way (``<name>.corrupt-<stamp>``); returns the new path."""
    target_dir = folder if folder is not None else path.parent
    make_dirs(target_dir)
    target = target_dir / f"{path.name}.corrupt-{unique_stamp()}"
    os.replace(path, target)
    return target


def write_json_atomic(path: Path, data: Any) -> None:
    """Atomically write ``data`` as indented, valid JSON (non-finite numbers become null)."""
    text = json.dumps(finite_json(data), indent=2, sort_keys=False, allow_nan=False)
    _atomic_replace(path, lambda fh: fh.write(text.encode()))


def finite_json(obj: Any) -> Any:
    """``obj`` with tensors/NumPy values as Python ones and inf/NaN as None (JSON has neither)."""
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    if isinstance(obj, bool | int | str) or obj is None:
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and getattr(obj, "ndim", 0) == 0:
        return finite_json(obj.item())
    if hasattr(obj, "tolist"):
        return finite_json(obj.tolist())
    raise TypeError(f"cannot serialise {type(obj).__name__}")
