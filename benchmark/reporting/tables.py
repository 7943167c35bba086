"""Selection, aggregation and rendering of the paper's tables from a results store.

Runs are grouped by table cell and tuned configuration; the validation top-1 accuracy is averaged
over seeds per configuration; the best configuration of each cell is kept and its test accuracy
(and speedup, achieved sparsity) is reported as mean +- std over its seeds. Planned runs missing
from the store are counted, and cells they feed are marked, never silently dropped.

Three choices the paper leaves open are parameters of :class:`TableRules` (see its docstring and the
procedure in ``benchmark/experiments/README.md``): the standard deviation's ddof (the paper only
says "standard deviation"; default 1, the sample std that pandas, and so a W&B-and-pandas workflow
like the paper's, computes), how far the closest configuration of a method without a goal sparsity
may lie from a goal column that has none within +-0.25%, and what "belongs to another column" means.
Highlights rank the unrounded means (the paper's printed tables give different colours to values
that print the same)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from benchmark.core.errors import ConfigError
from benchmark.experiments.base import Experiment, Scale, TableLayout
from benchmark.experiments.slices import Slice
from benchmark.reporting.agreement import ColumnAgreement, column_agreement, split_size
from benchmark.reporting.selection import (
    ZERO_SHOT_TASKS,
    TableRules,
    configuration_stats,
    join_store,
    per_row_means,
    select_cells,
    selection_metric,
)

HEADERS = {"accuracy": "Acc.", "speedup": "Speedup", "sparsity": "Sparsity", "img_per_s": "img/s"}


HEADERS["measured_speedup"] = "Measured speedup"


HEADERS |= {"iou": "mIoU", "bleu": "BLEU", "ppl": "PPL", "tok_per_s": "tokens/s"}


DECIMALS = {"accuracy": 2, "speedup": 1, "sparsity": 2, "img_per_s": 0, "measured_speedup": 2}


DECIMALS |= {"iou": 2, "bleu": 2, "ppl": 2, "tok_per_s": 0}
HEADERS |= {f"zs_{task}": label for task, label in ZERO_SHOT_TASKS.items()}
HEADERS["zs_mean"] = "Mean"
DECIMALS |= {metric: 2 for metric in HEADERS if metric.startswith("zs_")}

# Metrics whose smallest value ranks first.
LOWER_IS_BETTER = frozenset({"ppl"})


RANKS = ("first", "second", "third")


# "outside": a planned cell that a slice leaves out (not run by this command), as opposed to a
# "missing" cell inside it whose runs have not finished yet.
Status = Literal["ok", "partial", "missing", "none", "unavailable", "outside"]


@dataclass
class Value:
    """One rendered cell: the reproduced value, its status and the paper's value."""

    mean: float | None = None
    std: float | None = None
    status: Status = "ok"
    highlight: str = ""
    planned: int = 0
    missing: int = 0
    paper_mean: float | None = None
    paper_std: float | None = None
    paper_missing: bool = False
    # Hook for benchmark.reporting.table_stats: text shown after the value and extra CSV columns.
    annotation: str = ""
    stats: dict[str, float | str] = field(default_factory=dict)


@dataclass(frozen=True)
class Column:
    """A sub-column: goal sparsity (None for a per-row column), budget and metric
    (``budget_name``: what the budget level is, e.g. a language-model table's "pattern")."""

    goal: float | None
    budget: str
    metric: str
    budget_name: str = "budget"


@dataclass
class Line:
    """One table row."""

    section: str
    label: str
    values: list[Value]


@dataclass
class BuiltBlock:
    """A header of columns over groups of rows (a rule between groups)."""

    title: str
    columns: list[Column]
    groups: list[list[Line]]


