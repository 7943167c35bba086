"""The paper's reported numbers as data.

``benchmark/experiments/paper/*.csv`` (package data, so a wheel install has them too) holds
every numeric table of Zimmer et al., "How I Learned to Stop Worrying and Love Retraining"
(ICLR 2023), one file per table (schema in ``benchmark/experiments/paper/README.md``).
This module loads those files and contains the small LaTeX table parser that produced them
and that the tests use to check them against the paper's source, cell by cell.

Regenerate the CSVs (overwriting them) with::

    python -m benchmark.experiments.paper_numbers path/to/paper.tex [out_dir]
"""

from __future__ import annotations

import csv
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark.core.errors import ConfigError, DatasetError

# Columns of the long-format CSVs (one row per table cell).
LONG_COLUMNS: tuple[str, ...] = (
    "table",
    "section",
    "row",
    "sparsity",
    "budget",
    "metric",
    "mean",
    "std",
    "highlight",
    "note",
    "block",
    "col",
)
# Columns of the two tables that are not "a number per cell" and are stored wide instead.
METHODS_COLUMNS: tuple[str, ...] = (
    "method",
    "sparsity_specifiable",
    "pruning_stable",
    "sparsity_agnostic_training",
    "additional_hyperparameters",
    "overhead_during_training",
)
CONFIG_COLUMNS: tuple[str, ...] = (
    "dataset",
    "network",
    "n_weights",
    "epochs",
    "batch_size",
    "momentum",
    "lr_schedule",
    "metric",
    "unpruned_mean",
    "unpruned_std",
)
WIDE_TABLES: dict[str, tuple[str, ...]] = {
    "methods": METHODS_COLUMNS,
    "problem_config": CONFIG_COLUMNS,
}
MISSING_NOTE = "missing (printed as ---)"

# Five appendix tables carry no \label; they get a synthetic label derived from the caption
# prefix, following the naming pattern of their labelled siblings.
UNLABELLED_TABLES: dict[str, str] = {
    "DeepLabV3 on COCO (Iterative)": "tab:appendix-schedule-comparison-coco-deeplab-iterative",
    "PSPNet on CityScapes (Iterative)": (
        "tab:appendix-schedule-comparison-cityscapes-pspnet-iterative"
    ),
    "ResNet-50 on ImageNet (One Shot, Filter Pruning)": (
        "tab:appendix-schedule-comparison-imagenet-filter"
    ),
    "MaxViT on ImageNet (One Shot, Filter Pruning)": (
        "tab:appendix-schedule-comparison-imagenet-maxvit-filter"
    ),
    "MaxViT on ImageNet (Iterative, Filter Pruning)": (
        "tab:appendix-schedule-comparison-imagenet-iterative-maxvit-filter"
    ),
}

# Column headers of the comparison tables -> metric key.
_METRIC_KEYS: dict[str, str] = {
    "# img/s": "img_per_s",
    "Accuracy": "accuracy",
    "Speedup": "speedup",
    "Sparsity": "sparsity",
}
# Row groups inside one sparsity block of the schedule tables, separated by \midrule.
_SCHEDULE_GROUPS: tuple[str, ...] = ("translation", "tuned")
_HIGHLIGHT_RE = re.compile(r"\\(?:appendix)?(first|second|third)\s*\{")
_VALUE_RE = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*±\s*(\d+(?:\.\d+)?))?$")
_RULE_RE = re.compile(
    r"^\s*(?:\\(?:toprule|midrule|bottomrule|hline)\b|\\cmidrule(?:\([^)]*\))?\{[^}]*\})"
)
_MISSING_TEXTS = frozenset({"---", "--", "—"})
# Commands rendered as text by latex_to_text (all other commands are dropped).
_COMMAND_TEXT: dict[str, str] = {
    "textpm": " ± ",
    "times": "x",
    "cmark": "✓",
    "xmark": "✗",
    "Ou": "O",
    "log": " log ",
    "min": "min",
    "cdot": " * ",
    "in": " in ",
}


# Next to this module, whatever the working folder and whether installed editable or from a
# wheel: the one copy of the paper's numbers.
PAPER_DIR: Path = Path(__file__).resolve().with_name("paper")


class PaperNumbersMissing(DatasetError):
    """The paper's published numbers (package data) are not where the package expects them."""


# --------------------------------------------------------------------------- loading


