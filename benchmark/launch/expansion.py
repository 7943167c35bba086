"""Expanding a parsed grid into runs: the cartesian product of its axes, zips, methods and seeds,
each cell parsed and validated like a single run, duplicates (same run id) merged.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from benchmark.config.parse import config_from_dict
from benchmark.config.run import NON_IDENTITY_SECTIONS, DataConfig, MethodConfig, RunConfig, check
from benchmark.core.errors import ConfigError
from benchmark.launch.grid import MAX_CELLS, Grid, Group, MethodSpec, _preset_choices


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
            from benchmark.training.validation import validate

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
    return ConfigError(
        field_name,
        err.value,
        f"{err.allowed} (in the run {cell})",
        unknown=err.unknown,
        suggest=err.suggest,
    )