@dataclass
class Table:
    """A table rebuilt from a store, ready to render."""

    id: str
    scale: str
    blocks: list[BuiltBlock]
    planned: int
    missing: int
    notes: list[str] = field(default_factory=list)
    with_paper: bool = False
    ran: str = ""  # at smoke scale, what actually trained ("digits, cnn_wide")
    # The reported (and selection) metric, a key of SELECT_BY.
    metric: str = "accuracy"
    # How it was built when not from the whole plan by the full procedure ("slice: methods
    # bimp", "staged tuning"): said in the title of every rendering and in exports.
    labels: list[str] = field(default_factory=list)
    # With the paper's numbers: each ranked column's agreement with them (benchmark.reporting.
    # agreement), and the test split's size of the runs (None: unknown or not one size).
    agreement: list[ColumnAgreement] = field(default_factory=list)
    test_images: int | None = None
    # Store records that were named and skipped as unusable ("<file>: why"): said in the footer.
    skipped: list[str] = field(default_factory=list)
    outside: int = 0  # planned runs outside the slice (counted in missing)
    failed: int = 0  # planned runs whose result says failed (counted in missing)


def _key(section: str, row: str, goal: float | None, budget: str) -> tuple:
    return (section, row, None if goal is None or math.isnan(goal) else float(goal), budget)


def _index(frame: pd.DataFrame) -> dict[tuple, dict]:
    return {
        _key(r["section"], r["row"], r["goal"], r["budget"]): r for r in frame.to_dict("records")
    }


def _paper_index(paper: pd.DataFrame | None) -> dict[tuple, dict]:
    if paper is None:
        return {}
    out: dict[tuple, dict] = {}
    for r in paper.to_dict("records"):
        key = (*_key(r["section"], r["row"], r["sparsity"], r["budget"] or ""), r["metric"])
        out.setdefault(key, r)  # img/s is repeated per block in two tables: keep the first
    return out


def build_table(
    table_id: str,
    scale: str,
    layout: TableLayout,
    plan: pd.DataFrame,
    store: pd.DataFrame,
    *,
    unavailable: Mapping[str, str] | None = None,
    paper: pd.DataFrame | None = None,
    rules: TableRules | None = None,
    within: Slice | None = None,
) -> Table:
    """Select, aggregate and lay out ``plan`` against ``store`` (and the paper's numbers).

    With ``within``, only the runs of the slice count as found, and every cell outside it is
    shown as missing (never dropped, never filled from runs outside the slice).
    """
    select = selection_metric(layout)
    if within is not None and not within.everything:
        store = store[store["run_id"].isin(within.apply(plan)["run_id"])] if len(store) else store
    row_methods = plan.groupby(["section", "row"], sort=False)["method"].unique().to_dict()
    best, counts = select_cells(layout, plan, store, rules)
    best_at, count_at = _index(best), _index(counts)
    row_means = _index(per_row_means(plan, store).assign(goal=np.nan, budget=""))
    paper_at = _paper_index(paper)
    planned_rows = set(zip(plan["section"], plan["row"], strict=True))
    unavailable = dict(unavailable or {})
    notes: list[str] = []
    blocks = []
    for block in layout.blocks:
        columns = [Column(None, "", m) for m in layout.per_row] + [
            Column(g, b, m, layout.budget_name)
            for g in block.sparsities
            for b in layout.budgets
            for m in layout.metrics
        ]
        groups = []
        for section, rows in block.groups:
            lines = []
            for label in rows:
                if (section, label) not in planned_rows:
                    reason = unavailable.get(label, "no runs planned at this scale")
                    notes.append(f"{label} ({section}): not planned, {reason}")
                    lines.append(
                        Line(section, label, [Value(status="unavailable") for _ in columns])
                    )
                    continue
                values = [_value(section, label, c, best_at, count_at, row_means) for c in columns]
                if within is not None:
                    methods = row_methods.get((section, label), ())
                    values = [
                        _outside(v) if within.outside(section, methods, c.goal) else v
                        for v, c in zip(values, columns, strict=True)
                    ]
                for value, c in zip(values, columns, strict=True):
                    p = paper_at.get((*_key(section, label, c.goal, c.budget), c.metric))
                    if p is not None:
                        value.paper_mean, value.paper_std = _num(p["mean"]), _num(p["std"])
                        value.paper_missing = bool(p.get("note"))
                lines.append(Line(section, label, values))
            groups.append(lines)
        _highlight(groups, columns, layout)
        blocks.append(BuiltBlock(block.title, columns, groups))
    notes += _unplaced_notes(blocks, plan, store, rules)
    shown = {ln.label for b in blocks for g in b.groups for ln in g}
    for label in (r for r in layout.reference_rows if r in shown):
        notes.append(f"{label}: shown for reference, not ranked nor compared with the paper")
    agreement = _agreement(blocks, layout, select) if paper is not None else []
    done = (
        plan.merge(store[["run_id", "status"]], on="run_id", how="left")
        if "status" in store
        else None
    )
    finished = set() if done is None else set(done.loc[done["status"].eq("finished"), "run_id"])
    failed = set() if done is None else set(done.loc[done["status"].eq("failed"), "run_id"])
    ids = set(plan["run_id"])
    labels, outside = [], 0
    if within is not None and not within.everything:
        outside = len(ids - set(within.apply(plan)["run_id"]))
        labels.append(f"slice: {within.label()}")
        notes.append(
            f"slice ({within.label()}): cells outside it read 'outside slice' (not run by this "
            "command), and only the runs inside it count as found"
        )
    return Table(
        table_id,
        scale,
        blocks,
        planned=len(ids),
        missing=len(ids - finished),
        notes=list(dict.fromkeys(notes)),
        with_paper=paper is not None,
        metric=select,
        labels=labels,
        agreement=agreement,
        test_images=split_size(plan, store) if paper is not None else None,
        outside=outside,
        failed=len(failed),
    )


