"""Adds seed statistics to a built table: n, sample std, confidence interval, significance mark.

The table keeps its own numbers (mean +- std as ``benchmark.reporting.tables`` prints them); each
cell of a goal-sparsity column gains `` [low, high] n=k`` and, in the ranked (accuracy) columns, the
mark ``≈`` when it is not significantly different from the best of its column and section (see
:mod:`benchmark.reporting.seedstats`). The CSV gains ``n``, ``std_sample``, ``ci_low``,
``ci_high`` and ``p_vs_best``. A note explains the marks.
"""

from __future__ import annotations

import math

import pandas as pd

from benchmark.experiments.base import TableLayout
from benchmark.reporting.seedstats import (
    CiMethod,
    caption,
    cell_samples,
    significance_marks,
    summarize,
)
from benchmark.reporting.tables import DECIMALS, Table, TableRules, Value, select_cells


def annotate(
    table: Table,
    layout: TableLayout,
    plan: pd.DataFrame,
    store: pd.DataFrame,
    *,
    level: float = 0.95,
    method: CiMethod = "t",
    rules: TableRules | None = None,
) -> Table:
    """Attach statistics to every goal-sparsity cell of ``table`` (in place) and return it.

    ``rules`` must be the ones the table was built with (the same configurations are selected).
    """
    best, _ = select_cells(layout, plan, store, rules)
    samples: dict[str, dict] = {}
    for block in table.blocks:
        for j, column in enumerate(block.columns):
            if column.goal is None:
                continue
            if column.metric not in samples:
                samples[column.metric] = cell_samples(plan, store, best, column.metric)
            by_metric = samples[column.metric]
            ranked: dict[str, list[tuple[Value, dict]]] = {}
            for line in (ln for lines in block.groups for ln in lines):
                value = line.values[j]
                key = (line.section, line.label, float(column.goal), column.budget)
                sample = by_metric.get(key)
                if value.mean is None or not sample:
                    continue
                _describe(value, sample, column.metric, level, method)
                if column.metric == layout.highlight_metric and layout.ranked(line.section):
                    ranked.setdefault(line.section, []).append((value, sample))
            for entries in ranked.values():
                marks = significance_marks([s for _, s in entries], level)
                for (value, _), (mark, p) in zip(entries, marks, strict=True):
                    value.annotation += mark
                    value.stats["p_vs_best"] = p
    table.notes.append(caption(level, method))
    return table


def _describe(value: Value, sample: dict, metric: str, level: float, method: CiMethod) -> None:
    """Set the interval text and the CSV statistics of one cell."""
    summary = summarize(list(sample.values()), level, method)
    d = DECIMALS[metric]
    interval = (
        "[n/a]" if math.isnan(summary.low) else f"[{summary.low:.{d}f}, {summary.high:.{d}f}]"
    )
    value.annotation = f" {interval} n={summary.n}"
    value.stats.update(
        n=summary.n,
        std_sample=summary.std,
        ci_low=summary.low,
        ci_high=summary.high,
        p_vs_best=math.nan,
    )
