"""Rendering a built table as Markdown, LaTeX (the paper's highlight macros), CSV or a DataFrame."""

from __future__ import annotations

import pandas as pd

from benchmark.reporting.agreement import agreement_lines, top_two_text
from benchmark.reporting.seedstats import WORSE
from benchmark.reporting.tables import DECIMALS, HEADERS, Column, Table, Value

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
    if any(
        v.status == "none" for b in table.blocks for g in b.groups for ln in g for v in ln.values
    ):
        lines.append(
            "---: nothing to report in this cell: no run is planned there, or a method without "
            "a goal sparsity (CS, STR, DST) reached no sparsity close to the column (see the "
            "notes)."
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
    out += agreement_lines(table.agreement, table.test_images)
    out += _summary(table, store)
    return "\n".join(out) + "\n"


def _scale_text(table: Table) -> str:
    # A slice or staged tuning is part of what the table is: every rendering's title says so.
    scale = f"{table.scale} scale" if table.scale in ("smoke", "paper") else table.scale
    text = scale + (f": {table.ran}" if table.ran else "")
    return "; ".join([text, *table.labels])


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
    agree = agreement_lines(table.agreement, table.test_images)
    out += [f"% {line}" for line in [*agree, *_summary(table, store)]]
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
        text += _tex(v.annotation).replace(WORSE, r"$\downarrow$")
    if with_paper and v.status != "unavailable":
        text += (
            r" {\scriptsize("
            + _tex(_paper_text(v, metric, " ± ")).replace("±", r"\textpm").replace("Δ", r"$\Delta$")
            + ")}"
        )
    return text


def table_frame(table: Table) -> pd.DataFrame:
    """The table in the long format of the paper's CSVs (benchmark/experiments/paper), plus run
    counts and paper values."""
    rows = []
    agree = {a.key: a for a in table.agreement}
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
                if table.labels:  # a slice or staged tuning: said on every CSV row
                    row["built"] = "; ".join(table.labels)
                if table.with_paper:
                    diff = None if v.mean is None or v.paper_mean is None else v.mean - v.paper_mean
                    row |= {"paper_mean": v.paper_mean, "paper_std": v.paper_std, "diff": diff}
                    # The column's agreement with the paper (on the ranked metric's cells).
                    a = (
                        agree.get((line.section, c.goal, c.budget))
                        if c.metric == table.metric
                        else None
                    )
                    row |= {
                        "column_tau": None if a is None else a.tau,
                        "column_top_two": None if a is None else top_two_text(a),
                    }
                rows.append(row)
    return pd.DataFrame(rows)


def render_csv(table: Table) -> str:
    """:func:`table_frame` as CSV text."""
    return table_frame(table).to_csv(index=False)