def _agreement(blocks: list[BuiltBlock], layout: TableLayout, metric: str) -> list[ColumnAgreement]:
    """Per goal column of ``metric`` and ranked section: the agreement of the means with the
    paper's (columns where no row has both are left out)."""
    out = []
    named = len(blocks) > 1 or any(len(b.groups) > 1 for b in blocks)
    for block in blocks:
        for lines in block.groups:
            if not lines or not layout.ranked(lines[0].section):
                continue
            ranked = [ln for ln in lines if ln.label not in layout.reference_rows]
            for j, c in enumerate(block.columns):
                if c.goal is None or c.metric != metric or not ranked:
                    continue
                where = ", ".join([*([lines[0].section] if named else []), _column_label(c)])
                # Agreement ranks higher as better: perplexities are compared negated.
                sign = -1.0 if metric in LOWER_IS_BETTER else 1.0
                means = [sign * _nan(ln.values[j].mean) for ln in ranked]
                paper = [sign * _nan(ln.values[j].paper_mean) for ln in ranked]
                labels = [ln.label for ln in ranked]
                key = (lines[0].section, c.goal, c.budget)
                found = column_agreement(where, labels, means, paper, key)
                if found is not None:
                    out.append(found)
    return out


def _column_label(c: Column) -> str:
    """ "sparsity 90%, budget 5%" (the budget only when the column has one; "pattern 2:4"
    where the layout names its budget level so)."""
    return f"sparsity {c.goal:g}%" + (f", {c.budget_name} {c.budget}" if c.budget else "")


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _unplaced_notes(
    blocks: list[BuiltBlock], plan: pd.DataFrame, store: pd.DataFrame, rules: TableRules | None
) -> list[str]:
    """Why a row of a method without a goal sparsity shows "---": the sparsities its
    configurations reached, none close enough to that column (see TableRules)."""
    rules = rules or TableRules()
    empty = {
        (ln.section, ln.label)
        for b in blocks
        for lines in b.groups
        for ln in lines
        if any(v.status == "none" for v, c in zip(ln.values, b.columns, strict=True) if c.goal)
    }
    rows = pd.Series(list(zip(plan["section"], plan["row"], strict=True)), index=plan.index)
    free = plan[plan["goal"].isna() & rows.isin(empty)]
    if free.empty:
        return []
    stats = configuration_stats(join_store(free, store), rules.ddof)
    notes = []
    for (section, row), group in stats.groupby(["section", "row"], sort=False):
        reached = ", ".join(f"{v:.2f}%" for v in sorted(group["sparsity"].dropna()))
        notes.append(
            f"--- for {row} ({section}): it has no goal sparsity and its configurations "
            f"reached {reached or 'no sparsity'}, not within {rules.tolerance:g} points of "
            f"the empty columns (nor the closest within {rules.max_distance:g})"
        )
    return notes


