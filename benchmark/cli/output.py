"""Where a command's text goes: a table rendered in a format, written to stdout or a file, and the
warning under smoke-scale numbers set against published ones."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any


def render_table(
    table: Any, fmt: str, store: str, preamble: bool = False, width: int | None = None
) -> str:
    """A built table as Markdown, LaTeX or CSV text (Markdown split to ``width`` columns)."""
    from benchmark.reporting.render import render_csv, render_latex, render_markdown

    if fmt == "latex":
        return render_latex(table, store, preamble=preamble)
    if fmt == "csv":
        return render_csv(table)
    return render_markdown(table, store, width)


def table_width(asked: int | None, out: str | None) -> int | None:
    """The width a Markdown table is split to: ``--width`` (0: never split), else the
    terminal's when the table goes to one, else none."""
    if asked is not None:
        return asked or None
    if out is None and sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def emit(text: str, out: str | None) -> None:
    """``text`` to stdout, or to the file ``out`` (its folder made), saying so."""
    if out is None:
        sys.stdout.write(text)
        return
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    print(f"wrote {out}")


SMOKE_VS_PAPER = (
    "smoke-scale numbers (embedded data, a small model, a short budget) set against the "
    "published ones: the differences measure the scale, not the methods; use --scale paper runs "
    "for a comparison"
)


def warn_smoke_vs_paper(table: Any, scale: str, paper: bool) -> None:
    """``--paper`` on smoke-scale runs: say so on stderr and under the table."""
    if paper and scale == "smoke":
        print(f"prunebench: warning: {SMOKE_VS_PAPER}", file=sys.stderr)
        table.notes.append(SMOKE_VS_PAPER)
