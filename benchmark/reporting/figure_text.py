"""A figure's words, kept off its panels: a short title above them, a caption under them sized to
the figure, and the full text (what ran, what the marks mean, whether it shows the paper's
shape) as a ``.txt`` beside the PNG and in ``prunebench plot``'s output.

The figure functions say what ran (:func:`set_parts`); :func:`finish` then sizes the figure so
that the panels keep their height and the caption gets its own strip below the legend.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.figure import Figure

TITLE_POINTS = 9
CAPTION_POINTS = 8
# Characters of 8-point text per inch of figure width (a conservative average glyph width).
CHARS_PER_INCH = 15
TEXT_COLUMNS = 100  # the .txt and the terminal output
_ATTRIBUTE = "_prunebench_text"
CAPTION_GID = "caption"


@dataclass
class FigureText:
    """The words of one figure.

    ``head``: what ran (the title); ``notes``: what the marks mean and what is missing;
    ``verdict``: whether it shows the paper's shape (the last line is the overall verdict).
    """

    head: list[str]
    notes: list[str] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)

    def caption(self) -> list[str]:
        """The caption under the panels: the notes and the overall verdict, as one paragraph."""
        words = " ".join([*self.notes, *self.verdict[-1:]])
        return [words] if words else []

    def full(self, columns: int = TEXT_COLUMNS) -> str:
        """Every line, wrapped at ``columns`` (continuations indented two spaces)."""
        return "\n".join(wrap([*self.head, *self.notes, *self.verdict], columns)) + "\n"


def wrap(lines: Sequence[str], columns: int) -> list[str]:
    """``lines`` wrapped at ``columns``; a wrapped line continues indented by two spaces."""
    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, columns, subsequent_indent="  ", break_on_hyphens=False) or [""]
    return out


def set_parts(fig: Figure, head: Sequence[str], notes: Sequence[str] = ()) -> None:
    """Record what ``fig`` shows (its title lines and notes); :func:`finish` lays them out."""
    setattr(fig, _ATTRIBUTE, FigureText(list(head), list(notes)))


def text_of(fig: Figure) -> FigureText | None:
    """The words recorded on ``fig`` (None for a figure that records none)."""
    return getattr(fig, _ATTRIBUTE, None)


def figure_text(fig: Figure) -> str:
    """The full text of ``fig`` (empty for a figure that records none)."""
    text = text_of(fig)
    return "" if text is None else text.full()


def add_notes(
    fig: Figure,
    notes: Sequence[str] = (),
    verdict: Sequence[str] = (),
    head: Sequence[str] = (),
) -> None:
    """Append title lines (how it was built: a slice, staged tuning), notes and the verdict
    lines to ``fig``'s words."""
    text = text_of(fig)
    if text is not None:
        text.head += list(head)
        text.notes += list(notes)
        text.verdict += list(verdict)


def finish(fig: Figure) -> None:
    """Lay out ``fig``'s words: its title above the panels, its caption in a strip under them.

    The figure grows by the caption's height, so the panels keep theirs; the caption wraps at
    the figure's width. Nothing is written inside the axes.
    """
    text = text_of(fig)
    if text is None:
        return
    width, height = fig.get_size_inches()
    columns = max(40, int(width * CHARS_PER_INCH))
    fig.suptitle("\n".join(wrap(text.head, columns)), fontsize=TITLE_POINTS)
    caption = textwrap.wrap(" ".join(text.caption()), columns, break_on_hyphens=False)
    if not caption:
        return
    line = CAPTION_POINTS * 1.3 / 72  # inches per caption line
    strip = len(caption) * line + 0.12
    fig.set_size_inches(width, height + strip)
    bottom = strip / (height + strip)
    engine = fig.get_layout_engine()
    if engine is not None:
        # The layout keeps the panels, their legend and the title above the caption's strip.
        # It leaves a legend outside the panels at the figure's edge, though (in the strip): lay
        # out once, keep the positions, and move the legend up into the room made for it.
        engine.set(rect=(0, bottom, 1, 1 - bottom))
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
        for legend in fig.legends:
            legend.set_bbox_to_anchor((0, bottom, 1, 1 - bottom), transform=fig.transFigure)
    fig.text(
        0.5 / width,
        bottom - 0.04 / (height + strip),
        "\n".join(caption),
        ha="left",
        va="top",
        fontsize=CAPTION_POINTS,
        linespacing=1.3,
        gid=CAPTION_GID,
    )


def caption_artist(fig: Figure):  # noqa: ANN201 (a matplotlib Text)
    """The caption's Text artist of ``fig``, or None."""
    return next((t for t in fig.texts if t.get_gid() == CAPTION_GID), None)
