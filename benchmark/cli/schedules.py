"""The ``prunebench schedule`` sub-command: print or plot learning-rate schedules (Figure 1)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmark.config.run import ScheduleConfig
from benchmark.core.errors import ConfigError
from benchmark.schedules.original import original_lrs, original_warmup_iters
from benchmark.schedules.retraining import (
    ADAPTIVE_SCHEDULES,
    RETRAIN_SCHEDULES,
    adaptive_needs,
    allr_d2,
    retrain_lrs,
)

if TYPE_CHECKING:  # matplotlib is imported lazily so that the CLI starts fast
    pass
from benchmark.reporting.schedule_figure import Curve, check_plot_path, plot_schedules, save_figure


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
            check_plot_path(args.plot)
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
