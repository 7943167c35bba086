"""Selection, aggregation and rendering of the paper's tables from a results store.

Runs are grouped by table cell and tuned configuration; the validation top-1 accuracy is averaged
over seeds per configuration; the best configuration of each cell is kept and its test accuracy
(and speedup, achieved sparsity) is reported as mean +- std over its seeds. Planned runs missing
from the store are counted, and cells they feed are marked, never silently dropped.

Three choices the paper leaves open are parameters of :class:`TableRules` (see its docstring and
the README's "Reproduce a table"): the standard deviation's ddof (the paper only says "standard
deviation"; default 1, the sample std that pandas, and so a W&B-and-pandas workflow like the
paper's, computes), how far the closest configuration of a method without a goal sparsity may lie
from a goal column that has none within +-0.25%, and what "belongs to another column" means.
Highlights rank the unrounded means (the paper's printed tables give different colours to values
that print the same).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from benchmark.errors import ConfigError
from benchmark.experiments.base import CELL, Experiment, Scale, TableLayout

# metric -> (store column, scale to the printed unit)
METRICS: dict[str, tuple[str, float]] = {
    "accuracy": ("test.top1", 100.0),
    "speedup": ("speedup", 1.0),
    "sparsity": ("sparsity", 100.0),
    "img_per_s": ("images_per_s", 1.0),
    "iou": ("test.miou", 100.0),
    "bleu": ("test.bleu", 1.0),
    # Set by `prunebench latency RUN_ID` (benchmark.run_latency); NaN where not measured.
    "measured_speedup": ("measured_speedup", 1.0),
}
HEADERS = {"accuracy": "Acc.", "speedup": "Speedup", "sparsity": "Sparsity", "img_per_s": "img/s"}
HEADERS["measured_speedup"] = "Measured speedup"
HEADERS |= {"iou": "mIoU", "bleu": "BLEU"}
DECIMALS = {"accuracy": 2, "speedup": 1, "sparsity": 2, "img_per_s": 0, "measured_speedup": 2}
DECIMALS |= {"iou": 2, "bleu": 2}
# The validation column configurations are selected by, per reported metric (else accuracy).
SELECT_BY: dict[str, tuple[str, float]] = {
    "accuracy": ("val.top1", 100.0),
    "iou": ("val.miou", 100.0),
    "bleu": ("val.bleu", 1.0),
}
SPARSITY_TOLERANCE = 0.25  # percent points, for methods without a goal sparsity (paper)
# Our choice, not the paper's: the smallest round distance (percent points) that places every
# out-of-interval cell the paper prints (the farthest is STR at 75.34% in the 70% ImageNet column).
MAX_PLACEMENT_DISTANCE = 6.0
RANKS = ("first", "second", "third")
STORE_COLUMNS = [
    "run_id",
    "status",
    *(c for c, _ in SELECT_BY.values()),
    *(c for c, _ in METRICS.values()),
]

Status = Literal["ok", "partial", "missing", "none", "unavailable"]


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class TableRules:
    """The selection and aggregation rules of a table where the paper leaves a choice open.

    ``ddof``: the standard deviation over seeds divides by n - ddof (1: sample std, the default,
    what pandas computes; 0: population std). With fewer than ddof + 1 seeds it is undefined and
    printed as the mean alone.

    Methods whose sparsity is not specifiable (CS, STR, DST) are placed by their configuration's
    mean achieved sparsity: in the goal column whose +-``tolerance`` interval holds it (the
    paper's .25%). For a goal column that no configuration's interval placement reaches, the
    paper's caption uses "the closest one" unless it "is too far away or belongs to another
    column"; our reading of that (a choice, not the paper's stated rule): the configuration of
    the row closest to the goal is placed there unless it lies more than ``max_distance`` percent
    points away, lies within another column's interval, or is closer to another goal column that
    also lacks an in-interval configuration and whose closest configuration it is too.
    ``max_distance = 0`` disables the fallback (strict intervals).
    """

    ddof: int = 1
    tolerance: float = SPARSITY_TOLERANCE
    max_distance: float = MAX_PLACEMENT_DISTANCE

    def __post_init__(self) -> None:
        if self.ddof not in (0, 1):
            raise ConfigError("ddof", self.ddof, "0 (population std) or 1 (sample std)")
        if not self.tolerance >= 0:
            raise ConfigError("tolerance", self.tolerance, "a number of percent points >= 0")
        if not self.max_distance >= 0:
            raise ConfigError("max_distance", self.max_distance, "a number of percent points >= 0")


def join_store(plan: pd.DataFrame, store: pd.DataFrame) -> pd.DataFrame:
    """The plan with each run's metrics (NaN when not finished) and a boolean ``done`` column."""
    present = [c for c in STORE_COLUMNS if c in store.columns]
    joined = plan.merge(store[present], on="run_id", how="left") if present else plan.copy()
    for column in STORE_COLUMNS[1:]:
        if column not in joined.columns:
            joined[column] = np.nan
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


# --------------------------------------------------------------------------- the table model


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
    # Hook for benchmark.table_stats: text shown after the value and extra CSV columns.
    annotation: str = ""
    stats: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Column:
    """A sub-column: goal sparsity (None for a per-row column), budget and metric."""

    goal: float | None
    budget: str
    metric: str


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
) -> Table:
    """Select, aggregate and lay out ``plan`` against ``store`` (and the paper's numbers)."""
    select = selection_metric(layout)
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
            Column(g, b, m)
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
                for value, c in zip(values, columns, strict=True):
                    p = paper_at.get((*_key(section, label, c.goal, c.budget), c.metric))
                    if p is not None:
                        value.paper_mean, value.paper_std = _num(p["mean"]), _num(p["std"])
                        value.paper_missing = bool(p.get("note"))
                lines.append(Line(section, label, values))
            groups.append(lines)
        _highlight(groups, columns, layout)
        blocks.append(BuiltBlock(block.title, columns, groups))
    done = (
        plan.merge(store[["run_id", "status"]], on="run_id", how="left")
        if "status" in store
        else None
    )
    finished = set() if done is None else set(done.loc[done["status"].eq("finished"), "run_id"])
    ids = set(plan["run_id"])
    return Table(
        table_id,
        scale,
        blocks,
        planned=len(ids),
        missing=len(ids - finished),
        notes=list(dict.fromkeys(notes)),
        with_paper=paper is not None,
        metric=select,
    )


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
            if layout.ranked(line.section) and value.mean is not None:
                by_section.setdefault(line.section, []).append(value)
        for values in by_section.values():
            ranked = sorted({v.mean for v in values}, reverse=True)[: len(RANKS)]
            for v in values:
                if v.mean in ranked:
                    v.highlight = RANKS[ranked.index(v.mean)]


