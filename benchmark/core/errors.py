"""Errors the command line reports as one clear line instead of a traceback."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration value is invalid; names the field, the bad value and what is allowed.

    ``unknown``: the field itself does not exist (a misspelt key), so the message calls the
    key unknown rather than its value invalid; ``suggest``: the closest valid names, said as
    "did you mean ...?" (:func:`close_matches`).
    """

    def __init__(
        self,
        field: str,
        value: Any,
        allowed: str | Iterable[Any],
        *,
        unknown: bool = False,
        suggest: Sequence[str] = (),
    ) -> None:
        if not isinstance(allowed, str):
            allowed = "one of " + ", ".join(repr(a) for a in allowed)
        self.field = field
        self.value = value
        self.allowed = allowed
        self.unknown = unknown
        self.suggest = list(suggest)
        if unknown:
            said = f"the key {shorten(field)} is unknown (value {shorten(repr(value))})"
        else:
            said = f"{shorten(field)} = {shorten(repr(value))} is invalid"
        mean = (
            f"; did you mean {' or '.join(self.suggest)}? Allowed" if self.suggest else "; allowed"
        )
        super().__init__(f"{said}{mean}: {shorten(allowed, 2000)}")


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The ``choices`` a misspelt ``word`` most likely meant (``difflib``), at most ``n``.

    A dotted key (``optim.lr``) suggests the keys of other sections with the same last part
    (``schedule.lr``) when there are any, else the closest keys of its own section, then the
    closest whole keys.
    """
    import difflib

    options = [c for c in dict.fromkeys(str(c) for c in choices) if c != word]
    section, _, leaf = word.rpartition(".")
    found = [c for c in options if section and c.rpartition(".")[2] == leaf]
    if found:  # the key is right, its section is not
        return found[:n]
    if section:
        own = {c.rpartition(".")[2]: c for c in options if c.rpartition(".")[0] == section}
        found += [own[c] for c in difflib.get_close_matches(leaf, own, n, 0.6)]
    # Dotted keys share their section's prefix: only a close whole key counts.
    folded = {c.lower(): c for c in options}
    cutoff = 0.8 if section else 0.6
    found += [folded[c] for c in difflib.get_close_matches(word.lower(), folded, n, cutoff)]
    return list(dict.fromkeys(found))[:n]


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
