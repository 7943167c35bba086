"""One look per name across the figures: the colour and marker of every method, schedule and
criterion, and the line styles that keep lines of one figure apart where they coincide."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from benchmark.experiments.figure_specs import DENSE_ROW, RENDA_ROW

_PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
]  # fmt: skip
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p"]
# Fixed styles for the names the paper uses, so a method looks the same in every figure.
_NAMES = [
    "BIMP", "GMP", "GSM", "DPF", "DNW", "LC", "STR", "CS", "DST", "IMP",
    "FT", "LRW", "SLR", "CLR", "LLR", "ALLR", "ALLRd1", "ALLRd2", "AccALLR",
    "constant", "stepped", "cosine", "linear",
    "global", "uniform", "uniform+", "erk", "lamp",
]  # fmt: skip
STYLES: dict[str, tuple[str, str]] = {
    name: (_PALETTE[i % len(_PALETTE)], _MARKERS[i % len(_MARKERS)])
    for i, name in enumerate(_NAMES)
}
# Schedules and criteria are compared among themselves, never with the methods: they get the
# high-contrast colours (the palette's tail is too alike for lines drawn side by side).
_CONTRAST = {
    ("FT", "global"): "#7f7f7f",
    ("LRW", "uniform"): "#ff7f0e",
    ("SLR", "uniform+"): "#2ca02c",
    ("CLR", "erk"): "#9467bd",
    ("LLR", "lamp"): "#8c564b",
    ("ALLR",): "#1f77b4",
    ("ALLRd1",): "#17becf",
    ("ALLRd2",): "#bcbd22",
    ("AccALLR",): "#e377c2",
}
STYLES.update(
    {name: (color, STYLES[name][1]) for names, color in _CONTRAST.items() for name in names}
)
STYLES[DENSE_ROW] = ("#000000", "")
STYLES[RENDA_ROW] = ("#d62728", "")
# Line styles cycled over the lines of one figure, so that lines drawn on top of each other (equal
# points in part of a panel) still show the one below: a dashed line lets it through.
DASHES = ["-", "--", "-.", ":"]


def style(label: str) -> tuple[str, str]:
    """(colour, marker) of ``label``; unknown labels get a stable pick from the palette."""
    if label in STYLES:
        return STYLES[label]
    base = label.split(" (")[0]  # "GMP (linear, hard)" shares GMP's marker, not its colour
    h = zlib.crc32(label.encode())
    marker = STYLES[base][1] if base in STYLES else _MARKERS[h % len(_MARKERS)]
    return _PALETTE[h % len(_PALETTE)], marker


def figure_styles(labels: Iterable[str]) -> dict[str, tuple[str, str]]:
    """(colour, marker) per label of one figure: the fixed style for the paper's names, and for
    any other label a palette colour that no other line of the figure uses (when one is left).
    The dict keeps the labels' order, which :func:`_line` turns into line styles."""
    labels = list(dict.fromkeys(labels))
    styles = {label: STYLES[label] for label in labels if label in STYLES}
    used = {color for color, _ in styles.values()}
    free = [c for c in _PALETTE if c not in used] or _PALETTE
    others = [label for label in labels if label not in styles]
    for i, label in enumerate(others):
        styles[label] = (free[i % len(free)], style(label)[1])
    return styles
