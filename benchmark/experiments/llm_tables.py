"""Language-model tables: rows of one-shot methods (and their retraining variants) against
columns of (goal sparsity, pattern or schedule), scored by WikiText-2 perplexity (lower is
better; smoke scale: the embedded CPython documentation).

A cell is one run per seed; there is no tuning (the papers fix every hyperparameter), so the
configuration a cell reports is the one it plans.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.experiments.base import (
    Block,
    GridExperiment,
    PlannedRun,
    Problem,
    Scale,
    TableLayout,
    make_config,
)


@dataclass(frozen=True)
class LMRow:
    """A table row: a method and the settings that make it (``method.*`` keys)."""

    label: str
    method: str
    fixed: Mapping[str, Any] = field(default_factory=dict)
    # The column budgets the row is planned in (empty: every column), e.g. a channel
    # permutation only under N:M patterns.
    budgets: tuple[str, ...] = ()


@dataclass(frozen=True)
class LMColumn:
    """A table column: the goal sparsity (percent), its sub-column label and its settings."""

    goal: float
    budget: str
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LMGrid:
    """One section of a language-model table: a model (problem), its rows and columns."""

    problem: Problem
    section: str
    rows: tuple[LMRow, ...]
    columns: tuple[LMColumn, ...]
    # Settings of every run of the section (e.g. the dense parent's epochs at smoke scale).
    settings: Mapping[str, Any] = field(default_factory=dict)

    def planned(self, store: Path | str) -> list[PlannedRun]:
        """Every (row, column, seed) run of this section."""
        base = self.problem.base(store)
        out = []
        for row in self.rows:
            for col in self.columns:
                if row.budgets and col.budget not in row.budgets:
                    continue
                for seed in self.problem.seeds:
                    values = {"method.name": row.method, **self.settings, **col.settings}
                    values |= {**row.fixed, "seed": seed}
                    values.setdefault("method.sparsity", col.goal / 100)
                    cfg = make_config(base, values)
                    out.append(PlannedRun(cfg, self.section, row.label, col.goal, col.budget))
        return out


class LMTable(GridExperiment[tuple[LMGrid, ...]]):
    """A language-model table (see module docstring); ``published`` holds numbers reported as
    text elsewhere: (section, row, goal, budget) -> perplexity."""

    kind = "table"
    from_paper = False
    # The sub-columns of every goal: perplexity and sparsity, or e.g. zero-shot accuracies.
    metrics: tuple[str, ...] = ("ppl", "sparsity")
    # Those of the smoke scale when they differ (e.g. the smoke zero-shot task's column).
    smoke_metrics: tuple[str, ...] = ()
    # The settings the published numbers were measured with, per paper-scale section (dotted
    # config keys -> value); ``--paper`` warns where the runs set beside them differ.
    paper_settings: Mapping[str, Mapping[str, Any]] = {}

    def __init__(
        self,
        id: str,
        description: str,
        smoke: tuple[LMGrid, ...],
        paper: tuple[LMGrid, ...],
        published: Mapping[tuple[str, str, float, str], float] | None = None,
        source: str = "",
        smoke_reference: str = "",
        column_name: str = "pattern",
        reference_rows: tuple[str, ...] = (),
    ) -> None:
        """``smoke_reference``: the paper-scale section whose published values the first
        smoke section is set against (as the other smoke tables are set against the paper);
        ``column_name``: what a goal's sub-columns are (their headers say "pattern 2:4");
        ``reference_rows``: rows shown for reference, neither ranked nor compared (the dense
        model)."""
        super().__init__(id, description, smoke, paper)
        self.published = dict(published or {})
        self.source = source
        self.smoke_reference = smoke_reference
        self.column_name = column_name
        self.reference_rows = reference_rows
        self.model_notes: list[str] = []

    def published_numbers(self) -> pd.DataFrame | None:
        """``published`` in the long format of the paper's tables (metric ``ppl``)."""
        if not self.published:
            return None
        cells = dict(self.published)
        if self.smoke_reference:
            smoke = self.grids["smoke"][0].section
            for (section, row, goal, budget), value in self.published.items():
                if section == self.smoke_reference:
                    cells[(smoke, row, goal, budget)] = value
        rows = [
            {
                "table": self.id,
                "section": section,
                "row": row,
                "sparsity": goal,
                "budget": budget,
                "metric": "ppl",
                "mean": value,
                "std": float("nan"),
                "highlight": "",
                "note": "",  # a note would mark the published cell as missing
                "block": 0,
                "col": 0,
            }
            for (section, row, goal, budget), value in cells.items()
        ]
        return pd.DataFrame(rows)

    def paper_differences(self, scale: Scale) -> list[str]:
        """Where the runs set beside published numbers differ from the settings those numbers
        were measured with (:attr:`paper_settings`): one line per section and setting."""
        sections = {section for section, *_ in self.published}
        grids = [(g, g.section) for g in self.grids[scale] if g.section in sections]
        if scale == "smoke" and self.smoke_reference:
            grids = [(self.grids["smoke"][0], self.smoke_reference)]
        lines = []
        for grid, reference in grids:
            configs = [run.cfg for run in grid.planned("runs")]
            for key, published in self.paper_settings.get(reference, {}).items():
                used = sorted({str(setting(cfg, key)) for cfg in configs})
                if used != [str(published)]:
                    lines.append(
                        f"{grid.section}: {key} = {', '.join(used)}, where the published "
                        f"numbers ({reference}) used {published}"
                    )
        return lines

    def runs(self, scale: Scale, store: Path | str) -> list[PlannedRun]:
        return [run for grid in self.grids[scale] for run in grid.planned(store)]

    def hub_models(self) -> dict[str, str]:
        """The paper scale's models: section name -> ``model.pretrained`` (``hf:<repo>``)."""
        return {
            g.problem.name: g.problem.extra.get("model", {}).get("pretrained", "")
            for g in self.grids["paper"]
        }

    def with_models(self, folders: Mapping[str, str]) -> LMTable:
        """This table with the paper scale's models named in ``folders`` (section name ->
        a local ``save_pretrained`` folder) loaded from those folders, their tokenizers too
        (``model.pretrained`` and ``data.tokenizer``): other run ids, the same rows, columns
        and published values; the table notes say which model each section ran."""
        grids = tuple(
            dataclasses.replace(g, problem=_local(g.problem, folders[g.problem.name]))
            if g.problem.name in folders
            else g
            for g in self.grids["paper"]
        )
        # A copy, not a new LMTable: a spec's class and what it sets (its metrics, the
        # published settings) stay.
        out = copy.copy(self)
        out.grids = {**self.grids, "paper": grids}
        out.model_notes = [
            f"{name}: the model and tokenizer in {folder} (not {self.hub_models()[name]})"
            for name, folder in folders.items()
        ]
        return out

    def table_notes(self, scale: Scale) -> list[str]:
        """Which local model a section ran instead of the paper's (see :meth:`with_models`)."""
        return list(self.model_notes) if scale == "paper" else []

    def layout(self, scale: Scale) -> TableLayout:
        grids = self.grids[scale]
        budgets = tuple(dict.fromkeys(c.budget for g in grids for c in g.columns))
        blocks = tuple(
            Block(
                tuple(dict.fromkeys(c.goal for c in g.columns)),
                ((g.section, tuple(r.label for r in g.rows)),),
                title=g.section,
            )
            for g in grids
        )
        return TableLayout(
            blocks=blocks,
            budgets=budgets,
            metrics=(scale == "smoke" and self.smoke_metrics) or self.metrics,
            highlight_metric="ppl",
            budget_name=self.column_name,
            reference_rows=self.reference_rows,
        )


def _local(problem: Problem, folder: str) -> Problem:
    """``problem`` loading its model and tokenizer from ``folder``."""
    model = {**problem.extra.get("model", {}), "pretrained": folder}
    return dataclasses.replace(
        problem,
        data={**problem.data, "tokenizer": folder},
        extra={**problem.extra, "model": model},
    )


def setting(cfg: Any, key: str) -> Any:
    """The value of a dotted config key (``data.max_length``; a method's hyperparameters as
    ``method.<name>``); None when the config has no such key."""
    section, _, name = key.rpartition(".")
    node = cfg
    for part in section.split(".") if section else ():
        node = getattr(node, part, None)
    if section == "method" and not hasattr(node, name):
        node = getattr(node, "params", None)
    return getattr(node, name, None)
