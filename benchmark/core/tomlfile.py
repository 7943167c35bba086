"""Reading TOML files (run configs, grids, profiles) with one clear error for every failure."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from benchmark.core.errors import ConfigError

# Configs nest a few tables deep; anything deeper is not a config (and would exhaust recursion).
MAX_DEPTH = 32


def load_toml(
    path: str | Path, field: str, what: str = "TOML file", elsewhere: Path | None = None
) -> dict[str, Any]:
    """Parse ``path``; unreadable, non-UTF-8, invalid or absurdly deep files raise ConfigError.
    A missing file's error says where a relative path was looked for, and names ``elsewhere``
    (a folder holding such files) where it holds a file of that name."""
    p = Path(path)
    if not p.is_file():
        where = "" if p.is_absolute() else f"; a relative path is read from {Path.cwd()}"
        if elsewhere is not None and (elsewhere / p.name).is_file():
            where += f"; did you mean {elsewhere / p.name}?"
        raise ConfigError(field, str(path), f"an existing {what}{where}")
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as err:
        raise ConfigError(field, str(path), f"a readable {what} ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            field, str(path), f"a UTF-8 {what} ({err.reason} at byte {err.start})"
        ) from None
    return loads_toml(text, field, str(path), what)


def loads_toml(text: str, field: str, value: Any, what: str = "TOML") -> dict[str, Any]:
    """Parse TOML text; errors (syntax, nesting deeper than MAX_DEPTH) name ``field``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(field, value, f"valid {what} ({err})") from None
    except RecursionError:
        data = None
    if data is None or nesting_depth(data) > MAX_DEPTH:
        raise ConfigError(field, value, f"a {what} nested at most {MAX_DEPTH} levels deep")
    return data


def nesting_depth(data: Any) -> int:
    """How deeply tables and arrays nest in ``data`` (iterative: no recursion limit)."""
    deepest = 0
    stack = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return deepest
