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
from. Cells that reach the same run id (e.g. a value the method ignores) are one run.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from benchmark.config import (
    NON_IDENTITY_SECTIONS,
    SECTIONS,
    DataConfig,
    LatencyConfig,
    MethodConfig,
    RunConfig,
    check,
    config_from_dict,
)
from benchmark.errors import ConfigError
from benchmark.tomlfile import load_toml

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


@dataclass(frozen=True)
class GridRun:
    """One run of a grid: its config, id and the swept values that made it."""

    run_id: str
    cfg: RunConfig
    values: dict[str, Any]

    @property
    def method(self) -> str:
        """The method name of this run."""
        return self.cfg.method.name


@dataclass
class Expansion:
    """Every distinct run of a grid, in grid order, and how many cells collapsed into them."""

    grid: Grid
    runs: list[GridRun]
    cells: int

    @property
    def duplicates(self) -> int:
        """Cells that reached a run id an earlier cell already had."""
        return self.cells - len(self.runs)

    def by_method(self) -> dict[str, int]:
        """Number of runs per method, in grid order."""
        return dict(Counter(r.method for r in self.runs))

    def swept_keys(self) -> list[str]:
        """Every key that varies in the preview (method and seed first)."""
        keys: dict[str, None] = {}
        for run in self.runs:
            keys.update(dict.fromkeys(run.values))
        ordered = [k for k in ("method.name", "seed") if k in keys]
        return ordered + [k for k in keys if k not in ordered]


# --------------------------------------------------------------------------- parsing


def load_grid(path: str | Path) -> Grid:
    """Read and structurally check a grid TOML file; raises ConfigError."""
    p = Path(path)
    return grid_from_dict(load_toml(p, "grid", "grid TOML file"), path=p)


def grid_from_dict(data: Mapping[str, Any], path: Path | None = None) -> Grid:
    """Build a :class:`Grid` from the parsed TOML; raises ConfigError naming the bad key."""
    for key in data:
        check(key in GRID_KEYS, key, data[key], "a grid key: " + ", ".join(GRID_KEYS))
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