def _outside(value: Value) -> Value:
    """A cell outside the slice: no value, whatever the store holds."""
    return Value(status="outside", planned=value.planned, missing=value.planned)


def _num(value: object) -> float | None:
    return (
        None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
    )


def _value(
    section: str,
    label: str,
    column: Column,
    best_at: dict[tuple, dict],
    count_at: dict[tuple, dict],
    row_means: dict[tuple, dict],
) -> Value:
    if column.goal is None:  # a per-row column (images/s): the mean over all finished runs
        r = row_means.get(_key(section, label, None, ""))
        if r is None:
            return Value(status="missing")
        if math.isnan(float(r[column.metric])):  # no run recorded it (tokens/s of a one-shot run)
            return Value(status="none")
        return Value(mean=float(r[column.metric]), status="ok")
    key = _key(section, label, column.goal, column.budget)
    # Methods without a goal sparsity count their runs once per row, not per column.
    counts = count_at.get(key) or count_at.get(_key(section, label, None, column.budget)) or {}
    planned, missing = int(counts.get("planned", 0)), int(counts.get("missing", 0))
    r = best_at.get(key)
    if r is None:
        return Value(status="missing" if missing else "none", planned=planned, missing=missing)
    return Value(
        mean=float(r[column.metric]),
        std=_num(float(r[f"{column.metric}_std"])),
        status="partial" if missing else "ok",
        planned=planned,
        missing=missing,
    )


def _highlight(groups: list[list[Line]], columns: list[Column], layout: TableLayout) -> None:
    """Mark first/second/third best per column and section by the unrounded means, as the paper
    does (values that print the same may rank differently); only equal means share a colour."""
    for j, column in enumerate(columns):
        if column.metric != layout.highlight_metric or column.goal is None:
            continue
        by_section: dict[str, list[Value]] = {}
        for line in (line for lines in groups for line in lines):
            value = line.values[j]
            # A NaN mean (a run that recorded NaN) ranks nowhere, least of all first; nor does
            # a reference row (the dense model).
            ranked = value.mean is not None and not math.isnan(value.mean)
            ranked = ranked and line.label not in layout.reference_rows
            if layout.ranked(line.section) and ranked:
                by_section.setdefault(line.section, []).append(value)
        for values in by_section.values():
            # Perplexity: lower is better.
            best_high = column.metric not in LOWER_IS_BETTER
            ranked = sorted({v.mean for v in values}, reverse=best_high)[: len(RANKS)]
            for v in values:
                if v.mean in ranked:
                    v.highlight = RANKS[ranked.index(v.mean)]


def rebuild(
    experiment: Experiment,
    scale: Scale,
    store_dir: str | Path,
    *,
    paper: bool = False,
    store: pd.DataFrame | None = None,
    rules: TableRules | None = None,
    within: Slice | None = None,
    plan: pd.DataFrame | None = None,
) -> Table:
    """The table of ``experiment`` at ``scale`` from the store in ``store_dir``; ``within``: a
    slice (cells outside it missing); ``plan``: another plan of it (staged tuning's)."""
    from benchmark.store.frame import load_store

    layout = experiment.layout(scale)
    if layout is None:
        raise ConfigError("table id", experiment.id, "the id of a table (this one is a figure)")
    frame = load_store(store_dir) if store is None else store
    published = None
    if paper:
        # --paper promises the published columns: without them it is an error, not a table
        # that silently lacks them.
        published = experiment.published_numbers()
        if published is None:
            from benchmark.experiments.registry import unpublished_error

            raise unpublished_error(experiment)
    unavailable = getattr(experiment, "unavailable_rows", lambda _scale: {})(scale)
    table = build_table(
        experiment.id,
        scale,
        layout,
        experiment.plan(scale, store_dir) if plan is None else plan,
        frame,
        unavailable=unavailable,
        paper=published,
        rules=rules,
        within=within,
    )
    table.notes += getattr(experiment, "table_notes", lambda _scale: [])(scale)
    table.skipped = [str(s) for s in frame.attrs.get("skipped", [])]
    if scale == "smoke":
        from benchmark.reporting.titles import what_ran

        table.ran = what_ran(experiment, scale, store_dir)
    return table
