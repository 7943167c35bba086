"""Text that fits the width its reader sees: the width of a stream, prose wrapped to it, and
tables that fold to it while each row's label stays with its cells.

The command line sets the width once per process (``--width``, :func:`set_width`); without it
a stream is as wide as ``COLUMNS`` says, else as its terminal, else :data:`DEFAULT_WIDTH` (a
file or a pipe). A table too wide for its width first wraps its header words, then wraps or
moves its prose column (a description) under each row, then puts each row's label on a line of
its own above its cells, and only then splits its columns into several tables that each
repeat the labels.
"""

from __future__ import annotations

import io
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

# Columns of text written to a file or a pipe (no terminal to ask).
DEFAULT_WIDTH = 100

# A prose column narrower than this is moved under its row instead of wrapped in place.
PROSE_MIN = 40

# The indent of what stands under a row: its cells below a stacked label, its prose.
INDENT = "    "

_width: int | None = None  # --width: None when not given; 0: no limit


def set_width(columns: int | None) -> None:
    """Fix the width of everything this process prints (``--width``; 0: no limit, None: ask
    each stream again)."""
    global _width
    _width = columns


def width_given() -> int | None:
    """The width set by :func:`set_width` (``--width``), or None."""
    return _width


def width_of(stream: TextIO | None = None) -> int | None:
    """The columns that text written to ``stream`` (default: stdout) may take; None: no limit.

    ``--width`` decides when given; else the environment's ``COLUMNS``; else the terminal's
    width when ``stream`` is one; else :data:`DEFAULT_WIDTH`.
    """
    if _width is not None:
        return _width or None
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    import sys

    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns or DEFAULT_WIDTH
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass
    return DEFAULT_WIDTH


def wrap(text: str, width: int | None, indent: str = "  ") -> str:
    """Each line of ``text`` wider than ``width`` wrapped at spaces; its continuation lines keep
    the line's own leading spaces plus ``indent`` (a word wider than the line is broken)."""
    if not width:
        return text
    return "\n".join(_wrap_line(line, width, indent) for line in text.split("\n"))


def _wrap_line(line: str, width: int, indent: str) -> str:
    if len(line) <= width or "\r" in line:
        return line
    lead = line[: len(line) - len(line.lstrip(" "))]
    rest = lead + indent if len(lead + indent) < width // 2 else lead
    parts = textwrap.wrap(
        line,
        width,
        initial_indent="",
        subsequent_indent=rest,
        break_on_hyphens=False,
        drop_whitespace=True,
    )
    return "\n".join([lead + parts[0].lstrip(" "), *parts[1:]]) if parts else line


class FittingStream(io.TextIOBase):
    """A text stream that wraps each line written through it to the stream's width (see
    :func:`wrap`); a line still being written when the stream is flushed (a progress bar)
    passes as it is."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        """Write ``text``, wrapping each line it completes."""
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        if lines:
            width = width_of(self._stream)
            self._stream.write("".join(wrap(line, width) + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        """Pass on what is pending (an unfinished line as it is) and flush."""
        if self._pending:
            self._stream.write(self._pending)
            self._pending = ""
        self._stream.flush()

    def writable(self) -> bool:
        """Always: this is an output stream."""
        return True

    def isatty(self) -> bool:
        """Whether the wrapped stream is a terminal."""
        return self._stream.isatty()

    def fileno(self) -> int:
        """The wrapped stream's file descriptor."""
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The wrapped stream's encoding."""
        return getattr(self._stream, "encoding", "utf-8")


@dataclass(frozen=True)
class _Layout:
    columns: list[int]  # the columns shown side by side, in order
    widths: list[int]  # their widths
    stacked: bool  # the label (column 0) on a line of its own above the row's cells
    prose: int | None  # the prose column shown under each row (not side by side), if any


def fit_table(
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    align: str = "",
    header: int = 1,
    rule: bool = False,
    prose: bool = False,
    gap: int = 2,
    margin: str = "",
) -> str:
    """``rows`` (the first ``header`` of them the header) as aligned text columns fitting in
    ``width`` (None: as wide as they are).

    ``align``: one of ``l``/``r`` per column (default left); ``rule``: a line of dashes under
    the header; ``prose``: the last column is free text (a description) that may wrap or go
    under its row; ``margin``: text in front of every line. Column 0 labels the row: it stays
    with the row's cells whatever the fold.
    """
    table = [[str(c) for c in r] for r in rows]
    if not table:
        return ""
    n = len(table[0])
    align = (align or "l" * n).ljust(n, "l")
    room = None if width is None else max(width - len(margin), 1)
    layouts = [_choose(table, header, prose, gap, room)]
    if layouts[0] is None:  # no fold fits: split the columns into several tables
        layouts = _chunks(table, header, prose, gap, room or 0)
    return "\n\n".join(
        _render(table, header, align, rule, gap, margin, layout, room) for layout in layouts
    )


def _natural(rows: list[list[str]], header: int, j: int, wrap: bool) -> int:
    """Column ``j``'s width: its widest cell; with ``wrap``, a header cell (and a label) may
    wrap at its spaces, so only its longest word counts."""

    def need(cell: str, wraps: bool) -> int:
        return max((len(w) for w in cell.split()), default=0) if wraps else len(cell)

    body = [need(r[j], wrap and j == 0) for r in rows[header:]]
    return max([0, *body, *(need(r[j], wrap) for r in rows[:header])])


def _used(widths: list[int], gap: int, stacked: bool) -> int:
    return sum(widths) + gap * max(len(widths) - 1, 0) + (len(INDENT) if stacked else 0)


