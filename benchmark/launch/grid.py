"""Grid files: a base run config, axes to sweep, seeds and per-method axes, expanded to runs.

A grid is a TOML file::

    name = "example"              # names the grid's submission record
    seeds = [0, 1]                # or a count: seeds = 3 means 0, 1, 2

    [base]                        # a run config, as `prunebench run` reads it (or a file path)
    data.name = "digits"

    [axes]                        # swept for every run: the cartesian product
    "optim.weight_decay" = [1e-4, 5e-4]

    [[zip]]                       # values that move together (one group per [[zip]])
    "budget.initial_epochs" = [6, 8]
    "budget.cycles" = [2, 1]

    [methods.bimp]                # the grid runs these methods; each table applies to its runs
    axes = { "method.sparsity" = [0.9, 0.95] }
    [methods.gmp]
    preset = true                 # the method's paper grid for the run's dataset

    [latency]                     # optional: time each run right after training (not in run ids)
    measure = true                # batches = [1, 64], warmup = 10, repeats = 50, device = "auto"

Keys are dotted config paths; inside a method table a bare key (``steps``) is one of the
method's own hyperparameters (``method.steps``), as in ``Method.presets``. Explicit axes override
a preset's axis of the same key; any other key swept twice is an error. Every cell is parsed and
validated like a single run before anything is submitted, and errors name the axis they come
from. Cells that reach the same run id (e.g. a value the method ignores) are one run."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmark.config.run import NON_IDENTITY_SECTIONS, SECTIONS, LatencyConfig, check
from benchmark.core.errors import ConfigError, close_matches
from benchmark.core.tomlfile import load_toml

# The grids shipped in the checkout (slurm/grids): a newcomer outside it is pointed to them.
SHIPPED_GRIDS = Path(__file__).resolve().parents[2] / "slurm" / "grids"

GRID_KEYS = ("name", "description", "seeds", "base", "axes", "zip", "methods", "latency")


METHOD_TABLE_KEYS = ("preset", "axes", "zip", "set")


# More cells than any paper grid; a larger grid must be confirmed (--max-runs).
MAX_CELLS = 20_000


NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Group:
    """Keys that move together: one axis (one key) or a zip group (several keys)."""

    keys: tuple[str, ...]
    # Where each key was declared, as errors name it: "axes.method.sparsity", "zip[0].x".
    sources: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass
class MethodSpec:
    """A ``[methods.NAME]`` table: the method's own axes, fixed values and preset."""

    name: str
    groups: list[Group] = field(default_factory=list)
    fixed: dict[str, Any] = field(default_factory=dict)
    fixed_sources: dict[str, str] = field(default_factory=dict)
    preset: str | bool | None = None


@dataclass
class Grid:
    """A parsed grid file (structure checked; cells are validated by :func:`expand`)."""

    name: str
    base: dict[str, Any]
    groups: list[Group]
    methods: dict[str, MethodSpec]
    seeds: list[int] | None = None
    description: str = ""
    path: Path | None = None


def load_grid(path: str | Path) -> Grid:
    """Read and structurally check a grid TOML file; raises ConfigError."""
    p = Path(path)
    return grid_from_dict(load_toml(p, "grid", "grid TOML file", SHIPPED_GRIDS), path=p)


def grid_from_dict(data: Mapping[str, Any], path: Path | None = None) -> Grid:
    """Build a :class:`Grid` from the parsed TOML; raises ConfigError naming the bad key."""
    for key in data:
        if key not in GRID_KEYS:
            raise _unknown(key, data[key], GRID_KEYS, "a grid key")
    name = data.get("name")
    check(
        isinstance(name, str) and bool(NAME_PATTERN.match(name)),
        "name",
        name,
        "a grid name of letters, digits, '_', '.', '-' (it names the submission record)",
    )
    description = data.get("description", "")
    check(isinstance(description, str), "description", description, "a string")
    base = _with_latency(_load_base(data.get("base", {}), path), data.get("latency"))
    groups = _axes_groups(data.get("axes", {}), "axes", method_table=False)
    groups += _zip_groups(data.get("zip", []), "zip", method_table=False)
    seeds = _parse_seeds(data["seeds"]) if "seeds" in data else None
    if seeds is not None:
        groups.append(Group(("seed",), ("seeds",), tuple((s,) for s in seeds)))
    _check_unique_keys(groups)
    methods_data = data.get("methods", {})
    check(
        isinstance(methods_data, dict),
        "methods",
        methods_data,
        "tables [methods.NAME] of per-method axes",
    )
    common = {k: src for g in groups for k, src in zip(g.keys, g.sources, strict=True)}
    methods = {m: _method_spec(m, table, common) for m, table in methods_data.items()}
    swept_methods = _swept_method_names(groups)
    for method in methods:
        check(
            swept_methods is None or method in swept_methods,
            f"methods.{method}",
            method,
            f"a method that {common.get('method.name')} sweeps: {sorted(swept_methods or [])}",
        )
    return Grid(
        name=name,
        base=base,
        groups=groups,
        methods=methods,
        seeds=seeds,
        description=description,
        path=path,
    )


