"""``prunebench table / plot / reproduce``: the paper's tables and figures from a store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from benchmark.cli.costs import add_estimate_arg
from benchmark.cli.launch import add_runs_per_gpu
from benchmark.cli.output import emit as _emit
from benchmark.cli.output import render_table as _render
from benchmark.cli.output import table_width, warn_smoke_vs_paper
from benchmark.cli.plan_flags import (
    add_model_arg,
    add_slice_args,
    choose,
    experiment_of,
    parents_note,
    print_dry_run,
    slice_of,
)
from benchmark.cli.stores import require_store
from benchmark.cli.submission import (
    check_array_flags,
    check_launch_flags,
    run_missing,
    submit_missing,
)
from benchmark.config.run import DEFAULT_STORE
from benchmark.core.errors import ConfigError

DEFAULT_FIGURES = "results/figures"


FORMATS = ("markdown", "latex", "csv")


EXECUTORS = ("local", "debug", "slurm")


def add_parsers(sub: Any) -> None:
    """Register ``table``, ``plot`` and ``reproduce`` on the ``prunebench`` sub-parser set."""
    table = sub.add_parser("table", help="rebuild a table of the paper from the results store")
    table.add_argument(
        "id", help="table id (prunebench list), or a grid TOML file: its methods x goal sparsities"
    )
    table.add_argument("--format", choices=FORMATS, default="markdown", help="output format")
    table.add_argument("--paper", action="store_true", help="show the published value and diff")
    table.add_argument("--preamble", action="store_true", help="LaTeX: define \\first etc.")
    _rules(table)
    table.add_argument(
        "--stats", action="store_true", help="add n, confidence intervals and significance marks"
    )
    table.add_argument("--ci", choices=("t", "bootstrap"), default="t", help="with --stats")
    table.add_argument("--level", type=float, default=0.95, help="confidence level (--stats)")
    _common(table, out_help="write the table to this file instead of stdout", store=None)
    add_slice_args(table)
    add_model_arg(table)
    table.add_argument(
        "--by",
        default=None,
        metavar="KEYS",
        help="a grid file: swept keys that split a method into rows (e.g. method.schedule) "
        "instead of being selected over",
    )

    plot = sub.add_parser(
        "plot", help="draw a figure of the paper (PNG and PDF) and print its text (also as .txt)"
    )
    plot.add_argument("id", help="figure or table id (prunebench list)")
    plot.add_argument(
        "--paper",
        action="store_true",
        help="whether the figure shows the paper's shape: its printed text always ends with it",
    )
    _common(plot, out_help="folder for <id>.png, .pdf and .txt (default: results/figures)")
    add_slice_args(plot)

    rep = sub.add_parser("reproduce", help="run what a table/figure misses, then build it")
    rep.add_argument("id", help="table or figure id (prunebench list)")
    rep.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="local: worker processes here; debug: in this process; slurm: job arrays "
        "(needs --profile)",
    )
    rep.add_argument("--workers", type=int, default=1, help="local worker processes")
    add_runs_per_gpu(rep)
    rep.add_argument("--profile", default=None, help="cluster profile (slurm executor)")
    rep.add_argument("--format", choices=FORMATS, default="markdown", help="output format")
    rep.add_argument("--paper", action="store_true", help="show the published value and diff")
    rep.add_argument(
        "--dry-run",
        action="store_true",
        help="only count the runs and what they cost (dataset passes, device-hours)",
    )
    rep.add_argument(
        "--data-root",
        default=None,
        help="with --scale paper: the folder every run reads its dataset from (data.root; run "
        "ids unchanged)",
    )
    rep.add_argument(
        "--keep",
        choices=("all", "needed"),
        default="all",
        help="final weights kept: all runs', or only what later steps need (dense parents, "
        "each cell's selected configuration, runs whose latency is still to be measured); "
        "the rest is freed once the table is built (prunebench free)",
    )
    rep.add_argument(
        "--measure-latency",
        action="store_true",
        help="time each run right after training (latency.measure; run ids unchanged)",
    )
    _rules(rep)
    _common(rep, default_scale="smoke", out_help="folder for the table and figures")
    add_slice_args(rep)
    add_estimate_arg(rep)
    add_model_arg(rep)
    rep.add_argument(
        "--retry-failed",
        action="store_true",
        help="also run again the runs whose result says failed (reproduce lists their errors)",
    )


def _rules(p: argparse.ArgumentParser) -> None:
    """The table rules the paper leaves open (benchmark.reporting.tables.TableRules)."""
    from benchmark.reporting.rules import MAX_PLACEMENT_DISTANCE

    p.add_argument(
        "--ddof",
        type=int,
        choices=(0, 1),
        default=1,
        help="std over seeds: 1 sample (default), 0 population; the paper does not say which",
    )
    p.add_argument(
        "--max-distance",
        type=float,
        default=MAX_PLACEMENT_DISTANCE,
        help="CS/STR/DST: how far (percent points) the closest configuration may lie from a goal "
        "column with none within +-0.25%% (0: strict intervals; default %(default)s, our choice)",
    )


def _table_rules(args: argparse.Namespace) -> Any:
    from benchmark.reporting.rules import TableRules

    return TableRules(ddof=args.ddof, max_distance=args.max_distance)


def _common(
    p: argparse.ArgumentParser,
    *,
    out_help: str,
    default_scale: str = "auto",
    store: str | None = DEFAULT_STORE,
) -> None:
    p.add_argument(
        "--store",
        default=store,
        help="results store folder"
        + ("" if store else f" (default: {DEFAULT_STORE}; of a grid file: its output.dir)"),
    )
    auto = default_scale == "auto"
    p.add_argument(
        "--scale",
        choices=("auto", "smoke", "paper") if auto else ("smoke", "paper"),
        default=default_scale,
        help="which grid to read (auto: smoke when the store holds smoke runs of this id)"
        if auto
        else "which grid to run: smoke (digits, minutes on a CPU) or paper",
    )
    p.add_argument("--out", default=None, help=out_help)


def _scale(
    experiment_id: str, requested: str, store_dir: str, finished: set[str] | None = None
) -> str:
    """``auto``: smoke when the store holds any smoke run of this experiment, else paper
    (``finished``: the store's finished run ids, when already read).

    Smoke runs train on digits, which no paper-scale grid uses, so the (small) smoke plan of the
    catalog decides without expanding the paper grid (thousands of configs).
    """
    if requested != "auto":
        return requested
    from benchmark.experiments.catalog import load

    smoke = set(load()[experiment_id].smoke_runs)
    finished = finished_ids(store_dir) if finished is None else finished
    return "smoke" if smoke & finished else "paper"


def finished_ids(store_dir: str | Path) -> set[str]:
    """The run ids with a finished result in the store (read without pandas or torch)."""
    from benchmark.store.results import FINISHED, Store

    return {r["run_id"] for r in Store(store_dir).records() if r.get("status") == FINISHED}


def cmd_table(args: argparse.Namespace) -> int:
    """``prunebench table ID``: the table rebuilt from the store (``ID``: a grid file too)."""
    from benchmark.cli.grid_table import is_grid_file

    if is_grid_file(args.id):
        from benchmark.cli.grid_table import cmd_grid_table

        return cmd_grid_table(args)
    from benchmark.experiments.catalog import check_id

    check_id(args.id, "table")
    args.store = args.store or DEFAULT_STORE
    require_store(args.store, "table")
    rules = _table_rules(args)
    within = slice_of(args)
    scale = _scale(args.id, args.scale, args.store)
    from benchmark.reporting.tables import rebuild

    experiment = experiment_of(args, scale)
    if args.stats:
        from benchmark.reporting.seedstats import check_level, check_method

        check_level(args.level)
        check_method(args.ci)
        if args.ci == "bootstrap":
            # The plan says how many seeds each cell can have: a bootstrap that too few seeds
            # cannot support is refused before the store is read.
            check_method(args.ci, _planned_seeds(experiment.plan(scale, args.store)))
    chosen = choose(experiment, scale, args.store, within, staged=args.staged, rules=rules)
    table = rebuild(
        experiment,
        scale,
        args.store,
        paper=args.paper,
        rules=rules,
        within=within,
        plan=chosen.table_plan(),
    )
    _label_staged(table, chosen, experiment.layout(scale), args.store, rules, "table")
    warn_smoke_vs_paper(table, scale, args.paper, experiment)
    if args.stats:
        from benchmark.reporting.table_stats import annotate
        from benchmark.store.frame import load_store

        layout = experiment.layout(scale)
        store = chosen.store_view(load_store(args.store))
        annotate(table, layout, chosen.table_plan(), store, level=args.level, method=args.ci,
                 rules=rules)  # fmt: skip
    width = table_width(args.out)
    _emit(_render(table, args.format, args.store, args.preamble, width), args.out)
    return 0


def _planned_seeds(plan: Any) -> list[int]:
    """Seeds planned per configuration of each cell (the most a cell can have)."""
    from benchmark.experiments.base import CELL

    if plan.empty:
        return []
    counts = plan.groupby([*CELL, "tuned"], dropna=False)["seed"].nunique()
    return [int(n) for n in counts]


def _label_staged(
    table: Any, chosen: Any, layout: Any, store_dir: str, rules: Any, command: str = "reproduce"
) -> None:
    """A staged table says so in its title and closes with both plans' counts, the wall-clock
    saved and the cells whose selection changed."""
    if chosen.staged is None:
        return
    from benchmark.reporting.staged import closing_note
    from benchmark.store.frame import load_store

    table.labels += chosen.labels()
    note = closing_note(chosen.staged, load_store(store_dir), layout, rules)
    table.notes.append(note)
    print(f"[{command}] {note}", file=sys.stderr)


def _no_runs(experiment_id: str, requested: str, scale: str, store_dir: str) -> bool:
    """Whether the store holds none of the finished runs the figure needs (then say what runs
    them: the smoke scale first, minutes on a CPU, unless the paper scale was asked for)."""
    from benchmark.experiments.catalog import load

    entry = load()[experiment_id]
    finished = finished_ids(store_dir)
    if scale == "smoke" and set(entry.smoke_runs) & finished:
        return False
    if scale == "paper":
        from benchmark.experiments import get_experiment

        planned = set(get_experiment(experiment_id).plan(scale, store_dir)["run_id"])
        if not planned or planned & finished:
            return False
    first = "paper" if requested == "paper" else "smoke"
    count = entry.paper_runs if first == "paper" else len(entry.smoke_runs)
    cost = "" if first == "paper" else ", minutes on a CPU"
    which = f"{scale} scale" if requested != "auto" else "either scale"
    print(
        f"prunebench: no finished runs of {experiment_id} ({which}) in {store_dir}; "
        f"nothing to draw. Run them first: prunebench reproduce {experiment_id} --scale {first} "
        f"--store {store_dir} ({count} runs{cost})"
        + ("" if first == "paper" else f"; the paper scale plans {entry.paper_runs} runs"),
        file=sys.stderr,
    )
    return True


def cmd_plot(args: argparse.Namespace) -> int:
    """``prunebench plot ID``: the figure as PNG and PDF, and its text (printed and as .txt)."""
    from benchmark.experiments.catalog import check_id

    check_id(args.id, "figure")
    require_store(args.store, "plot")
    within = slice_of(args)
    scale = _scale(args.id, args.scale, args.store)
    if _no_runs(args.id, args.scale, scale, args.store):
        return 1
    from benchmark.experiments import get_experiment
    from benchmark.reporting.plots import draw

    experiment = get_experiment(args.id)
    chosen = choose(experiment, scale, args.store, within, staged=args.staged)
    figures = Path(args.out or DEFAULT_FIGURES)
    plan, labels = chosen.table_plan(), chosen.labels()
    _print_figure(draw(experiment, scale, args.store, figures, within=within, plan=plan,
                       labels=labels))  # fmt: skip
    return 0


def _print_figure(paths: list[Path]) -> None:
    """Where the figure went, then its text (what ran, what the marks mean, and last whether it
    shows the paper's shape), as its .txt holds it."""
    for path in paths:
        print(f"wrote {path}")
    print(next(p for p in paths if p.suffix == ".txt").read_text(encoding="utf-8"), end="")


def cmd_reproduce(args: argparse.Namespace) -> int:
    """``prunebench reproduce ID``: run the missing runs (of a slice, or staged), then build the
    table and figures; ``--dry-run`` counts them and prints what they cost."""
    from benchmark.cli.grid_table import is_grid_file
    from benchmark.experiments.catalog import check_id

    if is_grid_file(args.id):
        raise ConfigError(
            "reproduce id",
            args.id,
            "a paper table's id (prunebench list); a grid file runs with prunebench submit "
            f"{args.id} [--staged], and its table is prunebench table {args.id} [--staged]",
        )
    check_id(args.id)
    rules = _table_rules(args)  # bad values fail before anything runs
    within = slice_of(args)
    check_array_flags(args)
    check_launch_flags(args)  # before the store's folders exist
    if args.data_root is not None and args.scale != "paper":
        # Smoke runs read the stand-in files reproduce writes where their problems say.
        raise ConfigError("--data-root", args.data_root, "a folder, with --scale paper only")
    from benchmark.store.results import Store

    experiment = experiment_of(args, args.scale)
    if args.paper and experiment.layout(args.scale) is not None:
        # The table that ends the command could not show --paper's columns: say so before any
        # run trains, not after hours of them.
        if experiment.published_numbers() is None:
            from benchmark.experiments.registry import unpublished_error

            raise unpublished_error(experiment)
    # Absolute output dirs: launcher workers may run from another directory.
    root = Path(args.store).resolve()
    chosen = choose(experiment, args.scale, root, within, staged=args.staged, rules=rules)
    store = Store(args.store)
    pairs = chosen.pairs()
    configs = [cfg for _, cfg in pairs]
    finished = {run_id for run_id, _ in pairs if store.is_finished(run_id)}
    what = f"{experiment.id} ({args.scale}" + (
        f"; slice: {within.label()})" if not within.everything else ")"
    )
    of_all = "" if within.everything else f" of the spec's {chosen.plan['run_id'].nunique()}"
    print(
        f"[reproduce] {what}: {len(configs)} runs{of_all}, {len(configs) - len(finished)} missing"
        + parents_note(chosen, store),
        file=sys.stderr,
    )
    if args.dry_run:
        if args.array > 1:  # how the jobs would form arrays, as submit --dry-run says
            missing = [cfg for run_id, cfg in pairs if run_id not in finished]
            submit_missing(missing, args.executor, args.store, name=f"{experiment.id}-"
                           f"{args.scale}", workers=args.workers, profile=args.profile,
                           array=args.array, array_layout=args.array_layout,
                           dry_run=True)  # fmt: skip
        print_dry_run(experiment, args.scale, chosen, args.store, finished, args)
        from benchmark.cli.disk import reproduce_disk_line

        what, more = "missing runs", []
        if chosen.staged is not None:  # the staged plan's runs (its worst case), not the full's
            from benchmark.cli.plan_flags import parent_pairs

            pairs = chosen.pairs(chosen.staged.run_ids())
            more = [cfg for _, cfg in parent_pairs(chosen, chosen.staged.worst_parents)]
            bound = " (at most)" if chosen.staged.undecided else ""
            what = f"missing runs of staged tuning{bound}"
        missing = [(run_id, cfg) for run_id, cfg in pairs if run_id not in finished]
        line = reproduce_disk_line(experiment, args.scale, chosen.runs, missing, args.store, what,
                                   more, chosen.ids, chosen.parents)  # fmt: skip
        print(f"[reproduce] {line}", file=sys.stderr)
        return 0
    experiment.prepare(args.scale)
    stages = [None] if chosen.staged is None else [1, 2]
    for stage in stages:
        if stage == 2:  # stage 2 follows from stage 1's results: plan it again from the store
            chosen = choose(experiment, args.scale, root, within, staged=True, rules=rules,
                            runs=chosen.runs)  # fmt: skip
        todo = configs if stage is None else chosen.configs(_stage_ids(chosen, stage))
        run_missing(todo, store, experiment.id, args, stage, chosen.parents)
        if args.executor == "slurm":
            later = " (stage 2, the other seeds, is planned then: run this command again)"
            print(
                f"[reproduce] when the jobs are done: prunebench table/plot {experiment.id}"
                + (later if stage == 1 else "")
            )
            if args.keep == "needed":
                print(
                    f"[reproduce] then free what the table does not need: prunebench free {args.id}"
                )
            return _failures(chosen, args)
    _build_outputs(experiment, args, chosen, within, rules)
    if args.keep == "needed":
        from benchmark.cli.disk import free_after_reproduce

        summary = free_after_reproduce(experiment, args.scale, args.store, chosen.runs)
        print(f"[reproduce] --keep needed: {summary}", file=sys.stderr)
    return _failures(chosen, args)


def _failures(chosen: Any, args: argparse.Namespace) -> int:
    """Exit status 1, each distinct error printed, when a run of the slice (or its parent)
    failed; else 0."""
    from benchmark.cli.failures import report_failures

    return int(report_failures(chosen.configs(), args.store, chosen.parents, "reproduce"))


def _stage_ids(chosen: Any, stage: int) -> list[str]:
    staged = chosen.staged
    return list(staged.stage1["run_id"] if stage == 1 else staged.stage2["run_id"])


def _build_outputs(
    experiment: Any, args: argparse.Namespace, chosen: Any, within: Any, rules: Any
) -> None:
    """The table (and figures) of what ran, labelled with the slice and staged tuning."""
    plan, labels = chosen.table_plan(), chosen.labels()
    if experiment.layout(args.scale) is not None:
        from benchmark.reporting.tables import rebuild

        table = rebuild(experiment, args.scale, args.store, paper=args.paper, rules=rules,
                        within=within, plan=plan)  # fmt: skip
        _label_staged(table, chosen, experiment.layout(args.scale), args.store, rules)
        warn_smoke_vs_paper(table, args.scale, args.paper, experiment)
        out = (
            None
            if args.out is None
            else str(Path(args.out) / f"{experiment.id}.{_ext(args.format)}")
        )
        _emit(_render(table, args.format, args.store, width=table_width(out)), out)
    elif chosen.staged is not None:
        from benchmark.reporting.staged import closing_note
        from benchmark.store.frame import load_store

        note = closing_note(chosen.staged, load_store(args.store), None, rules)
        print(f"[reproduce] {note}", file=sys.stderr)
    if experiment.plot is not None:
        from benchmark.reporting.plots import draw

        figures = Path(args.out) if args.out else Path(DEFAULT_FIGURES)
        _print_figure(draw(experiment, args.scale, args.store, figures, within=within, plan=plan,
                           labels=labels))  # fmt: skip


def _ext(fmt: str) -> str:
    return {"markdown": "md", "latex": "tex", "csv": "csv"}[fmt]


COMMANDS = {
    "table": cmd_table,
    "plot": cmd_plot,
    "reproduce": cmd_reproduce,
}
