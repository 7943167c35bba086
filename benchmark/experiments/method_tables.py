"""The method-comparison tables: BIMP against pruning-stable methods (and GMP variants).

Rows are methods (with fixed parameters, e.g. a GMP variant), columns are goal sparsities with
accuracy / theoretical speedup / achieved sparsity sub-columns, and images/s per method. Each row
tunes its own grid (Appendix B) plus the grid shared by every method (weight decay, initial
learning rate). Methods whose sparsity is not specifiable (CS, STR, DST) are planned once per
configuration and placed, after training, in the goal-sparsity column whose +-0.25% interval
holds their mean achieved sparsity. Rows of methods that are not registered, or whose parameters
the registered method does not declare, are reported as unavailable instead of planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.experiments.base import (
    Block,
    GridExperiment,
    PlannedRun,
    Problem,
    Scale,
    TableLayout,
    make_config,
    product,
    registered,
    tuned_key,
    unknown_params,
)


@dataclass(frozen=True)
class MethodRow:
    """One row: a method, its fixed dotted settings and its tuned grid (dotted keys).

    With ``preset``, the method's own preset of that name (``Method.presets``, the paper's grid
    as the method's author transcribed it) replaces ``grid`` when the method declares it.
    """

    label: str
    method: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    grid: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    preset: str | None = None

    def tuned_grid(self) -> dict[str, tuple[Any, ...]]:
        """The tuned axes of this row (dotted keys): the method's preset, else ``grid``."""
        from methods import get_method

        presets = get_method(self.method).presets if self.preset else {}
        if self.preset not in presets:
            return dict(self.grid)
        # Presets name the method's own parameters bare and other sections dotted.
        return {k if "." in k else f"method.{k}": tuple(v) for k, v in presets[self.preset].items()}


@dataclass(frozen=True)
class MethodGrid:
    """The runs of one section (e.g. CIFAR-10) of a method-comparison table at one scale."""

    problem: Problem
    sparsities: tuple[float, ...]
    rows: tuple[MethodRow, ...]
    common: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    section: str = "comparison"


# At smoke scale every row trains the method's defaults on digits for a few epochs; BIMP splits
# them into initial training and two short prune-retrain cycles.
SMOKE_EPOCHS = 6
SMOKE_BIMP = MethodRow(
    "BIMP", "bimp", {"budget.initial_epochs": 4, "budget.cycles": 2, "method.schedule": "ALLR"}
)


def smoke_rows(rows: tuple[MethodRow, ...]) -> tuple[MethodRow, ...]:
    """The paper's rows at smoke scale: same methods and fixed settings, no tuned grid."""
    return tuple(
        SMOKE_BIMP if r.method == "bimp" else MethodRow(r.label, r.method, r.fixed) for r in rows
    )


def unavailable(row: MethodRow) -> str | None:
    """Why ``row`` cannot be planned now (method not registered, unknown parameter), or None."""
    if not registered(row.method):
        return f"method {row.method!r} is not registered"
    bad = unknown_params(row.method, [*row.fixed, *row.tuned_grid()])
    return f"{row.method!r} has no parameter {', '.join(bad)}" if bad else None


def sparsity_specifiable(method: str) -> bool:
    """Whether ``method`` takes a goal sparsity (CS, STR and DST do not)."""
    from methods import get_method

    return get_method(method).info.sparsity_specifiable


class MethodTable(GridExperiment[tuple[MethodGrid, ...]]):
    """A method-comparison table; one :class:`MethodGrid` per section."""

    kind = "table"
    plot = "methods"

    def __init__(
        self,
        id: str,
        description: str,
        smoke: tuple[MethodGrid, ...],
        paper: tuple[MethodGrid, ...],
        *,
        per_row: tuple[str, ...] = ("img_per_s",),
        ci: bool = False,
    ) -> None:
        super().__init__(id, description, smoke, paper, ci=ci)
        self.per_row = per_row

    def unavailable_rows(self, scale: Scale) -> dict[str, str]:
        """Row label -> why it is not planned at ``scale``."""
        return {
            r.label: why
            for g in self.grids[scale]
            for r in g.rows
            if (why := unavailable(r)) is not None
        }

    def runs(self, scale: Scale, store: Path | str) -> list[PlannedRun]:
        out = []
        for g in self.grids[scale]:
            p = g.problem
            base = p.base(store)
            for row in g.rows:
                if unavailable(row) is not None:
                    continue
                specifiable = sparsity_specifiable(row.method)
                # A method without a goal sparsity runs once per configuration.
                columns: tuple[float | None, ...] = g.sparsities if specifiable else (None,)
                axes = {**g.common, **row.tuned_grid()}
                for sparsity, tuned in ((s, t) for s in columns for t in product(axes)):
                    for seed in p.seeds:
                        values = {
                            "budget.epochs": p.epochs,
                            "optim.weight_decay": p.weight_decays[0],
                            **row.fixed,
                            **tuned,
                            "seed": seed,
                            "method.name": row.method,
                        }
                        if sparsity is not None:
                            values["method.sparsity"] = sparsity / 100
                        cfg = make_config(base, values)
                        out.append(
                            PlannedRun(
                                cfg, g.section, row.label, sparsity, "", 0.0, tuned_key(tuned)
                            )
                        )
        return out

    def layout(self, scale: Scale) -> TableLayout:
        blocks = tuple(
            Block(g.sparsities, ((g.section, tuple(r.label for r in g.rows)),), title=g.section)
            for g in self.grids[scale]
        )
        return TableLayout(
            blocks=blocks, metrics=("accuracy", "speedup", "sparsity"), per_row=self.per_row
        )
