"""Errors the command line reports as one clear line instead of a traceback."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value is invalid; names the field, the bad value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str | Iterable[Any]) -> None:
        if not isinstance(allowed, str):
            allowed = "one of " + ", ".join(repr(a) for a in allowed)
        self.field = field
        self.value = value
        self.allowed = allowed
        shown = f"{shorten(field)} = {shorten(repr(value))}"
        super().__init__(f"{shown} is invalid; allowed: {shorten(allowed, 2000)}")


# A message quotes at most this much of a value or key: a 10 MB string must not be echoed.
MAX_SHOWN = 200


def shorten(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    text = str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def check(ok: bool, field_name: str, value: Any, allowed: str) -> None:
    """Raise a ConfigError for ``field_name`` unless ``ok``."""
    if not ok:
        raise ConfigError(field_name, value, allowed)


class DatasetError(RuntimeError):
    """Dataset files are missing, corrupted or unreadable."""


class CorruptFileError(RuntimeError):
    """A store file cannot be read (truncated, garbage, not ours, or a pickle that runs code)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")