def list_paper_tables() -> list[str]:
    """Return the ids of all transcribed paper tables (CSV file stems), sorted.

    Raises PaperNumbersMissing when the package data holds none (a broken install).
    """
    tables = sorted(p.stem for p in PAPER_DIR.glob("*.csv"))
    if not tables:
        raise PaperNumbersMissing(
            f"the paper's published numbers are missing: no *.csv in {PAPER_DIR} "
            "(package data of prunebench; reinstall it, or restore benchmark/experiments/paper/)"
        )
    return tables


def _is_text_column(column: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column))


def table_id_from_label(label: str) -> str:
    """Map a LaTeX label (``tab:x`` or ``table:x``) to its table id ``x``."""
    return re.sub(r"^(?:tab|table):", "", label)


def load_paper_table(table_id: str) -> pd.DataFrame:
    """Load one transcribed table; ``table_id`` is the CSV stem (a LaTeX label also works).

    Long tables get float ``sparsity``/``mean``/``std``, int ``block``/``col`` and empty
    strings (not NaN) in the text columns.  Raises a ConfigError (a ValueError) listing the
    known ids for an unknown table.
    """
    known = list_paper_tables()
    table_id = table_id_from_label(table_id)
    if table_id not in known:
        raise ConfigError("table_id", table_id, known)
    # Only truly empty fields are missing: "N/A" in tab:methods is text, not NaN.
    frame = pd.read_csv(PAPER_DIR / f"{table_id}.csv", keep_default_na=False, na_values=[""])
    if table_id in WIDE_TABLES:
        text_columns = [c for c in frame.columns if _is_text_column(frame[c])]
    else:
        text_columns = ["section", "row", "budget", "metric", "highlight", "note"]
    for column in text_columns:
        # An all-empty column (e.g. "note") is read as float NaN; cast before filling.
        values = frame[column].astype(object)
        frame[column] = values.where(values.notna(), "").astype(str)
    return frame


# --------------------------------------------------------------------------- LaTeX scanning


@dataclass(frozen=True)
class LatexTable:
    """One ``table`` float of the paper: its (possibly synthetic) label, caption and body."""

    label: str
    caption: str
    body: str  # the tabular body, comments removed, without the column spec

    @property
    def table_id(self) -> str:
        """The CSV stem for this table."""
        return table_id_from_label(self.label)


@dataclass(frozen=True)
class ParsedCell:
    """One data cell of a LaTeX table, located by (block, row, col)."""

    row: str  # normalised row key (method / schedule / dataset), e.g. "LLR"
    row_index: int  # 0-based index of the data row in the table
    block: int  # index of the header block (multicolumn sparsity header) in the tabular
    col: int  # 0-based position in the LaTeX row; 0 is the row label
    section: str
    sparsity: str  # goal sparsity as printed ("90", "99.5") or ""
    budget: str  # budget column as printed ("2.5%", "2x2.5%") or ""
    metric: str
    mean: float | None
    std: float | None
    mean_text: str  # the printed digits, to keep the paper's precision in the CSV
    std_text: str
    highlight: str  # first / second / third / ""
    note: str
    text: str  # the cell as plain text
    raw: str  # the cell's LaTeX source


def _matching_brace(text: str, open_index: int) -> int:
    """Return the index of the brace closing the one at ``open_index``."""
    depth = 0
    i = open_index
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped brace does not count
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(f"unbalanced braces after position {open_index}")


def _braced_argument(text: str, command: str) -> str | None:
    """Return the first ``{...}`` argument of ``command`` in ``text`` (None if absent)."""
    start = text.find(command + "{")
    if start < 0:
        return None
    open_index = start + len(command)
    return text[open_index + 1 : _matching_brace(text, open_index)]


def _strip_comments(text: str) -> str:
    """Drop LaTeX comments (an unescaped % to the end of the line)."""
    return "\n".join(re.sub(r"(?<!\\)%.*", "", line) for line in text.splitlines())


