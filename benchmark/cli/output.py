"""Where a command's text goes: a table rendered in a format, written to stdout or a file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def render_table(table: Any, fmt: str, store: str, preamble: bool = False) -> str:
    """A built table as Markdown, LaTeX or CSV text."""
    from benchmark.reporting.render import render_csv, render_latex, render_markdown

    if fmt == "latex":
        return render_latex(table, store, preamble=preamble)
    if fmt == "csv":
        return render_csv(table)
    return render_markdown(table, store)


def emit(text: str, out: str | None) -> None:
    """``text`` to stdout, or to the file ``out`` (its folder made), saying so."""
    if out is None:
        sys.stdout.write(text)
        return
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    print(f"wrote {out}")
