"""``prunebench latency / export / cost``: measured speedup, tidy export, equal-compute view."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from benchmark.cli.experiments import DEFAULT_STORE, _emit, _scale
from benchmark.cli.output import table_width
from benchmark.core.errors import ConfigError


def add_parsers(sub: Any) -> None:
    """Register ``latency``, ``export`` and ``cost`` on the ``prunebench`` sub-parser set."""
    lat = sub.add_parser("latency", help="measure a stored run's real inference speedup")
    lat.add_argument("run", help="run id of a finished run")
    lat.add_argument("--store", default=DEFAULT_STORE, help="results store folder")
    lat.add_argument("--device", default="auto", help="auto, cpu or cuda")
    lat.add_argument("--batches", default="1,64", help="comma-separated batch sizes")
    lat.add_argument("--warmup", type=int, default=10, help="untimed passes per measurement")
    lat.add_argument("--repeats", type=int, default=50, help="timed passes (median reported)")
    lat.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    lat.add_argument("--no-save", action="store_true", help="do not write it into the record")

    exp = _spec_parser(sub, "export", "every run of a table/figure as tidy CSV or JSON")
    exp.add_argument("--format", choices=("csv", "json"), default="csv")
    exp.add_argument(
        "--staged",
        action="store_true",
        help="the runs of staged tuning and its selection (column procedure = staged)",
    )
    from benchmark.cli.plan_flags import add_model_arg

    add_model_arg(exp)

    cost = _spec_parser(sub, "cost", "accuracy vs measured training cost (Pareto fronts)")
    cost.add_argument("--format", choices=("markdown", "csv"), default="markdown")
    cost.add_argument("--figure", default=None, help="also draw the figure (PNG/PDF path)")


def _spec_parser(sub: Any, name: str, help: str) -> argparse.ArgumentParser:
    """A sub-command on one table/figure id with --store, --scale and --out."""
    p = sub.add_parser(name, help=help)
    p.add_argument("id", help="table or figure id (prunebench list)")
    p.add_argument("--store", default=DEFAULT_STORE, help="results store folder")
    p.add_argument("--scale", choices=("auto", "smoke", "paper"), default="auto")
    p.add_argument("--out", default=None, help="write here instead of stdout")
    return p


def parse_batches(text: str) -> list[int]:
    """``"1,64"`` -> [1, 64]; anything else is a ConfigError naming ``--batches``."""
    try:
        batches = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        batches = []
    if not batches or any(b < 1 for b in batches):
        raise ConfigError("--batches", text, "comma-separated integers >= 1, e.g. 1,64")
    return batches


def cmd_latency(args: argparse.Namespace) -> int:
    """``prunebench latency RUN_ID``: print (and store) the measured speedup."""
    import torch

    from benchmark.measure.latency import check_positive
    from benchmark.measure.run_latency import measure_run, resolve_device

    batches = parse_batches(args.batches)
    check_positive("--repeats", args.repeats)
    if args.warmup < 0:
        raise ConfigError("--warmup", args.warmup, "an integer >= 0")
    if args.threads < 0:
        raise ConfigError("--threads", args.threads, "an integer >= 0")
    resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    result = measure_run(
        args.run,
        args.store,
        device=args.device,
        batches=batches,
        warmup=args.warmup,
        repeats=args.repeats,
        save=not args.no_save,
    )
    print(json.dumps(result, indent=2))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``prunebench export ID``: the tidy run table of an experiment."""
    from benchmark.experiments.catalog import check_id

    check_id(args.id)
    scale = _scale(args.id, args.scale, args.store)
    from benchmark.cli.plan_flags import experiment_of
    from benchmark.reporting.export import export_frame, render

    experiment = experiment_of(args, scale)
    if args.staged:
        from benchmark.cli.plan_flags import choose
        from benchmark.experiments.slices import Slice
        from benchmark.reporting.staged import staged_export

        staged = choose(experiment, scale, args.store, Slice(), staged=True).staged
        frame = staged_export(experiment, scale, args.store, staged)
    else:
        frame = export_frame(experiment, scale, args.store)
    if frame.attrs.get("skipped"):
        from benchmark.store.records import skipped_line

        print(
            skipped_line(frame.attrs["skipped"], "rows of their runs say status unusable"),
            file=sys.stderr,
        )
    _emit(render(frame, args.format), args.out)
    return 0


def cmd_cost(args: argparse.Namespace) -> int:
    """``prunebench cost ID``: the equal-compute table (and figure) of an experiment."""
    from pathlib import Path

    from benchmark.experiments.catalog import check_id

    check_id(args.id)
    scale = _scale(args.id, args.scale, args.store)
    from benchmark.experiments import get_experiment
    from benchmark.reporting.compute_view import cost_figure, cost_frame, render_markdown
    from benchmark.reporting.titles import title

    experiment = get_experiment(args.id)
    points = cost_frame(experiment, scale, args.store)
    heading = title(experiment, scale, args.store)
    if args.format == "csv":
        text = points.to_csv(index=False)
    else:
        text = render_markdown(points, heading, table_width(args.out))
    _emit(text, args.out)
    if args.figure:
        Path(args.figure).parent.mkdir(parents=True, exist_ok=True)
        cost_figure(points, heading).savefig(args.figure, dpi=130)
        print(f"wrote {args.figure}")
    return 0


COMMANDS = {"latency": cmd_latency, "export": cmd_export, "cost": cmd_cost}
