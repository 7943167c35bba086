"""Atomic checkpoint and JSON writes: a crash never leaves a half-written file behind."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import torch


def _atomic_replace(path: Path, write: Any) -> None:
    """Write through ``write(file)`` into a temporary file beside ``path``, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
    """Atomically save a checkpoint dict with torch.save."""
    _atomic_replace(path, lambda fh: torch.save(state, fh))


def load_checkpoint(path: Path, device: torch.device | str = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (trusted: our own file)."""
    return torch.load(path, map_location=device, weights_only=False)


def write_json_atomic(path: Path, data: Any) -> None:
    """Atomically write ``data`` as indented JSON."""
    text = json.dumps(data, indent=2, sort_keys=False, default=_json_default)
    _atomic_replace(path, lambda fh: fh.write(text.encode()))


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"cannot serialise {type(obj).__name__}")
