"""Which configuration each table cell reports: the store joined to a table's plan, validation
accuracy averaged over seeds per configuration, the best configuration per cell, and the placing
of methods without a goal sparsity (CS, STR, DST) into goal columns (by the
:class:`~benchmark.reporting.rules.TableRules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from benchmark.experiments.base import CELL, TableLayout
from benchmark.reporting.rules import TableRules

# The validation column configurations are selected by, per reported metric (else accuracy).
SELECT_BY: dict[str, tuple[str, float]] = {
    "accuracy": ("val.top1", 100.0),
    "iou": ("val.miou", 100.0),
    "bleu": ("val.bleu", 1.0),
    # Perplexity: configurations are selected by the largest -ppl (the smallest perplexity).
    "ppl": ("val.neg_ppl", 1.0),
}

# metric -> (store column, scale to the printed unit)
METRICS: dict[str, tuple[str, float]] = {
    "accuracy": ("test.top1", 100.0),
    "speedup": ("speedup", 1.0),
    "sparsity": ("sparsity", 100.0),
    "img_per_s": ("images_per_s", 1.0),
    # Language models: training windows/s times their tokens (recorded by the run).
    "tok_per_s": ("tokens_per_s", 1.0),
    "iou": ("test.miou", 100.0),
    "bleu": ("test.bleu", 1.0),
    "ppl": ("test.neg_ppl", -1.0),
    # Set by `prunebench latency RUN_ID` (benchmark.measure.run_latency); NaN where not measured.
    "measured_speedup": ("measured_speedup", 1.0),
}
# Zero-shot accuracies of language models (eval.zero_shot): metric "zs_<task>" is the task's
# accuracy, "zs_mean" their mean, in percent (NaN where not evaluated); the printed names.
ZERO_SHOT_TASKS = {
    "boolq": "BoolQ",
    "rte": "RTE",
    "hellaswag": "HellaSwag",
    "winogrande": "WinoGrande",
    "arc_easy": "ARC-e",
    "arc_challenge": "ARC-c",
    "openbookqa": "OBQA",
    "pydoc_cloze": "pydoc cloze",
}
METRICS |= {f"zs_{task}": (f"zero_shot.tasks.{task}.acc", 100.0) for task in ZERO_SHOT_TASKS}
METRICS["zs_mean"] = ("zero_shot.mean_acc", 100.0)


STORE_COLUMNS = [
    "run_id",
    "status",
    *(c for c, _ in SELECT_BY.values()),
    *(c for c, _ in METRICS.values()),
]


def join_store(plan: pd.DataFrame, store: pd.DataFrame) -> pd.DataFrame:
    """The plan with each run's metrics (NaN when not finished) and a boolean ``done`` column."""
    present = [c for c in STORE_COLUMNS if c in store.columns]
    joined = plan.merge(store[present], on="run_id", how="left") if present else plan.copy()
    for column in STORE_COLUMNS[1:]:
        if column not in joined.columns:
            joined[column] = np.nan
        elif column != "status" and joined[column].dtype == object:
            # A metric no run recorded (None: e.g. tokens/s of one-shot runs) is NaN.
            joined[column] = pd.to_numeric(joined[column], errors="coerce")
    joined["done"] = joined["status"].eq("finished")
    return joined


def _std(mean: pd.Series, mean_sq: pd.Series, n: pd.Series, ddof: int) -> pd.Series:
    # Std from E[x^2] - E[x]^2 (rescaled by n / (n - ddof)): one vectorised pass instead of a
    # Python callback per group, which keeps a 10,000-run store well under a second.
    population_var = (mean_sq - mean**2).clip(lower=0.0)
    dof = (n - ddof).where(n > ddof)  # NaN: too few seeds for this ddof
    return np.sqrt(population_var * n / dof)


def configuration_stats(
    joined: pd.DataFrame, ddof: int = 1, select: str = "accuracy"
) -> pd.DataFrame:
    """Per (cell, tuned configuration): seed means, stds (``ddof``), min/max of every metric and
    the seed count; ``val`` is the validation value of ``select`` (a key of :data:`SELECT_BY`)."""
    done = joined[joined["done"]].copy()
    column, scale = SELECT_BY[select]
    done["val"] = done[column] * scale
    aggs: dict[str, tuple[str, str]] = {"val": ("val", "mean"), "n": ("val", "size")}
    for metric, (column, scale) in METRICS.items():
        done[metric] = done[column] * scale
        done[f"{metric}_sq"] = done[metric] ** 2
        aggs[metric] = (metric, "mean")
        aggs[f"{metric}_sq"] = (f"{metric}_sq", "mean")
        aggs[f"{metric}_min"] = (metric, "min")
        aggs[f"{metric}_max"] = (metric, "max")
    stats = done.groupby([*CELL, "tuned"], dropna=False, sort=False).agg(**aggs).reset_index()
    for metric in METRICS:
        stats[f"{metric}_std"] = _std(stats[metric], stats.pop(f"{metric}_sq"), stats["n"], ddof)
    return stats