# --------------------------------------------------------------------------- rendering

LATEX_MACROS = r"""\newcommand{\first}[1]{\textbf{\color[HTML]{e55352}{#1}}}
\newcommand{\second}[1]{\textbf{\color[HTML]{eeb00a}{#1}}}
\newcommand{\third}[1]{\textbf{\color[HTML]{55aaff}{#1}}}"""
MARKDOWN_RANKS = {"first": "¹", "second": "²", "third": "³"}
STATUS_TEXT = {"missing": "missing", "none": "---", "unavailable": "n/a"}


def _number(mean: float | None, std: float | None, metric: str, pm: str) -> str:
    if mean is None:
        return ""
    d = DECIMALS[metric]
    # No std (per-row columns) or an undefined one (a single seed with ddof = 1): the mean alone.
    return f"{mean:.{d}f}" if std is None else f"{mean:.{d}f}{pm}{std:.{d}f}"


def _paper_text(v: Value, metric: str, pm: str) -> str:
    """The published value and the difference (reproduced - published)."""
    if v.paper_missing:
        return "paper ---"
    if v.paper_mean is None:
        return "paper n/a"
    text = f"paper {_number(v.paper_mean, v.paper_std, metric, pm)}"
    if v.mean is not None:
        text += f", Δ {v.mean - v.paper_mean:+.{DECIMALS[metric]}f}"
    return text


def _column_label(c: Column, single_metric: bool, sep: str = ", ") -> str:
    # Say what each number is (as the LaTeX header's "Model sparsity" and "Budget:" rows do).
    parts = [] if c.goal is None else [f"sparsity {c.goal:g}%"]
    if c.budget:
        parts.append(f"budget {c.budget}")
    if c.goal is None or not single_metric:
        parts.append(HEADERS[c.metric])
    return sep.join(parts)


