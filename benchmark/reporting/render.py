"""Rendering a built table as Markdown, LaTeX (the paper's highlight macros), CSV or a DataFrame."""

from __future__ import annotations

import pandas as pd

from benchmark.core.textwidth import pipe_chunks, wrap
from benchmark.reporting.agreement import agreement_lines, top_two_text, verdict_lines
from benchmark.reporting.seedstats import WORSE
from benchmark.reporting.tables import DECIMALS, HEADERS, BuiltBlock, Column, Table, Value
from benchmark.store.records import skipped_line

LATEX_MACROS = r"""\newcommand{\first}[1]{\textbf{\color[HTML]{e55352}{#1}}}
\newcommand{\second}[1]{\textbf{\color[HTML]{eeb00a}{#1}}}
\newcommand{\third}[1]{\textbf{\color[HTML]{55aaff}{#1}}}"""


MARKDOWN_RANKS = {"first": "¹", "second": "²", "third": "³"}


# Metrics whose difference to the paper's value says something about the method.
ACCURACY_LIKE = frozenset({"accuracy", "iou", "bleu"})


STATUS_TEXT = {
    "missing": "missing",
    "none": "---",
    "unavailable": "n/a",
    "outside": "outside slice",
}


def _number(mean: float | None, std: float | None, metric: str, pm: str) -> str:
    if mean is None:
        return ""
    d = DECIMALS[metric]
    # No std (per-row columns) or an undefined one (a single seed with ddof = 1): the mean alone.
    return f"{mean:.{d}f}" if std is None else f"{mean:.{d}f}{pm}{std:.{d}f}"


def _paper_cell(v: Value, metric: str) -> str:
    """The published value of a cell alone (the row under a method's row)."""
    if v.status == "unavailable":
        return ""
    return _paper_text(v, metric, " ± ").removeprefix("paper ").split(", Δ")[0]


def _diff_cell(v: Value, metric: str) -> str:
    """Reproduced - published of an accuracy-like cell with both, else empty."""
    if v.mean is None or v.paper_mean is None or v.paper_missing or metric not in ACCURACY_LIKE:
        return ""
    if v.status == "unavailable":
        return ""
    return f"{v.mean - v.paper_mean:+.{DECIMALS[metric]}f}"


def _paper_text(v: Value, metric: str, pm: str) -> str:
    """The published value and, for an accuracy-like metric, the difference (reproduced -
    published): images/s and speedup depend on the device and model, not on the method alone."""
    if v.paper_missing:
        return "paper ---"
    if v.paper_mean is None:
        return "paper n/a"
    text = f"paper {_number(v.paper_mean, v.paper_std, metric, pm)}"
    if v.mean is not None and metric in ACCURACY_LIKE:
        text += f", Δ {v.mean - v.paper_mean:+.{DECIMALS[metric]}f}"
    return text


def _column_parts(c: Column, single_metric: bool) -> list[str]:
    # Say what each number is (as the LaTeX header's "Model sparsity" and "Budget:" rows do).
    parts = [] if c.goal is None else [f"sparsity {c.goal:g}%"]
    if c.budget:
        parts.append(f"{c.budget_name} {c.budget}")
    if c.goal is None or not single_metric:
        parts.append(HEADERS[c.metric])
    return parts


def _shared_parts(labels: list[list[str]]) -> list[str]:
    """The leading parts every column header of ``labels`` shares (each keeps its last part)."""
    shared: list[str] = []
    for parts in zip(*(label[:-1] for label in labels), strict=False):
        if len(labels) < 2 or any(p != parts[0] for p in parts):
            break
        shared.append(parts[0])
    return shared


def _block_header(
    block: BuiltBlock, rows: list[list[str]], width: int | None
) -> tuple[list[str], str]:
    """The pipe header of ``block`` and a line said once above it: where the full headers
    would split the block into more tables at ``width`` than headers without the parts every
    column shares ("sparsity 50%, pattern unstructured"), those parts go to the line, so that
    a paper's row of tasks (BoolQ ... Mean) stays one table."""
    single = len({c.metric for c in block.columns if c.goal is not None}) == 1
    labels = [_column_parts(c, single) for c in block.columns]
    header = ["Method", *(", ".join(parts) for parts in labels)]
    shared = _shared_parts(labels)
    if not shared:
        return header, ""
    short = ["Method", *(", ".join(parts[len(shared) :]) for parts in labels)]
    if len(pipe_chunks([short, *rows], width)) < len(pipe_chunks([header, *rows], width)):
        return short, f"*every column: {', '.join(shared)}*"
    return header, ""