def place_unspecified(
    stats: pd.DataFrame,
    sparsities: Mapping[str, Sequence[float]],
    rules: TableRules | None = None,
) -> pd.DataFrame:
    """Give configurations without a goal sparsity a goal column (see :class:`TableRules`).

    ``sparsities`` maps a section to its goal-sparsity columns (percent). A configuration may
    feed several columns only through the closest-configuration fallback; one that lands in no
    column is dropped, and a column nothing lands in shows "---".
    """
    rules = rules or TableRules()
    free = stats["goal"].isna().to_numpy()
    if not free.any():
        return stats
    loose = stats[free].reset_index(drop=True)
    placed: list[pd.DataFrame] = []
    for (section, *_), group in loose.groupby(
        ["section", "row", "budget", "x"], dropna=False, sort=False
    ):
        goals = [float(g) for g in sparsities.get(section, ())]
        for goal, rows in _placements(group["sparsity"].to_numpy(), goals, rules).items():
            placed.append(group.iloc[rows].assign(goal=goal))
    return pd.concat([stats[~free], *placed], ignore_index=True)


def _placements(achieved: np.ndarray, goals: list[float], rules: TableRules) -> dict[float, list]:
    """goal -> positions in ``achieved`` (mean sparsities of one row's configurations) placed
    there: the +-tolerance interval, else the closest configuration (:class:`TableRules`)."""
    eps = 1e-9  # printed sparsities are rounded: 90.25 is inside 90 +- 0.25
    within = rules.tolerance + eps
    inside = {g: [i for i, a in enumerate(achieved) if abs(a - g) <= within] for g in goals}
    out = {g: rows for g, rows in inside.items() if rows}
    empty = [g for g in goals if not inside[g]]
    if rules.max_distance <= 0 or len(achieved) == 0:
        return out
    finite = np.where(np.isnan(achieved), np.inf, achieved)
    closest = {g: int(np.argmin(np.abs(finite - g))) for g in empty}
    taken = {i for rows in inside.values() for i in rows}
    for g in empty:
        i = closest[g]
        distance = abs(finite[i] - g)
        if distance > rules.max_distance + eps or i in taken:
            continue
        # "belongs to another column": another empty column claims it and is nearer (ties: lower)
        rivals = [
            h
            for h in empty
            if h != g and closest[h] == i and (abs(finite[i] - h), h) < (distance, g)
        ]
        if not rivals:
            out[g] = [i]
    return out


def select_best(stats: pd.DataFrame) -> pd.DataFrame:
    """Per cell, the configuration with the best mean validation accuracy (first on ties)."""
    ordered = stats.sort_values("val", ascending=False, kind="mergesort", na_position="last")
    return ordered.drop_duplicates(subset=CELL, keep="first").reset_index(drop=True)


def missing_counts(joined: pd.DataFrame) -> pd.DataFrame:
    """Per cell: planned and missing (not finished) runs."""
    frame = joined.assign(missing=~joined["done"])
    counts = frame.groupby(CELL, dropna=False, sort=False).agg(
        planned=("run_id", "size"), missing=("missing", "sum")
    )
    return counts.reset_index()


def aggregate(
    plan: pd.DataFrame,
    store: pd.DataFrame,
    sparsities: Mapping[str, Sequence[float]] | None = None,
    rules: TableRules | None = None,
    select: str = "accuracy",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(selected configuration per cell, planned/missing runs per cell) of ``plan`` in ``store``."""
    rules = rules or TableRules()
    joined = join_store(plan, store)
    stats = place_unspecified(
        configuration_stats(joined, rules.ddof, select), sparsities or {}, rules
    )
    return select_best(stats), missing_counts(joined)


def selection_metric(layout: TableLayout | None) -> str:
    """The validation metric (a key of :data:`SELECT_BY`) that picks each cell's configuration."""
    metric = layout.highlight_metric if layout is not None else "accuracy"
    return metric if metric in SELECT_BY else "accuracy"


def select_cells(
    layout: TableLayout | None,
    plan: pd.DataFrame,
    store: pd.DataFrame,
    rules: TableRules | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`aggregate` as a table of ``layout`` selects: its goal sparsities and its metric.

    Tables, their statistics and exports all call this, so they report the same configurations.
    """
    goals = {s: b.sparsities for b in layout.blocks for s, _ in b.groups} if layout else None
    return aggregate(plan, store, goals, rules, select=selection_metric(layout))


def per_row_means(plan: pd.DataFrame, store: pd.DataFrame) -> pd.DataFrame:
    """Per (section, row): the mean of every metric over all its finished runs (e.g. images/s)."""
    joined = join_store(plan, store)
    done = joined[joined["done"]]
    out = pd.DataFrame(
        {m: done[c] * s for m, (c, s) in METRICS.items()}
        | {"section": done["section"], "row": done["row"]}
    )
    return out.groupby(["section", "row"], sort=False).mean().reset_index()