def _unknown(field: str, value: Any, known: Sequence[str], what: str) -> ConfigError:
    """The error of an unknown key ``field`` of a grid (its last part one of ``known``)."""
    section, _, key = field.rpartition(".")
    prefix = f"{section}." if section else ""
    return ConfigError(
        field,
        value,
        f"{what}: {', '.join(known)}",
        unknown=True,
        suggest=[prefix + k for k in close_matches(key, known)],
    )


def _with_latency(base: dict[str, Any], table: Any) -> dict[str, Any]:
    """``base`` with the grid's ``[latency]`` table (``measure = true``, ...) as its section."""
    if table is None:
        return base
    keys = [f.name for f in fields(LatencyConfig)]
    check(isinstance(table, dict), "latency", table, "a table with " + ", ".join(keys))
    for key, value in table.items():
        if key not in keys:
            raise _unknown(f"latency.{key}", value, keys, "a key of [latency]")
    own = base.get("latency", {})
    check(isinstance(own, dict), "base.latency", own, "a table with " + ", ".join(keys))
    return {**base, "latency": {**own, **table}}


def _load_base(base: Any, path: Path | None) -> dict[str, Any]:
    # A string names a run config file, relative to the grid file.
    if isinstance(base, str):
        file = Path(base)
        if not file.is_absolute() and path is not None:
            file = path.parent / file
        if not file.is_file():
            raise ConfigError("base", base, "a run config table or an existing TOML file")
        return load_toml(file, "base")
    check(isinstance(base, dict), "base", base, "a run config table or a TOML file path")
    return copy.deepcopy(dict(base))


def _parse_seeds(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        check(value >= 1, "seeds", value, "a count >= 1 or a non-empty list of integers >= 0")
        return list(range(value))
    ok = (
        isinstance(value, list)
        and len(value) > 0
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)
        and len(set(value)) == len(value)
    )
    check(ok, "seeds", value, "a count >= 1 or a non-empty list of distinct integers >= 0")
    return list(value)


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys of nested tables: TOML's ``a.b = 1`` and ``"a.b" = 1`` mean the same."""
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


def _normalise_key(key: str, where: str, value: Any, method_table: bool) -> str:
    if "." in key or key == "seed":
        section = key.split(".", 1)[0]
        if key != "seed" and section not in SECTIONS:
            raise ConfigError(
                f"{where}.{key}",
                value,
                "a key of a config section: " + ", ".join(SECTIONS),
                unknown=True,
                suggest=[
                    f"{s}.{key.split('.', 1)[1]}" for s in close_matches(section, list(SECTIONS))
                ],
            )
        check(
            not (method_table and key == "method.name"),
            f"{where}.{key}",
            value,
            "no method.name inside [methods.NAME] (the table's name is the method)",
        )
        check(
            section not in NON_IDENTITY_SECTIONS,
            f"{where}.{key}",
            value,
            f"a key outside the {', '.join(sorted(NON_IDENTITY_SECTIONS))} sections "
            "(they never change what a run computes)",
        )
        return key
    # A bare key inside a method table is one of that method's hyperparameters.
    check(
        method_table,
        f"{where}.{key}",
        value,
        "a dotted config key such as method.sparsity or optim.weight_decay",
    )
    return f"method.{key}"