def split_top_level(text: str, separator: str) -> list[str]:
    """Split on ``&`` or ``\\\\`` outside braces and nested environments (cases, ...)."""
    if separator not in ("&", "\\\\"):
        raise ValueError(f"separator must be '&' or a LaTeX line break, not {separator!r}")
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            top = depth == 0
            if text.startswith("\\begin", i):
                depth += 1
            elif text.startswith("\\end", i):
                depth -= 1
            elif text.startswith("\\\\", i) and separator == "\\\\" and top:
                parts.append(text[start:i])
                start = i + 2
            i += 2  # skips \\, \&, \{, \} and the first letter of a command
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "&" and separator == "&" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def latex_to_text(latex: str) -> str:
    """Render a cell's LaTeX as plain text: markup dropped, \\textpm -> ±, \\times -> x."""
    text = latex.replace("\\\\", " ; ")
    for old, new in (("\\%", "%"), ("\\#", "#"), ("\\&", "&"), ("~", " ")):
        text = text.replace(old, new)
    for command, new in _COMMAND_TEXT.items():
        # (?![a-zA-Z]) so that \in does not eat the start of \include and the like.
        text = re.sub(rf"\\{command}(?![a-zA-Z])", new, text)
    text = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", text)
    text = re.sub(r"\\multicolumn\{\d+\}\{[^}]*\}", "", text)
    # Any other command (\textbf, \small, \appendixfirst, \makecell[l], ...) keeps only its
    # argument, which survives once the braces are removed.
    text = re.sub(r"\\[a-zA-Z]+\*?(?:\[[^\]]*\])?", " ", text)
    text = re.sub(r"[{}$]", "", text)
    return re.sub(r"\s+", " ", text).strip()


def normalise_row_key(label_latex: str) -> str:
    """Row key of a table row: plain text with the "(ours)" marker removed."""
    return re.sub(r"\s*\(ours\)$", "", latex_to_text(label_latex))


def _slug(text: str) -> str:
    """Lower-case, underscore-separated identifier of a column header."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def _label_for(block: str, caption: str) -> str:
    """The table's \\label, or a synthetic one derived from its caption prefix."""
    match = re.search(r"\\label\{((?:tab|table):[^}]*)\}", block)
    if match:
        return match.group(1)
    prefix = latex_to_text(caption).split(":")[0].strip()
    return UNLABELLED_TABLES.get(prefix, f"tab:unlabelled-{_slug(prefix).replace('_', '-')}")


def extract_tables(tex: str) -> list[LatexTable]:
    """Return every ``table`` float that contains a ``tabular``, in document order."""
    tables: list[LatexTable] = []
    for match in re.finditer(r"\\begin\{table\}(.*?)\\end\{table\}", tex, re.S):
        block = _strip_comments(match.group(1))
        start = block.find("\\begin{tabular}")
        if start < 0:
            continue
        spec_open = start + len("\\begin{tabular}")
        body_start = _matching_brace(block, spec_open) + 1
        body = block[body_start : block.index("\\end{tabular}", body_start)]
        caption = _braced_argument(block, "\\caption") or ""
        tables.append(LatexTable(_label_for(block, caption), caption, body))
    return tables


# --------------------------------------------------------------------------- cell parsing


@dataclass(frozen=True)
class _Value:
    """A parsed value cell."""

    mean: float | None
    std: float | None
    mean_text: str
    std_text: str
    highlight: str
    note: str
    text: str


def parse_value_cell(raw: str) -> _Value | None:
    """Parse ``mean ± std`` (any markup), ``---``, a plain number or a check mark; else None."""
    text = latex_to_text(raw)
    match = _HIGHLIGHT_RE.search(raw)
    highlight = match.group(1) if match else ""
    if text in _MISSING_TEXTS:
        return _Value(None, None, "", "", highlight, MISSING_NOTE, text)
    if text in ("✓", "✗"):
        flag = "1" if text == "✓" else "0"
        return _Value(float(flag), None, flag, "", highlight, "", text)
    value = _VALUE_RE.match(text)
    if value is None:
        return None
    mean_text, std_text = value.group(1), value.group(2) or ""
    std = float(std_text) if std_text else None
    return _Value(float(mean_text), std, mean_text, std_text, highlight, "", text)


def _strip_rules(segment: str) -> tuple[bool, str]:
    """Remove leading \\midrule-like commands; report whether there were any."""
    had_rule = False
    while True:
        match = _RULE_RE.match(segment)
        if match is None:
            return had_rule, segment.strip()
        had_rule = True
        segment = segment[match.end() :]


def _default_metric(caption: str) -> str:
    """The metric of a table without metric headers, from its caption."""
    if re.search(r"mIoU|COCO|CityScapes", caption):
        return "iou"
    if re.search(r"BLEU|WMT", caption):
        return "bleu"
    return "accuracy"