def _summary(table: Table, store: str) -> list[str]:
    missing = f"{table.missing}"
    if table.outside:
        missing = f"{table.missing - table.outside} inside the slice, {table.outside} outside it"
    lines = [
        f"{table.planned - table.missing} of {table.planned} planned runs found in {store}; "
        f"missing: {missing}."
    ]
    if table.skipped:
        lines.append(skipped_line(table.skipped, "not counted as found") + ".")
    if table.metric != "accuracy":
        label = HEADERS[table.metric]
        lines.append(
            f"Values: test {label}, mean ± std over seeds; selected by validation {label}."
        )
    zero_shot = dict.fromkeys(
        HEADERS[c.metric] for b in table.blocks for c in b.columns if c.metric.startswith("zs_")
    )
    if zero_shot:
        # Their cells are not the table's metric: say what they are, as the papers' captions do.
        mean = "; Mean: their mean" if "Mean" in zero_shot else ""
        lines.append(
            f"{', '.join(zero_shot)}: zero-shot accuracy of the same runs in percent (lm-eval's "
            f"acc, no few-shot examples{mean})."
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
    statuses = {v.status for b in table.blocks for g in b.groups for ln in g for v in ln.values}
    if "missing" in statuses:
        inside = "; the cell is inside the slice" if table_sliced(table) else ""
        if table.failed:
            lines.append(
                "missing (n/m): n of the cell's m planned runs (seeds x configurations) have no "
                f"finished result: {table.failed} of this table's runs failed (reproduce prints "
                "their errors; with --retry-failed it runs them again), the others have not "
                f"finished yet{inside}."
            )
        else:
            lines.append(
                "missing (n/m): n of the cell's m planned runs (seeds x configurations) have not "
                f"finished yet{inside}."
            )
    if "outside" in statuses:
        lines.append(
            "outside slice (m/m): the cell's m planned runs are not part of this slice, so this "
            "command neither runs nor counts them; not a missing result."
        )
    lines += [f"Note: {n}" for n in table.notes]
    return lines


def table_sliced(table: Table) -> bool:
    """Whether ``table`` shows a slice of its spec."""
    return any(label.startswith("slice: ") for label in table.labels)


def render_markdown(table: Table, store: str = "the store", width: int | None = None) -> str:
    """GitHub Markdown: one pipe table per block; ¹²³ mark first/second/third best. With
    ``width`` (a terminal's columns), a block wider than that is split into several pipe tables
    of consecutive columns, each repeating the row labels, and the lines under it wrap; with the
    paper's numbers, each row is then followed by a row of the published values and one of the
    differences, so that a cell's three values stay in one column."""
    out = [f"### {table.id} ({_scale_text(table)})", ""]
    for block in table.blocks:
        if block.title and len(table.blocks) > 1:
            out += [f"**{block.title}**", ""]
        rows, sections, below = _block_rows(block, table.with_paper, stacked=False)
        header, shared = _block_header(block, rows, width)
        parts = pipe_chunks([header, *rows], width)
        if table.with_paper and len(parts) > 1:
            rows, sections, below = _block_rows(block, True, stacked=True)
            header, shared = _block_header(block, rows, width)
            parts = pipe_chunks([header, *rows], width)
        if shared:
            out += [shared, ""]
        for part in parts:
            if len(parts) > 1:
                out += [f"*columns {part.start}-{part.stop - 1} of {len(block.columns)}*", ""]
            out += _pipe_table(header, rows, sections, below, part)
            out.append("")
    what = "accuracy" if table.metric == "accuracy" else HEADERS[table.metric]
    footer = [f"¹ ² ³: first, second and third best per column (unrounded mean test {what})."]
    if any(r[0] == PAPER_ROW for r in rows):
        footer.append(
            f"{PAPER_ROW}, {DIFF_ROW}: under each row, the paper's value of each cell and the "
            "difference (here - paper; accuracy-like metrics only)."
        )
    footer += agreement_lines(table.agreement, table.test_images)
    footer += verdict_lines(table.agreement, table.scale)
    footer += _summary(table, store)
    out += [wrap(line, width) for line in footer]
    return "\n".join(out) + "\n"


# The labels of the rows under a method's row that hold the paper's values and the differences.
PAPER_ROW, DIFF_ROW = "↳ paper", "↳ Δ"


def _block_rows(
    block: BuiltBlock, with_paper: bool, stacked: bool
) -> tuple[list[list[str]], set[int], set[int]]:
    """A block's rows (label and cells), the indexes of the rules between groups, and of the
    rows under a method's row (``stacked``: the paper's values and the differences)."""
    rows: list[list[str]] = []
    sections: set[int] = set()
    below: set[int] = set()
    for i, lines in enumerate(block.groups):
        if i > 0:
            sections.add(len(rows))
            rows.append([f"*{lines[0].section if lines else ''}*"] + [""] * len(block.columns))
        for line in lines:
            pairs = list(zip(line.values, block.columns, strict=True))
            rows.append(
                [line.label, *(_md_cell(v, c.metric, with_paper and not stacked) for v, c in pairs)]
            )
            if stacked:
                below |= {len(rows), len(rows) + 1}
                rows.append([PAPER_ROW, *(_paper_cell(v, c.metric) for v, c in pairs)])
                rows.append([DIFF_ROW, *(_diff_cell(v, c.metric) for v, c in pairs)])
    return rows, sections, below


def _pipe_table(
    header: list[str],
    rows: list[list[str]],
    sections: set[int],
    below: set[int],
    span: range,
) -> list[str]:
    """The label column and the columns ``span`` of ``rows`` (a row under a method's row left
    out where it is empty in every one of them)."""
    pick = [0, *span]
    out = ["| " + " | ".join(header[j] for j in pick) + " |"]
    out.append("|" + "|".join([":---", *("---:" for _ in pick[1:])]) + "|")
    for i, row in enumerate(rows):
        if i in sections:
            out.append(f"| {row[0]} |" + " |" * (len(pick) - 1))
        elif i not in below or any(row[j] for j in pick[1:]):
            out.append(f"| {row[0]} | " + " | ".join(row[j] for j in pick[1:]) + " |")
    return out


def _scale_text(table: Table) -> str:
    # A slice or staged tuning is part of what the table is: every rendering's title says so.
    scale = f"{table.scale} scale" if table.scale in ("smoke", "paper") else table.scale
    text = scale + (f": {table.ran}" if table.ran else "")
    return "; ".join([text, *table.labels])


def _md_cell(v: Value, metric: str, with_paper: bool) -> str:
    if v.status in STATUS_TEXT:
        text = STATUS_TEXT[v.status]
        if v.status in ("missing", "outside") and v.planned:
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
    # The caption, not only a comment, says how the table was built (smoke scale, a slice,
    # staged tuning): it is what survives when the table is pasted into a paper.
    out = [
        f"% prunebench table {table.id} ({_scale_text(table)}); needs booktabs and xcolor",
        macros,
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_tex(table.id)} ({_tex(_scale_text(table))})}}",
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
    out.append(r"\end{table}")
    agree = agreement_lines(table.agreement, table.test_images)
    agree += verdict_lines(table.agreement, table.scale)
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
        name = cols[-1].budget_name.capitalize()
        lines.append(" & ".join([f"{name}:", *(_tex(c.budget) for c in cols)]) + r" \\")
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
        text = {
            "missing": r"\textit{missing}",
            "none": "---",
            "unavailable": "n/a",
            "outside": r"\textit{outside slice}",
        }[v.status]
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
                    diff = (
                        None
                        if v.mean is None or v.paper_mean is None or c.metric not in ACCURACY_LIKE
                        else v.mean - v.paper_mean
                    )
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
