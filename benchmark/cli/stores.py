"""The results store a reading command names must exist: ``table``, ``plot`` and ``status`` in a
folder without one say so and name ``--store``, instead of showing every planned run missing."""

from __future__ import annotations

from pathlib import Path

from benchmark.core.errors import ConfigError


def require_store(store: str | Path, command: str) -> None:
    """Raise a ConfigError on ``--store`` unless ``store`` is a folder (``command``: what reads
    it, for the message)."""
    path = Path(store)
    if path.is_dir():
        return
    where = path if path.is_absolute() else f"{path} under {Path.cwd()}"
    raise ConfigError(
        "--store",
        str(store),
        f"an existing results store; there is none at {where}. {command} reads the store that "
        "reproduce, run or submit wrote: run it from the folder that holds results/runs, or "
        "name the store with --store DIR",
    )