def _multicolumn_sparsities(cells: list[str]) -> dict[int, str]:
    """Column position -> goal sparsity for a ``\\multicolumn`` header row."""
    result: dict[int, str] = {}
    position = 0
    for cell in cells:
        match = re.match(r"\s*\\multicolumn\{(\d+)\}", cell)
        span = int(match.group(1)) if match else 1
        sparsity = re.search(r"sparsity\s+(\d+(?:\.\d+)?)\s*%", latex_to_text(cell))
        for offset in range(span):
            if sparsity:
                result[position + offset] = sparsity.group(1)
        position += span
    return result


class _TableState:
    """What the rows seen so far say about the columns of the next data row."""

    def __init__(self, caption: str) -> None:
        self.default_metric = _default_metric(caption)
        self.block = -1
        self.title = ""
        self.sparsity: dict[int, str] = {}
        self.headers: dict[int, str] = {}
        self.header_kind = ""
        self.group = 0
        self.seen_data = False

    def new_block(self, cells: list[str]) -> None:
        """Start a block at a ``Model sparsity`` multicolumn header row."""
        self.block += 1
        self.sparsity = _multicolumn_sparsities(cells)
        self.headers = {}
        self.header_kind = ""
        self.group = 0
        self.seen_data = False

    def set_headers(self, cells: list[str], kind: str) -> None:
        """Record a ``Budget:`` (kind "budget") or metric-name (kind "metric") header row."""
        self.headers = {i: latex_to_text(c) for i, c in enumerate(cells) if i > 0}
        self.header_kind = kind

    def section(self) -> str:
        """The section name of the current row group."""
        # A bold title row ("CIFAR-10") names the section; otherwise schedule tables split
        # each sparsity block into translation schemes (above) and tuned schedules (below).
        if self.title:
            return self.title
        if self.header_kind == "budget":
            names = _SCHEDULE_GROUPS
            return names[self.group] if self.group < len(names) else f"group{self.group}"
        return "comparison" if self.group == 0 else f"group{self.group}"

    def column(self, col: int) -> tuple[str, str]:
        """(budget, metric) of a column."""
        header = self.headers.get(col, "")
        if self.header_kind == "budget":
            return header, self.default_metric
        if self.header_kind == "metric" and header:
            return "", _METRIC_KEYS.get(header, _slug(header))
        return "", self.default_metric


def _classify(cells: list[str]) -> str:
    """One of: group_header, budget, title, data, column_header."""
    if any("\\multicolumn" in cell for cell in cells):
        return "group_header"
    if latex_to_text(cells[0]).startswith("Budget"):
        return "budget"
    if len(cells) == 1:
        return "title"
    if any(parse_value_cell(cell) is not None for cell in cells[1:]):
        return "data"
    return "column_header"


def _data_cells(cells: list[str], row_index: int, state: _TableState) -> list[ParsedCell]:
    """Turn one data row into ParsedCells."""
    row = normalise_row_key(cells[0])
    parsed: list[ParsedCell] = []
    for col, raw in enumerate(cells[1:], start=1):
        value = parse_value_cell(raw)
        text = latex_to_text(raw)
        if value is None:  # free text (lr schedules, overheads): kept as text only
            value = _Value(None, None, "", "", "", "", text)
        budget, metric = state.column(col)
        parsed.append(
            ParsedCell(
                row=row,
                row_index=row_index,
                block=max(state.block, 0),
                col=col,
                section=state.section(),
                sparsity=state.sparsity.get(col, ""),
                budget=budget,
                metric=metric,
                mean=value.mean,
                std=value.std,
                mean_text=value.mean_text,
                std_text=value.std_text,
                highlight=value.highlight,
                note=value.note,
                text=text,
                raw=raw.strip(),
            )
        )
    return parsed


def parse_table_cells(table: LatexTable) -> list[ParsedCell]:
    """Parse the data cells of one table, row by row."""
    state = _TableState(table.caption)
    cells_out: list[ParsedCell] = []
    pending_rule = False
    row_index = 0
    for segment in split_top_level(table.body, "\\\\"):
        had_rule, content = _strip_rules(segment)
        pending_rule = pending_rule or had_rule
        cells = split_top_level(content, "&")
        if not any(cell.strip() for cell in cells):
            continue  # rule-only or spacing row: the rule still counts for the next row
        kind = _classify(cells)
        if kind == "group_header":
            state.new_block(cells)
        elif kind == "budget":
            state.set_headers(cells, "budget")
        elif kind == "column_header":
            state.set_headers(cells, "metric")
        elif kind == "title":
            state.title = latex_to_text(cells[0])
        else:
            if state.seen_data and pending_rule:
                state.group += 1
            state.seen_data = True
            cells_out.extend(_data_cells(cells, row_index, state))
            row_index += 1
        pending_rule = False
    return cells_out