def _with_latency(base: dict[str, Any], table: Any) -> dict[str, Any]:
    """``base`` with the grid's ``[latency]`` table (``measure = true``, ...) as its section."""
    if table is None:
        return base
    keys = [f.name for f in fields(LatencyConfig)]
    check(isinstance(table, dict), "latency", table, "a table with " + ", ".join(keys))
    for key, value in table.items():
        check(key in keys, f"latency.{key}", value, "one of " + ", ".join(keys))
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
        check(
            key == "seed" or section in SECTIONS,
            f"{where}.{key}",
            value,
            "a key of a config section: " + ", ".join(SECTIONS),
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
        raise ConfigError(where, name, err.allowed) from None
    check(isinstance(table, dict), where, table, "a table with " + ", ".join(METHOD_TABLE_KEYS))
    for key in table:
        check(
            key in METHOD_TABLE_KEYS,
            f"{where}.{key}",
            table[key],
            "one of " + ", ".join(METHOD_TABLE_KEYS),
        )
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


# --------------------------------------------------------------------------- expansion


def count_cells(grid: Grid) -> int:
    """How many cells :func:`expand` would build, counted without building any."""
    # Only the method and dataset axes decide a cell's method axes (presets); every other
    # grid-wide axis multiplies the count.
    deciding = [g for g in grid.groups if {"method.name", "data.name"} & set(g.keys)]
    factor = math.prod(len(g.rows) for g in grid.groups if g not in deciding)
    total = 0
    for cell, _ in _product(deciding):
        for method in _cell_methods(grid, cell):
            spec = grid.methods.get(method, MethodSpec(method))
            total += math.prod(len(g.rows) for g in _method_groups(grid, spec, cell))
    return total * factor


def check_cell_count(grid: Grid, max_cells: int) -> int:
    """Refuse a grid of more than ``max_cells`` cells, naming its largest axes."""
    cells = count_cells(grid)
    if cells > max_cells:
        sizes = sorted(((len(g.rows), ", ".join(g.sources)) for g in grid.groups), reverse=True)
        axes = "; ".join(f"{src}: {n}" for n, src in sizes[:8])
        raise ConfigError(
            "--max-runs",
            max_cells,
            f"at least the grid's {cells} cells (largest axes: {axes}); raise --max-runs "
            "to confirm a grid this large",
        )
    return cells


def expand(
    grid: Grid,
    settings: Mapping[str, Any] | None = None,
    *,
    check_configs: bool = True,
    max_cells: int = MAX_CELLS,
) -> Expansion:
    """Every distinct run of ``grid``: each cell parsed (and validated) like a single run.

    ``settings`` sets non-identity keys on every run (``output.dir``, ``runtime.threads``,
    ``logging.progress``); they never change run ids. A grid of more than ``max_cells`` cells
    is refused before any is built (``--max-runs`` raises the limit).
    """
    check_cell_count(grid, max_cells)
    settings = dict(settings or {})
    for key in settings:
        section = key.split(".", 1)[0]
        if section not in NON_IDENTITY_SECTIONS:
            raise ValueError(f"settings may only set non-identity keys, not {key!r}")
    runs: dict[str, GridRun] = {}
    cells = 0
    order = _method_order(grid)
    cache: dict[tuple[str, str], Any] = {}
    for cell, provenance in _product(grid.groups):
        for method in _cell_methods(grid, cell):
            spec = grid.methods.get(method, MethodSpec(method))
            for mcell, mprov in _product(_method_groups(grid, spec, cell)):
                values = {"method.name": method, **cell, **mcell}
                prov = {**spec.fixed_sources, **provenance, **mprov}
                assigned = {**spec.fixed, **values, **settings}
                cfg = _build(grid.base, assigned, prov, values, check_configs, cache)
                cells += 1
                rid = cfg.run_id
                if rid not in runs:
                    runs[rid] = GridRun(rid, cfg, values)
    ordered = sorted(runs.values(), key=lambda r: order.get(r.method, len(order)))
    return Expansion(grid=grid, runs=ordered, cells=cells)


def _method_order(grid: Grid) -> dict[str, int]:
    names = list(grid.methods)
    for g in grid.groups:
        if "method.name" in g.keys:
            i = g.keys.index("method.name")
            names += [row[i] for row in g.rows if row[i] not in names]
    return {n: i for i, n in enumerate(names)}


def _cell_methods(grid: Grid, cell: Mapping[str, Any]) -> list[str]:
    if "method.name" in cell:
        return [cell["method.name"]]
    if grid.methods:
        return list(grid.methods)
    return [_get(grid.base, "method.name", MethodConfig.name)]


def _method_groups(grid: Grid, spec: MethodSpec, cell: Mapping[str, Any]) -> list[Group]:
    if not spec.preset:
        return spec.groups
    from methods import get_method

    presets = get_method(spec.name).presets
    where = f"methods.{spec.name}.preset"
    if spec.preset is True:
        dataset = cell.get("data.name", _get(grid.base, "data.name", DataConfig.name))
        check(
            dataset in presets,
            where,
            True,
            f"a preset name: data.name = {dataset!r} has no preset of {spec.name!r} "
            f"({_preset_choices(spec.name, presets)})",
        )
        name = dataset
    else:
        name = str(spec.preset)
    # Explicit axes (grid-wide or the method's own) override the preset's axis of that key.
    explicit = set(cell) | {k for g in spec.groups for k in g.keys} | set(spec.fixed)
    groups = []
    for key, values in presets[name].items():
        norm = key if "." in key else f"method.{key}"
        if norm not in explicit:
            source = f"{where}[{name!r}].{key}"
            groups.append(Group((norm,), (source,), tuple((v,) for v in values)))
    return groups + spec.groups


def _product(groups: list[Group]) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    """Cartesian product of groups; each cell with the source of each key."""
    provenance = {k: src for g in groups for k, src in zip(g.keys, g.sources, strict=True)}
    for rows in itertools.product(*(g.rows for g in groups)):
        cell: dict[str, Any] = {}
        for g, row in zip(groups, rows, strict=True):
            cell.update(zip(g.keys, row, strict=True))
        yield cell, provenance


def _get(data: Mapping[str, Any], key: str, default: Any) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def _assign(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(key, value, f"{part} is a value, not a section")
        node = child
    node[parts[-1]] = copy.deepcopy(value)


def _build(
    base: dict[str, Any],
    assigned: Mapping[str, Any],
    provenance: Mapping[str, str],
    values: Mapping[str, Any],
    check_configs: bool,
    cache: dict[tuple[str, str], Any],
) -> RunConfig:
    data = copy.deepcopy(base)
    try:
        for key, value in assigned.items():
            _assign(data, key, value)
        cfg = parse_sections(data, cache)
        if check_configs:
            # Imported here: validation loads every registry (torch, datasets, methods), which a
            # read-only query (check_configs=False) never needs.
            from benchmark.validation import validate

            validate(cfg)
    except ConfigError as err:
        raise _locate(err, provenance, values) from None
    return cfg


def parse_sections(data: Mapping[str, Any], cache: dict[tuple[str, str], Any]) -> RunConfig:
    """``config_from_dict(data)``, parsing each distinct section once.

    Sections parse independently (cross-field rules live in ``validate``), and a grid repeats
    the same few section tables thousands of times; parsing one is the costly part of a cell.
    """
    parts: dict[str, Any] = {"seed": RunConfig.seed}
    for key, value in {"method": {}, **data}.items():
        marker = (key, json.dumps(value, sort_keys=True, default=repr))
        if marker not in cache:
            cache[marker] = getattr(config_from_dict({key: value}), key)
        parts[key] = copy.deepcopy(cache[marker])
    return RunConfig(**parts)


def _locate(
    err: ConfigError, provenance: Mapping[str, str], values: Mapping[str, Any]
) -> ConfigError:
    """The cell's config error, renamed to the axis (or base key) its field comes from."""
    root = re.sub(r"(\[\d+\])+$", "", err.field)
    source = provenance.get(root)
    if source is None:
        # The error names a section or table an axis key lies under (e.g. an unknown key).
        below = [src for key, src in provenance.items() if key.startswith(f"{root}.")]
        if below:
            source, root = below[0], err.field
    cell = ", ".join(f"{k}={v!r}" for k, v in values.items())
    if source is None:
        field_name = f"base.{err.field}"
    else:
        field_name = source + err.field[len(root) :]  # keep a list index such as [2]
    return ConfigError(field_name, err.value, f"{err.allowed} (in the run {cell})")
