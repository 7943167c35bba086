"""Figures of learning-rate schedules, among them the paper's Figure 1 (FT, LRW, SLR, CLR, LLR, ALLR
after a stepped original schedule).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchmark.config.run import ScheduleConfig
from benchmark.core.errors import ConfigError
from benchmark.schedules.original import original_lrs
from benchmark.schedules.retraining import (
    allr_d2,
    retrain_lrs,
)

if TYPE_CHECKING:  # matplotlib is imported lazily so that the CLI starts fast
    from matplotlib.figure import Figure


PLOT_SUFFIXES = (".png", ".pdf")


FIGURE1_KINDS = ("FT", "LRW", "SLR", "CLR", "LLR", "ALLR")


Curve = tuple[str, np.ndarray]


def check_plot_path(path: Path) -> None:
    """Raise a ConfigError unless ``path`` ends in a supported image suffix."""
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise ConfigError("--plot", str(path), PLOT_SUFFIXES)


def plot_schedules(curves: Sequence[Curve], iters_per_epoch: int, *, xlabel: str) -> Figure:
    """Draw one line per (label, lrs) pair against epochs on a new Agg-backed figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # A bare Figure with an Agg canvas avoids pyplot's global state (and any GUI backend).
    fig = Figure(figsize=(5.0, 3.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for label, lrs in curves:
        ax.plot(np.arange(len(lrs)) / iters_per_epoch, lrs, label=label, linewidth=1.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("learning rate")
    ax.legend()
    ax.grid(True, alpha=0.3)
    return fig


def save_figure(fig: Figure, path: str | Path) -> None:
    """Save ``fig`` as PNG or PDF, chosen by the suffix of ``path``."""
    path = Path(path)
    check_plot_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format=path.suffix.lower().lstrip("."), dpi=150)


def figure1_original() -> ScheduleConfig:
    """The paper's Figure 1 original schedule: 0.1, then 0.01 from epoch 90, 0.001 from 180."""
    return ScheduleConfig(name="stepped", lr=0.1, milestones=[90, 180], values=[0.01, 0.001])


def plot_retraining_schedules(
    path: str | Path | None,
    original_epochs: int = 200,
    retrain_epochs: int = 60,
    iters_per_epoch: int = 10,
    scale: float | None = None,
) -> Figure:
    """Draw the paper's Figure 1 (FT, LRW, SLR, CLR, LLR, ALLR); save it if ``path`` is given.

    ``scale`` is ALLR's discount d; by default d = d2 = retrain_epochs / original_epochs.
    """
    cfg = figure1_original()
    original = original_lrs(cfg, original_epochs, iters_per_epoch)
    n = retrain_epochs * iters_per_epoch
    if scale is None:
        scale = allr_d2(retrain_epochs, original_epochs)
        allr_label = f"ALLR (d = d2 = {scale:g})"
    else:
        allr_label = f"ALLR (d = {scale:g})"
    curves = [
        (allr_label if kind == "ALLR" else kind, retrain_lrs(kind, n, original, scale=scale))
        for kind in FIGURE1_KINDS
    ]
    fig = plot_schedules(curves, iters_per_epoch, xlabel="retraining epoch")
    fig.axes[0].set_title(
        f"Retraining for {retrain_epochs} epochs after {original_epochs} stepped epochs"
    )
    if path is not None:
        save_figure(fig, path)
    return fig