def _summary(table: Table, store: str) -> list[str]:
    lines = [
        f"{table.planned - table.missing} of {table.planned} planned runs found in {store}; "
        f"missing: {table.missing}."
    ]
    if table.metric != "accuracy":
        label = HEADERS[table.metric]
        lines.append(
            f"Values: test {label}, mean ± std over seeds; selected by validation {label}."
        )
    if any(
        v.status == "partial" for b in table.blocks for g in b.groups for ln in g for v in ln.values
    ):
        lines.append(
            "† built from an incomplete set of runs (some seeds or configurations missing)."
        )
    lines += [f"Note: {n}" for n in table.notes]
    return lines


def render_markdown(table: Table, store: str = "the store") -> str:
    """GitHub Markdown: one pipe table per block; ¹²³ mark first/second/third best."""
    out = [f"### {table.id} ({_scale_text(table)})", ""]
    for block in table.blocks:
        if block.title and len(table.blocks) > 1:
            out += [f"**{block.title}**", ""]
        single = len({c.metric for c in block.columns if c.goal is not None}) == 1
        header = ["Method", *(_column_label(c, single) for c in block.columns)]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "|".join([":---", *("---:" for _ in block.columns)]) + "|")
        for i, lines in enumerate(block.groups):
            if i > 0:
                out.append(f"| *{lines[0].section if lines else ''}* |" + " |" * len(block.columns))
            for line in lines:
                cells = [
                    _md_cell(v, c.metric, table.with_paper)
                    for v, c in zip(line.values, block.columns, strict=True)
                ]
                out.append(f"| {line.label} | " + " | ".join(cells) + " |")
        out.append("")
    what = "accuracy" if table.metric == "accuracy" else HEADERS[table.metric]
    out.append(f"¹ ² ³: first, second and third best per column (unrounded mean test {what}).")
    out += _summary(table, store)
    return "\n".join(out) + "\n"


def _scale_text(table: Table) -> str:
    return f"{table.scale} scale" + (f": {table.ran}" if table.ran else "")


def _md_cell(v: Value, metric: str, with_paper: bool) -> str:
    if v.status in STATUS_TEXT:
        text = STATUS_TEXT[v.status]
        if v.status == "missing" and v.planned:
            text += f" ({v.missing}/{v.planned})"
    else:
        text = _number(v.mean, v.std, metric, " ± ")
        if v.highlight == "first":
            text = f"**{text}**"
        text += MARKDOWN_RANKS.get(v.highlight, "") + ("†" if v.status == "partial" else "")
        text += v.annotation
    if with_paper and v.status != "unavailable":
        text += f" ({_paper_text(v, metric, ' ± ')})"
    return text


def render_latex(table: Table, store: str = "the store", preamble: bool = False) -> str:
    """A booktabs tabular per block with the paper's \\first/\\second/\\third colours."""
    macros = LATEX_MACROS if preamble else "\n".join(f"% {m}" for m in LATEX_MACROS.splitlines())
    out = [
        f"% prunebench table {table.id} ({_scale_text(table)}); needs booktabs and xcolor",
        macros,
    ]
    for block in table.blocks:
        cols = block.columns
        out.append(r"\begin{tabular}{l" + "c" * len(cols) + "}")
        out.append(r"\toprule")
        if block.title and len(table.blocks) > 1:
            out.append(
                rf"\multicolumn{{{len(cols) + 1}}}{{c}}{{\textbf{{{_tex(block.title)}}}}} \\"
            )
            out.append(r"\midrule")
        out += _latex_header(cols)
        for i, lines in enumerate(block.groups):
            if i > 0:
                out.append(r"\midrule")
            for line in lines:
                cells = [
                    _tex_cell(v, c.metric, table.with_paper)
                    for v, c in zip(line.values, cols, strict=True)
                ]
                out.append(" & ".join([_tex(line.label), *cells]) + r" \\")
        out += [r"\bottomrule", r"\end{tabular}", ""]
    out += [f"% {line}" for line in _summary(table, store)]
    return "\n".join(out) + "\n"