def _choose(
    rows: list[list[str]], header: int, prose: bool, gap: int, room: int | None
) -> _Layout | None:
    """The least folded layout that fits ``room`` (None: no limit), or None: the label beside
    its cells before above them, prose beside the cells before under them, the header's (and
    the labels') words on one line before wrapped."""
    n = len(rows[0])
    last = n - 1 if prose else n
    for stacked in (False, True):
        shown = list(range(1 if stacked else 0, last))
        for beside in (True, False) if prose else (False,):
            for wrap_head in (False, True):
                widths = [_natural(rows, header, j, wrap_head) for j in shown]
                used = _used(widths, gap, stacked)
                if not beside:
                    if room is None or used <= room:
                        return _Layout(shown, widths, stacked, n - 1 if prose else None)
                    continue
                text = _natural(rows, header, n - 1, wrap_head)
                free = text if room is None else room - used - (gap if shown else 0)
                if min(text, free) >= min(PROSE_MIN, text):
                    return _Layout([*shown, n - 1], [*widths, min(text, free)], stacked, None)
    return None


def _chunks(rows: list[list[str]], header: int, prose: bool, gap: int, room: int) -> list[_Layout]:
    """Consecutive groups of the non-label columns that fit ``room`` below a stacked label (a
    column wider than the room wrapped to it); the prose under the rows of the first."""
    n = len(rows[0])
    avail = max(room - len(INDENT), 8)
    parts: list[tuple[list[int], list[int]]] = [([], [])]
    for j in range(1, n - 1 if prose else n):
        w = min(_natural(rows, header, j, True), avail)
        columns, widths = parts[-1]
        if columns and _used([*widths, w], gap, False) > avail:
            parts.append(([], []))
            columns, widths = parts[-1]
        columns.append(j)
        widths.append(w)
    return [
        _Layout(columns, widths, True, n - 1 if prose and i == 0 else None)
        for i, (columns, widths) in enumerate(parts)
    ]


def _render(
    rows: list[list[str]],
    header: int,
    align: str,
    rule: bool,
    gap: int,
    margin: str,
    layout: _Layout,
    room: int | None,
) -> str:
    lines: list[str] = []
    lead = margin + (INDENT if layout.stacked else "")
    # Prose under a row takes the room right of its indent.
    below = max((room or 0) - len(lead) + len(margin) - len(INDENT), 8)
    for i, row in enumerate(rows):
        if layout.stacked and row[0]:
            lines.append(margin + row[0])
        cells = [row[j] for j in layout.columns]
        aligns = [align[j] for j in layout.columns]
        if cells:
            lines += _grid_row(cells, layout.widths, aligns, gap, lead, i < header)
        if layout.prose is not None and row[layout.prose]:
            text = textwrap.wrap(row[layout.prose], below, break_on_hyphens=False)
            lines += [lead + INDENT + part for part in text]
        if rule and i == header - 1:
            lines.append(lead + (" " * gap).join("-" * w for w in layout.widths))
    return "\n".join(line.rstrip() for line in lines)


def _grid_row(
    cells: list[str], widths: list[int], aligns: list[str], gap: int, lead: str, head: bool
) -> list[str]:
    """One row's lines: each cell wrapped to its column (a header cell at its words)."""
    wrapped = [
        (textwrap.wrap(c, w, break_on_hyphens=False) or [""]) if len(c) > w else [c]
        for c, w in zip(cells, widths, strict=True)
    ]
    height = max(len(p) for p in wrapped)
    out = []
    for k in range(height):
        parts = []
        for part, w, a in zip(wrapped, widths, aligns, strict=True):
            # A wrapped header sits on its last lines, next to the cells it names.
            at = k - (height - len(part)) if head else k
            text = part[at] if 0 <= at < len(part) else ""
            parts.append(text.rjust(w) if a == "r" else text.ljust(w))
        out.append(lead + (" " * gap).join(parts))
    return out


def pipe_chunks(rows: Sequence[Sequence[str]], width: int | None, keep: int = 1) -> list[range]:
    """The columns of Markdown pipe table ``rows`` (header first) split into consecutive ranges
    (indexes after the ``keep`` label columns) whose tables, each repeating the labels, fit in
    ``width`` characters (at least one column each); one range without a width."""
    n = len(rows[0]) if rows else 0
    if not width or n <= keep:
        return [range(keep, n)]
    widths = [max(len(r[j]) for r in rows) + 3 for j in range(n)]  # "| x " per cell
    labels = sum(widths[:keep]) + 1
    chunks, start, used = [], keep, labels
    for j in range(keep, n):
        if j > start and used + widths[j] > width:
            chunks.append(range(start, j))
            start, used = j, labels
        used += widths[j]
    chunks.append(range(start, n))
    return chunks


def pipe_table(
    rows: Sequence[Sequence[str]], align: str, width: int | None, keep: int = 1
) -> list[str]:
    """Markdown pipe tables of ``rows`` (header first; ``align``: ``l``/``r`` per column) that
    fit in ``width``: columns beyond it go to further tables that repeat the ``keep`` label
    columns, each under a line naming its columns."""
    chunks = pipe_chunks(rows, width, keep)
    out: list[str] = []
    n = len(rows[0]) - keep if rows else 0
    for part in chunks:
        pick = [*range(keep), *part]
        if len(chunks) > 1:
            out += [f"*columns {part.start - keep + 1}-{part.stop - keep} of {n}*", ""]
        rule = ["---:" if align[j] == "r" else ":---" for j in pick]
        out += ["| " + " | ".join(rows[0][j] for j in pick) + " |", "|" + "|".join(rule) + "|"]
        out += ["| " + " | ".join(r[j] for j in pick) + " |" for r in rows[1:]]
        if len(chunks) > 1:
            out.append("")
    return out