def parse_latex_tables(tex: str) -> dict[str, list[ParsedCell]]:
    """Parse every numeric table of the paper: LaTeX label -> its data cells.

    Unlabelled tables get the synthetic labels of :data:`UNLABELLED_TABLES`; use
    :func:`table_id_from_label` to get the CSV stem.
    """
    result: dict[str, list[ParsedCell]] = {}
    for table in extract_tables(tex):
        cells = parse_table_cells(table)
        if any(cell.mean is not None or cell.note for cell in cells):
            result[table.label] = cells
    return result


def table_captions(tex: str) -> dict[str, str]:
    """Table id -> plain-text caption, for documentation."""
    return {t.table_id: latex_to_text(t.caption) for t in extract_tables(tex)}


# --------------------------------------------------------------------------- expected frames


def _long_frame(table_id: str, cells: Iterable[ParsedCell]) -> pd.DataFrame:
    """The long-format frame (as strings, the way the CSV stores it) for a table's cells."""
    rows = [
        {
            "table": table_id,
            "section": c.section,
            "row": c.row,
            "sparsity": c.sparsity,
            "budget": c.budget,
            "metric": c.metric,
            "mean": c.mean_text,
            "std": c.std_text,
            "highlight": c.highlight,
            "note": c.note,
            "block": str(c.block),
            "col": str(c.col),
        }
        for c in cells
    ]
    return pd.DataFrame(rows, columns=list(LONG_COLUMNS))


def _methods_frame(cells: Iterable[ParsedCell]) -> pd.DataFrame:
    """tab:methods as one row per method with boolean check-mark columns."""
    by_row: dict[str, dict[str, str]] = {}
    for cell in cells:
        record = by_row.setdefault(cell.row, {"method": cell.row})
        column = METHODS_COLUMNS[cell.col]
        if cell.text in ("✓", "✗"):
            record[column] = str(cell.text == "✓")
        else:
            record[column] = cell.text
    return pd.DataFrame(list(by_row.values()), columns=list(METHODS_COLUMNS))


def _makecell_lines(raw: str) -> list[str]:
    """The lines of a ``\\makecell`` cell (one line for a plain cell)."""
    inner = _braced_argument(raw, "\\makecell[l]")
    if inner is None:
        return [raw]
    return [line for line in inner.split("\\\\") if line.strip()]


def lr_schedule_text(raw: str) -> str:
    """Render a ``\\begin{cases}`` learning-rate schedule as "0.1 for t in [1, 90]; ..."."""
    inner = raw.split("\\begin{cases}", 1)[-1].split("\\end{cases}", 1)[0]
    pieces = []
    for case in split_top_level(inner, "\\\\"):
        if not case.strip():
            continue
        value, condition = (latex_to_text(p) for p in split_top_level(case, "&"))
        pieces.append(f"{value} for {condition.rstrip(',').strip()}")
    return "; ".join(pieces)


def _unpruned(line: str) -> tuple[str, str, str]:
    """(metric, mean, std) of an "Unpruned test accuracy/IoU/BLEU" entry."""
    text = latex_to_text(line)
    match = re.match(r"^(\d+(?:\.\d+)?)\s*(%|IoU|BLEU)\s*±\s*(\d+(?:\.\d+)?)\s*%?$", text)
    if match is None:
        raise ValueError(f"cannot parse unpruned performance {text!r}")
    metric = {"%": "accuracy", "IoU": "iou", "BLEU": "bleu"}[match.group(2)]
    return metric, match.group(1), match.group(3)


