"""Adds seed statistics to a built table: n, sample std, confidence interval, significance mark.

The table keeps its own numbers (mean +- std as ``benchmark.reporting.tables`` prints them); each
cell of a goal-sparsity column gains `` [low, high] n=k`` (``[no spread]`` when every seed gave
the same value, ``[n/a]`` with one seed) and, in the ranked (accuracy) columns, the mark ``↓``
when it is significantly below the best of its column and section with the column's
family-wise error controlled, or ``?`` when it cannot be tested (see
:mod:`benchmark.reporting.seedstats`). The CSV gains ``n``, ``std_sample``, ``ci_low``,
``ci_high``, ``p_vs_best`` (raw), ``p_holm`` (adjusted), ``test`` and ``untestable`` (why ``?``).
A note explains the marks and what an unmarked cell does not mean.
"""

from __future__ import annotations

import math

import pandas as pd

from benchmark.experiments.base import TableLayout
from benchmark.reporting.agreement import split_size
from benchmark.reporting.seedstats import (
    CiMethod,
    caption,
    cell_samples,
    check_level,
    check_method,
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
    check_level(level)
    check_method(method)
    best, _ = select_cells(layout, plan, store, rules)
    samples: dict[str, dict] = {}
    # (value, sample, metric, ranked column: (block, column, section) or None)
    cells: list[tuple[Value, dict, str, tuple | None]] = []
    for b, block in enumerate(table.blocks):
        for j, column in enumerate(block.columns):
            if column.goal is None:
                continue
            if column.metric not in samples:
                samples[column.metric] = cell_samples(plan, store, best, column.metric)
            by_metric = samples[column.metric]
            for line in (ln for lines in block.groups for ln in lines):
                value = line.values[j]
                key = (line.section, line.label, float(column.goal), column.budget)
                sample = by_metric.get(key)
                if value.mean is None or not sample:
                    continue
                ranked = column.metric == layout.highlight_metric and layout.ranked(line.section)
                group = (b, j, line.section) if ranked else None
                cells.append((value, sample, column.metric, group))
    # Every cell's seed count is known before any interval is computed: a bootstrap with too
    # few seeds is refused as a whole, not after half the table.
    counts = [len(sample) for _, sample, _, _ in cells]
    check_method(method, counts)
    columns: dict[tuple, list[tuple[Value, dict]]] = {}
    for value, sample, metric, group in cells:
        _describe(value, sample, metric, level, method)
        if group is not None:
            columns.setdefault(group, []).append((value, sample))
    # Accuracies count test images: decided on whole images (float rounding of k/N is no spread).
    images = split_size(plan, store)
    resolution = 100.0 / images if images and layout.highlight_metric == "accuracy" else None
    for entries in columns.values():
        marks = significance_marks([s for _, s in entries], level, resolution)
        for (value, _), mark in zip(entries, marks, strict=True):
            value.annotation += mark.mark
            value.stats.update(
                p_vs_best=mark.p, p_holm=mark.p_holm, test=mark.test, untestable=mark.untestable
            )
    table.notes.append(caption(level, method, counts))
    return table


def _describe(value: Value, sample: dict, metric: str, level: float, method: CiMethod) -> None:
    """Set the interval text and the CSV statistics of one cell."""
    summary = summarize(list(sample.values()), level, method)
    d = DECIMALS[metric]
    if not summary.spread:
        interval = "[no spread]"
    elif math.isnan(summary.low):
        interval = "[n/a]"
    else:
        interval = f"[{summary.low:.{d}f}, {summary.high:.{d}f}]"
    value.annotation = f" {interval} n={summary.n}"
    value.stats.update(
        n=summary.n,
        std_sample=summary.std,
        ci_low=summary.low,
        ci_high=summary.high,
        p_vs_best=math.nan,
        p_holm=math.nan,
        test="",
        untestable="",
    )