def _latex_header(cols: list[Column]) -> list[str]:
    """Sparsity groups (with cmidrules), then budgets, then metrics, each only when it varies."""
    spans: list[tuple[str, int, int]] = []  # (label, first column, last column), 1-based
    for j, c in enumerate(cols, start=2):
        label = "" if c.goal is None else f"Model sparsity {c.goal:g}\\%"
        if spans and spans[-1][0] == label and label:
            spans[-1] = (label, spans[-1][1], j)
        else:
            spans.append((label, j, j))
    top = " & ".join(["", *(rf"\multicolumn{{{b - a + 1}}}{{c}}{{{lbl}}}" for lbl, a, b in spans)])
    rules = " ".join(rf"\cmidrule(lr){{{a}-{b}}}" for lbl, a, b in spans if lbl)
    lines = [top + r" \\", rules]
    if any(c.budget for c in cols):
        lines.append(" & ".join(["Budget:", *(_tex(c.budget) for c in cols)]) + r" \\")
    metrics = {c.metric for c in cols}
    if len(metrics) > 1:
        lines.append(
            " & ".join(["", *(HEADERS[c.metric].replace("img/s", r"\# img/s") for c in cols)])
            + r" \\"
        )
    lines.append(r"\midrule")
    return lines


def _tex(text: str) -> str:
    return text.replace("%", r"\%").replace("&", r"\&").replace("_", r"\_").replace("#", r"\#")


def _tex_cell(v: Value, metric: str, with_paper: bool) -> str:
    if v.status in STATUS_TEXT:
        text = {"missing": r"\textit{missing}", "none": "---", "unavailable": "n/a"}[v.status]
    else:
        text = _number(v.mean, v.std, metric, r" {\small\textpm ")
        text += "}" if v.std is not None else ""
        if v.highlight:
            text = rf"\{v.highlight}{{{text}}}"
        if v.status == "partial":
            text += r"$^\dagger$"
        text += _tex(v.annotation).replace("≈", r"$\approx$")
    if with_paper and v.status != "unavailable":
        text += (
            r" {\scriptsize("
            + _tex(_paper_text(v, metric, " ± ")).replace("±", r"\textpm").replace("Δ", r"$\Delta$")
            + ")}"
        )
    return text


def table_frame(table: Table) -> pd.DataFrame:
    """The table in the long format of results/paper/*.csv, plus run counts and paper values."""
    rows = []
    for block in table.blocks:
        for line in (ln for lines in block.groups for ln in lines):
            for v, c in zip(line.values, block.columns, strict=True):
                row = {
                    "table": table.id,
                    "section": line.section,
                    "row": line.label,
                    "sparsity": c.goal,
                    "budget": c.budget,
                    "metric": c.metric,
                    "mean": v.mean,
                    "std": v.std,
                    "highlight": v.highlight,
                    "note": "" if v.status == "ok" else v.status,
                    "planned": v.planned,
                    "missing": v.missing,
                    **v.stats,
                }
                if table.with_paper:
                    diff = None if v.mean is None or v.paper_mean is None else v.mean - v.paper_mean
                    row |= {"paper_mean": v.paper_mean, "paper_std": v.paper_std, "diff": diff}
                rows.append(row)
    return pd.DataFrame(rows)


def render_csv(table: Table) -> str:
    """:func:`table_frame` as CSV text."""
    return table_frame(table).to_csv(index=False)


def rebuild(
    experiment: Experiment,
    scale: Scale,
    store_dir: str | Path,
    *,
    paper: bool = False,
    store: pd.DataFrame | None = None,
    rules: TableRules | None = None,
) -> Table:
    """The table of ``experiment`` at ``scale`` from the store in ``store_dir``."""
    from benchmark.paper_numbers import load_paper_table
    from benchmark.store import load_store

    layout = experiment.layout(scale)
    if layout is None:
        raise ConfigError("table id", experiment.id, "the id of a table (this one is a figure)")
    frame = load_store(store_dir) if store is None else store
    published = None
    if paper and experiment.paper_table is not None:
        published = load_paper_table(experiment.paper_table)
    unavailable = getattr(experiment, "unavailable_rows", lambda _scale: {})(scale)
    table = build_table(
        experiment.id,
        scale,
        layout,
        experiment.plan(scale, store_dir),
        frame,
        unavailable=unavailable,
        paper=published,
        rules=rules,
    )
    if scale == "smoke":
        from benchmark.titles import what_ran

        table.ran = what_ran(experiment, scale, store_dir)
    return table
