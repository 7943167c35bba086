"""Errors the command line reports as one clear line instead of a traceback."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """A configuration value is invalid; names the field, the bad value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str | Iterable[Any]) -> None:
        if not isinstance(allowed, str):
            allowed = "one of " + ", ".join(repr(a) for a in allowed)
        self.field = field
        self.value = value
        self.allowed = allowed
        super().__init__(f"{field} = {value!r} is invalid; allowed: {allowed}")


class DatasetError(RuntimeError):
    """Dataset files are missing, corrupted or unreadable."""