def _axes_groups(table: Any, where: str, method_table: bool) -> list[Group]:
    check(isinstance(table, dict), where, table, "a table of dotted keys -> lists of values")
    groups = []
    for key, values in _flatten(table):
        check(
            isinstance(values, list) and len(values) > 0,
            f"{where}.{key}",
            values,
            "a non-empty list of values",
        )
        norm = _normalise_key(key, where, values, method_table)
        groups.append(Group((norm,), (f"{where}.{key}",), tuple((v,) for v in values)))
    return groups


def _zip_groups(value: Any, where: str, method_table: bool) -> list[Group]:
    check(
        isinstance(value, list) and all(isinstance(g, dict) for g in value),
        where,
        value,
        "an array of tables ([[zip]]) of equally long lists",
    )
    groups = []
    for i, table in enumerate(value):
        src = f"{where}[{i}]"
        items = list(_flatten(table))
        check(len(items) > 0, src, table, "at least one key -> list of values")
        length = None
        keys = []
        for key, values in items:
            check(
                isinstance(values, list) and len(values) > 0,
                f"{src}.{key}",
                values,
                "a non-empty list of values",
            )
            if length is None:
                length, first = len(values), key
            check(
                len(values) == length,
                f"{src}.{key}",
                values,
                f"a list of {length} values (as long as {src}.{first})",
            )
            keys.append(_normalise_key(key, src, values, method_table))
        rows = tuple(zip(*(v for _, v in items), strict=True))
        sources = tuple(f"{src}.{key}" for key, _ in items)
        groups.append(Group(tuple(keys), sources, rows))
    return groups


def _check_unique_keys(groups: list[Group], taken: Mapping[str, str] | None = None) -> None:
    seen = dict(taken or {})
    for g in groups:
        for i, (key, source) in enumerate(zip(g.keys, g.sources, strict=True)):
            check(
                key not in seen,
                source,
                [row[i] for row in g.rows],
                f"a key swept once; {key} is already swept by {seen.get(key)}",
            )
            seen[key] = source


def _swept_method_names(groups: list[Group]) -> set[str] | None:
    for g in groups:
        if "method.name" in g.keys:
            i = g.keys.index("method.name")
            return {row[i] for row in g.rows}
    return None


def _method_spec(name: str, table: Any, common: Mapping[str, str]) -> MethodSpec:
    from methods import get_method

    where = f"methods.{name}"
    try:
        cls = get_method(name)
    except ConfigError as err:
        raise ConfigError(where, name, err.allowed, suggest=err.suggest) from None
    check(isinstance(table, dict), where, table, "a table with " + ", ".join(METHOD_TABLE_KEYS))
    for key in table:
        if key not in METHOD_TABLE_KEYS:
            raise _unknown(f"{where}.{key}", table[key], METHOD_TABLE_KEYS, "a key of a method")
    groups = _axes_groups(table.get("axes", {}), f"{where}.axes", method_table=True)
    groups += _zip_groups(table.get("zip", []), f"{where}.zip", method_table=True)
    _check_unique_keys(groups, common)
    fixed_table = table.get("set", {})
    check(isinstance(fixed_table, dict), f"{where}.set", fixed_table, "a table of key = value")
    fixed: dict[str, Any] = {}
    fixed_sources: dict[str, str] = {}
    swept = set(common) | {k for g in groups for k in g.keys}
    for key, value in _flatten(fixed_table):
        norm = _normalise_key(key, f"{where}.set", value, method_table=True)
        check(norm not in swept, f"{where}.set.{key}", value, "a key that no axis sweeps")
        fixed[norm] = value
        fixed_sources[norm] = f"{where}.set.{key}"
    preset = table.get("preset")
    if preset is not None:
        check(
            isinstance(preset, bool | str),
            f"{where}.preset",
            preset,
            "true (the run's dataset) or a preset name",
        )
        if isinstance(preset, str):
            check(
                preset in cls.presets,
                f"{where}.preset",
                preset,
                _preset_choices(name, cls.presets),
            )
    return MethodSpec(
        name=name,
        groups=groups,
        fixed=fixed,
        fixed_sources=fixed_sources,
        preset=preset or None,
    )


def _preset_choices(method: str, presets: Mapping[str, Any]) -> str:
    if not presets:
        return f"no preset: method {method!r} declares none"
    return "one of " + ", ".join(repr(p) for p in presets)
