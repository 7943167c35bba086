"""The ``prunebench schedule`` sub-command: print or plot learning-rate schedules (Figure 1)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.config import ScheduleConfig
from benchmark.errors import ConfigError
from benchmark.schedules import (
    ADAPTIVE_SCHEDULES,
    RETRAIN_SCHEDULES,
    adaptive_needs,
    allr_d2,
    original_lrs,
    original_warmup_iters,
    retrain_lrs,
)

if TYPE_CHECKING:  # matplotlib is imported lazily so that the CLI starts fast
    from matplotlib.figure import Figure

PLOT_SUFFIXES = (".png", ".pdf")
FIGURE1_KINDS = ("FT", "LRW", "SLR", "CLR", "LLR", "ALLR")

Curve = tuple[str, np.ndarray]


def add_parser(subparsers: Any) -> None:
    """Add the ``schedule`` sub-command to an argparse subparsers object."""
    p = subparsers.add_parser(
        "schedule",
        help="print (and optionally plot) per-iteration learning rates",
        description="Print an original schedule, or retraining schedules derived from it, "
        "as JSON per-iteration learning rates.",
    )
    p.add_argument("--original", default="stepped", help="original schedule name")
    p.add_argument("--lr", type=float, default=0.1, help="peak/initial LR of the original")
    p.add_argument("--milestones", type=float, nargs="*", default=[], help="stepped milestones")
    p.add_argument("--values", type=float, nargs="*", default=[], help="LR from each milestone on")
    p.add_argument("--warmup-epochs", type=float, default=0.0, help="original warm-up epochs")
    p.add_argument("--epochs", type=int, default=200, help="original training epochs")
    p.add_argument("--iters-per-epoch", type=int, default=1, help="iterations per epoch")
    p.add_argument("--retrain", nargs="+", metavar="KIND", help="retraining kinds to print")
    p.add_argument("--retrain-epochs", type=int, help="epochs of one retraining cycle")
    p.add_argument(
        "--scale",
        type=float,
        help="ALLR discount d; defaults to d2 = min(retrain/original epochs, 1) (i.e. d1 = 0)",
    )
    p.add_argument("--initial-lr", type=float, help="initial LR of the tuned-* kinds")
    p.add_argument("--warmup-fraction", type=float, default=0.0, help="warm-up of tuned-* kinds")
    p.add_argument(
        "--plot", type=Path, metavar="PATH", help="save a plot (.png or .pdf) instead of the JSON"
    )
    p.add_argument("--json", action="store_true", help="print the JSON also with --plot")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the requested schedules as JSON, or plot them; return the exit status."""
    try:
        if args.plot is not None:
            _check_plot_path(args.plot)
        curves, xlabel = _curves(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.plot is None or args.json:
        payload = [{"kind": kind, "lrs": lrs.tolist()} for kind, lrs in curves]
        print(json.dumps(payload[0] if len(payload) == 1 else payload))
    if args.plot is not None:
        fig = plot_schedules(curves, args.iters_per_epoch, xlabel=xlabel)
        save_figure(fig, args.plot)
        print(
            f"wrote {args.plot} ({len(curves)} schedule(s))",
            file=sys.stderr if args.json else sys.stdout,
        )
    return 0


def _require_positive(flag: str, value: int | None) -> int:
    """Return ``value`` or raise a ConfigError naming ``flag`` if it is not an integer >= 1."""
    if value is None or value < 1:
        raise ConfigError(flag, value, "an integer >= 1")
    return value


def _curves(args: argparse.Namespace) -> tuple[list[Curve], str]:
    """Compute the (label, lrs) pairs the arguments ask for and the matching x-axis label."""
    _require_positive("--epochs", args.epochs)
    ipe = _require_positive("--iters-per-epoch", args.iters_per_epoch)
    cfg = ScheduleConfig(
        name=args.original,
        lr=args.lr,
        milestones=list(args.milestones),
        values=list(args.values),
        warmup_epochs=args.warmup_epochs,
    )
    original = original_lrs(cfg, args.epochs, ipe)
    if not args.retrain:
        return [(cfg.name, original)], "epoch"
    # Check every kind before computing any, so a typo in the last one costs nothing.
    for kind in args.retrain:
        RETRAIN_SCHEDULES.get(kind, "method.schedule")
    n = _require_positive("--retrain-epochs", args.retrain_epochs) * ipe
    curves = [
        (kind, _retrain_curve(kind, n, original, original_warmup_iters(cfg, ipe), args))
        for kind in args.retrain
    ]
    return curves, "retraining epoch"


def _retrain_curve(
    kind: str, n: int, original: np.ndarray, warmup: int, args: argparse.Namespace
) -> np.ndarray:
    """Compute one retraining kind's schedule from the CLI arguments."""
    return retrain_lrs(
        kind,
        n,
        original,
        original_warmup=warmup,
        scale=_cli_scale(kind, args),
        initial_lr=args.initial_lr,
        warmup_fraction=args.warmup_fraction,
    )


def _cli_scale(kind: str, args: argparse.Namespace) -> float:
    """Return --scale, or d2 for adaptive kinds that use it (no network here to measure d1)."""
    if args.scale is not None or kind not in ADAPTIVE_SCHEDULES:
        return 1.0 if args.scale is None else args.scale
    if not adaptive_needs(kind).d2:
        raise ConfigError("--scale", None, f"a number in [0, 1] (required by {kind})")
    return allr_d2(args.retrain_epochs, args.epochs)


def _check_plot_path(path: Path) -> None:
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
    _check_plot_path(path)
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