def _config_frame(cells: Iterable[ParsedCell]) -> pd.DataFrame:
    """tab:problem_config as one row per (dataset, network); makecell rows are expanded."""
    # Keyed by row index: ImageNet appears in two rows (ResNet-50 and MaxViT).
    by_row: dict[int, dict[int, str]] = {}
    datasets: dict[int, str] = {}
    for cell in cells:
        by_row.setdefault(cell.row_index, {})[cell.col] = cell.raw
        datasets[cell.row_index] = cell.row
    records = []
    for row_index, raw in by_row.items():
        dataset = datasets[row_index]
        networks = _makecell_lines(raw[1])
        unpruned = _makecell_lines(raw[6])
        for network_raw, unpruned_raw in zip(networks, unpruned, strict=True):
            network = re.match(r"^(.*?)\s*\(([^)]*)\)$", latex_to_text(network_raw))
            if network is None:
                raise ValueError(f"cannot parse network {network_raw!r}")
            metric, mean, std = _unpruned(unpruned_raw)
            records.append(
                {
                    "dataset": dataset,
                    "network": network.group(1),
                    "n_weights": network.group(2),
                    "epochs": latex_to_text(raw[2]),
                    "batch_size": latex_to_text(raw[3]),
                    "momentum": latex_to_text(raw[4]),
                    "lr_schedule": lr_schedule_text(raw[5]),
                    "metric": metric,
                    "unpruned_mean": mean,
                    "unpruned_std": std,
                }
            )
    return pd.DataFrame(records, columns=list(CONFIG_COLUMNS))


def expected_frame(table_id: str, cells: list[ParsedCell]) -> pd.DataFrame:
    """The CSV content (all strings) that the parsed cells of ``table_id`` imply."""
    if table_id == "methods":
        return _methods_frame(cells)
    if table_id == "problem_config":
        return _config_frame(cells)
    return _long_frame(table_id, cells)


# --------------------------------------------------------------------------- checking


def _as_text(value: object) -> str:
    """Normalise a CSV/DataFrame entry for comparison: NaN -> "", "90.00" and 90.0 -> "90"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    text = str(value)
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    # 12 significant digits absorb float-parsing noise; the paper prints at most 5.
    return format(number, ".12g")


def _key_columns(table_id: str) -> list[str]:
    if table_id == "methods":
        return ["method"]
    if table_id == "problem_config":
        return ["dataset", "network"]
    return ["block", "row", "col"]


def compare_table(table_id: str, actual: pd.DataFrame, expected: pd.DataFrame) -> list[str]:
    """Return human-readable differences between a transcribed table and the LaTeX parse.

    Cells are matched by position (block, row key, column; or the row key of the wide
    tables) and every other column is compared by value ("90.00" equals 90.0).
    """
    problems: list[str] = []
    columns = list(expected.columns)
    if list(actual.columns) != columns:
        return [f"{table_id}: columns {list(actual.columns)} != {columns}"]
    keys = _key_columns(table_id)

    def index(frame: pd.DataFrame, name: str) -> dict[tuple[str, ...], dict[str, str]]:
        result: dict[tuple[str, ...], dict[str, str]] = {}
        for record in frame.to_dict("records"):
            key = tuple(_as_text(record[k]) for k in keys)
            if key in result:
                problems.append(f"{table_id}: duplicate cell {key} in {name}")
            result[key] = {c: _as_text(record[c]) for c in columns}
        return result

    got, want = index(actual, "csv"), index(expected, "latex")
    for key in sorted(want.keys() - got.keys()):
        problems.append(f"{table_id}: cell {dict(zip(keys, key, strict=True))} missing from csv")
    for key in sorted(got.keys() - want.keys()):
        problems.append(f"{table_id}: cell {dict(zip(keys, key, strict=True))} not in latex")
    for key in sorted(got.keys() & want.keys()):
        for column in columns:
            if got[key][column] != want[key][column]:
                where = dict(zip(keys, key, strict=True))
                problems.append(
                    f"{table_id}: cell {where} {column}: "
                    f"csv={got[key][column]!r} latex={want[key][column]!r}"
                )
    return problems


# --------------------------------------------------------------------------- writing


def write_paper_csvs(tex: str, out_dir: Path) -> list[Path]:
    """Write one CSV per parsed table into ``out_dir`` (overwrites); return the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for label, cells in parse_latex_tables(tex).items():
        table_id = table_id_from_label(label)
        frame = expected_frame(table_id, cells)
        path = out_dir / f"{table_id}.csv"
        frame.to_csv(path, index=False, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m benchmark.experiments.paper_numbers paper.tex [out_dir]``."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(main.__doc__, file=sys.stderr)
        return 2
    out_dir = Path(args[1]) if len(args) > 1 else PAPER_DIR
    paths = write_paper_csvs(Path(args[0]).read_text(encoding="utf-8"), out_dir)
    print(f"wrote {len(paths)} tables to {out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
