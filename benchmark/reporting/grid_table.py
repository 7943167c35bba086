"""A table of a user's own grid: method x goal sparsity, as the paper's tables are built.

``prunebench table GRID.toml`` turns the runs of a grid file into a plan the table builder
(``benchmark.reporting.tables``) reads like a spec's: one row per method (split further by
``--by`` keys), one column per goal sparsity (``method.sparsity``), one section per model and
dataset. Every other swept key (weight decay, learning rate, a method's own hyperparameters)
is a configuration the cell selects by validation accuracy averaged over seeds; the cell shows
the selected configuration's test accuracy, theoretical speedup and achieved sparsity as
mean +- std over its seeds, exactly as in the paper's tables. Methods without a goal sparsity
(CS, STR, DST) are placed in a column by their achieved sparsity; a dense run sits at 0%.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from benchmark.config.run import RunConfig
from benchmark.experiments.base import Block, PlannedRun, TableLayout, plan_frame, tuned_key

# Swept keys that are not a configuration to select over: they place the run in its cell.
PLACING = ("seed", "method.name", "method.sparsity")


def _specifiable(method: str) -> bool:
    from methods import get_method

    return get_method(method).info.sparsity_specifiable


def grid_plan(
    runs: Iterable[tuple[RunConfig, Mapping[str, Any]]],
    by: Sequence[str] = (),
    language_model: bool = False,
) -> tuple[pd.DataFrame, TableLayout]:
    """The plan frame and table layout of a grid's runs (each a config and its swept values).

    ``by``: swept keys whose values split a method into rows (e.g. ``method.schedule``)
    instead of being selected over. ``language_model``: the runs are causal language models:
    the cells show perplexity (lower is better, selected by validation perplexity) and the
    rows training tokens/s, not accuracy and images/s.
    """
    planned: list[PlannedRun] = []
    runs = list(runs)
    pairs = list(dict.fromkeys(f"{cfg.model.name} / {cfg.data.name}" for cfg, _ in runs))
    for cfg, values in runs:
        method = cfg.method.name
        if method == "dense":
            goal: float | None = 0.0
        elif _specifiable(method):
            goal = round(100 * float(cfg.method.sparsity), 6)
        else:
            goal = None
        split = [f"{k.rsplit('.', 1)[-1]}={values[k]}" for k in by if k in values]
        row = method + (f" ({', '.join(split)})" if split else "")
        tuned = {k: v for k, v in values.items() if k not in PLACING and k not in by}
        section = f"{cfg.model.name} / {cfg.data.name}"
        planned.append(PlannedRun(cfg, section, row, goal, "", 0.0, tuned_key(tuned)))
    plan = plan_frame(planned)
    blocks = []
    for section in pairs:
        mine = plan[plan["section"] == section]
        goals = tuple(sorted({float(g) for g in mine["goal"].dropna()}))
        rows = tuple(dict.fromkeys(mine["row"]))
        blocks.append(Block(goals, ((section, rows),), title=section))
    if language_model:
        layout = TableLayout(
            blocks=tuple(blocks),
            metrics=("ppl", "sparsity"),
            per_row=("tok_per_s",),
            highlight_metric="ppl",
        )
        return plan, layout
    layout = TableLayout(
        blocks=tuple(blocks), metrics=("accuracy", "speedup", "sparsity"), per_row=("img_per_s",)
    )
    return plan, layout
