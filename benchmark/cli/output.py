"""Where a command's text goes: a table rendered in a format, written to stdout or a file, and the
warning under smoke-scale numbers set against published ones."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
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


def table_width(out: str | None) -> int | None:
    """The width a Markdown table fits: stdout's (``--width``, else the terminal's, else 100
    columns); a table written to a file (``--out``) only with ``--width``."""
    from benchmark.core import textwidth

    if out is not None and textwidth.width_given() is None:
        return None
    return textwidth.width_of(sys.stdout)


def machine_readable(args: Any) -> bool:
    """Whether the command prints data for a program (JSON, CSV, LaTeX, TOML, the README's
    Markdown table): its stdout is never wrapped."""
    fmt = getattr(args, "format", None)
    asked = any(getattr(args, flag, False) for flag in ("json", "print_config", "markdown"))
    return asked or fmt in ("csv", "latex", "json") or args.command in ("schedule", "export")


@contextlib.contextmanager
def fitted_streams(args: Any) -> Iterator[None]:
    """stdout (unless it carries data: :func:`machine_readable`) and stderr wrapped to their
    widths while a command runs (``benchmark.core.textwidth``)."""
    from benchmark.core import textwidth

    textwidth.set_width(getattr(args, "width", None))
    saved = sys.stdout, sys.stderr
    try:
        if not machine_readable(args):
            sys.stdout = textwidth.FittingStream(sys.stdout)
        sys.stderr = textwidth.FittingStream(sys.stderr)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, textwidth.FittingStream):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
        sys.stdout, sys.stderr = saved
        textwidth.set_width(None)


def width_arg(text: str) -> int:
    """An argparse type: a width in columns, 0 for no limit."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is invalid; allowed: an integer >= 0")
    return int(text)


def add_width(parser: argparse.ArgumentParser) -> None:
    """``--width N`` on the program and on every sub-command (before or after its name)."""
    for p in [parser, *_subparsers(parser)]:
        p.add_argument(
            "--width",
            type=width_arg,
            default=None if p is parser else argparse.SUPPRESS,
            metavar="N",
            help="fit the output to N columns (0: no limit; default: the terminal's width, "
            "100 when not printing to a terminal)",
        )


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every sub-command parser below ``parser`` (``grid show`` too)."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += [sub, *_subparsers(sub)]
    return found


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


def warn_smoke_vs_paper(table: Any, scale: str, paper: bool, experiment: Any = None) -> None:
    """``--paper`` on smoke-scale runs, or on runs whose settings differ from those of the
    published numbers (an experiment's ``paper_differences``): say so on stderr and under the
    table."""
    if paper and scale == "smoke":
        print(f"prunebench: warning: {SMOKE_VS_PAPER}", file=sys.stderr)
        table.notes.append(SMOKE_VS_PAPER)
    differences = getattr(experiment, "paper_differences", None)
    for line in differences(scale) if paper and differences else ():
        note = f"settings unlike the published numbers' (see --paper): {line}"
        print(f"prunebench: warning: {note}", file=sys.stderr)
        table.notes.append(note)
