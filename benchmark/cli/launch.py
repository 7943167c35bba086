"""``prunebench grid show``, ``prunebench submit`` and ``prunebench status``.

Heavy imports (submitit, torch) happen inside the handlers, so ``prunebench --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmark.cli.costs import add_array_layout, add_estimate_arg
from benchmark.config.run import DEFAULT_STORE


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register the grid sub-commands on the ``prunebench`` parser."""
    grid = sub.add_parser("grid", help="inspect grid files")
    grid_sub = grid.add_subparsers(dest="grid_command", required=True)
    show = grid_sub.add_parser(
        "show", help="number of runs, a preview table and how many are finished"
    )
    show.add_argument("file", help="a grid TOML file")
    _add_store_arg(show)
    show.add_argument("--limit", type=int, default=10, help="preview rows (default 10)")
    show.add_argument("--all", action="store_true", help="preview every run")

    submit = sub.add_parser(
        "submit", help="run a grid: SLURM job arrays, local worker processes or in-process"
    )
    submit.add_argument("file", help="a grid TOML file")
    submit.add_argument(
        "--executor",
        default="local",
        choices=["slurm", "local", "debug"],
        help="slurm: job arrays on a cluster (needs --profile); local: worker processes on this "
        "machine; debug: in this process, a failing run stops in pdb",
    )
    _add_store_arg(submit)
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="show the plan and what it costs (dataset passes, device-hours), submit nothing",
    )
    add_estimate_arg(submit)
    submit.add_argument(
        "--retry-failed", action="store_true", help="also resubmit runs whose result says failed"
    )
    submit.add_argument(
        "--staged",
        action="store_true",
        help="staged tuning: every configuration on the first seed, then the other seeds only "
        "for each cell's configuration selected by validation (as table GRID --staged reports)",
    )
    submit.add_argument(
        "--wait", action="store_true", help="slurm: follow the jobs with a progress bar"
    )
    submit.add_argument(
        "--hold", action="store_true", help="slurm: queue the arrays held (scontrol release)"
    )
    submit.add_argument("--workers", type=int, default=1, help="local: parallel worker processes")
    submit.add_argument(
        "--runs-per-task", type=int, default=1, help="slurm: runs packed into one array task"
    )
    add_runs_per_gpu(submit)
    submit.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads of every run, replacing runtime.threads (default: the config's "
        "runtime.threads, else cores / workers locally, cpus_per_task on slurm)",
    )
    submit.add_argument(
        "--max-requeues",
        type=int,
        default=3,
        help="requeues after time limits before a job gives up (submitit's max_num_timeout)",
    )
    cluster = submit.add_argument_group("slurm (override the cluster profile)")
    cluster.add_argument(
        "--profile", default="dev", help="slurm/profiles/NAME.toml or a path (default: dev)"
    )
    cluster.add_argument("--partition")
    cluster.add_argument("--account")
    cluster.add_argument("--qos")
    cluster.add_argument("--constraint")
    cluster.add_argument("--gpus-per-task", type=int)
    cluster.add_argument("--cpus-per-task", type=int)
    cluster.add_argument("--mem-gb", type=float)
    cluster.add_argument(
        "--time-min", type=float, help="time limit in minutes (local: none unless given)"
    )
    cluster.add_argument(
        "--signal-delay-s", type=int, help="seconds before the limit to checkpoint and requeue"
    )
    cluster.add_argument("--array-parallelism", type=int, help="array tasks running at once")
    cluster.add_argument(
        "--tasks-per-node", type=int, help="data-parallel processes per node and run (one per GPU)"
    )
    cluster.add_argument("--nodes", type=int, help="nodes per run (data-parallel runs)")

    status = sub.add_parser("status", help="finished/running/pending/failed/missing per method")
    status.add_argument("file", help="a grid TOML file")
    _add_store_arg(status)
    status.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=10.0,
        metavar="SECONDS",
        help="refresh until nothing is queued or running (every 10 s by default)",
    )
    status.add_argument("--all", action="store_true", help="list every failure")
    status.add_argument("--json", action="store_true", help="print the status as JSON")


def _add_store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store", help=f"results store (default: the grid's output.dir, else {DEFAULT_STORE})"
    )
    p.add_argument(
        "--max-runs",
        type=int,
        default=None,
        help="confirm a grid of up to this many cells (default: refuse more than 20000)",
    )


def _max_cells(args: argparse.Namespace) -> int:
    from benchmark.launch.grid import MAX_CELLS

    return MAX_CELLS if args.max_runs is None else args.max_runs


def _store_of(args: argparse.Namespace, grid: Any) -> Path:
    if args.store:
        return Path(args.store)
    output = grid.base.get("output", {})
    return Path(output.get("dir", DEFAULT_STORE) if isinstance(output, dict) else DEFAULT_STORE)


def cmd_grid(args: argparse.Namespace) -> int:
    """``prunebench grid show FILE``."""
    from benchmark.launch import grid_nodes, prepare
    from benchmark.launch.grid import load_grid
    from benchmark.store.results import Store

    grid = load_grid(args.file)
    store = _store_of(args, grid)
    expansion = prepare(grid, store, max_cells=_max_cells(args))
    st = Store(store)
    states = {r.run_id: st.status(r.run_id) for r in expansion.runs}
    parents = [n for n in grid_nodes(expansion) if not n.in_grid]
    finished = sum(1 for s in states.values() if s == "finished")
    failed = sum(1 for s in states.values() if s == "failed")
    methods = ", ".join(f"{m} {n}" for m, n in expansion.by_method().items())
    dup = f", {expansion.duplicates} duplicate cells share a run" if expansion.duplicates else ""
    print(f"grid {grid.name} ({args.file}): {len(expansion.runs)} runs{dup}")
    if grid.description:
        print(f"  {grid.description}")
    print(f"  methods: {methods}")
    if parents:
        print(f"  + {len(parents)} dense parent run(s) trained first, once each")
    print(
        f"  store {store}: {finished} finished, {failed} failed, "
        f"{len(expansion.runs) - finished - failed} not run yet"
    )
    limit = len(expansion.runs) if args.all else max(args.limit, 0)
    keys = expansion.swept_keys()
    header = ["run id", *("method" if k == "method.name" else k for k in keys), "store"]
    rows = [
        [r.run_id, *(_cell(r.values.get(k, "-")) for k in keys), states[r.run_id] or "-"]
        for r in expansion.runs[:limit]
    ]
    if rows:
        print(_table(header, rows))
    if limit < len(expansion.runs):
        print(f"(first {limit} of {len(expansion.runs)} runs; --limit N or --all for more)")
    return 0


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    from benchmark.core.textwidth import fit_table, width_of

    return fit_table([header, *rows], width_of())


def add_runs_per_gpu(p: argparse.ArgumentParser) -> None:
    """The ``--runs-per-gpu K`` option of the commands that launch runs."""
    p.add_argument(
        "--runs-per-gpu",
        type=int,
        default=1,
        metavar="K",
        help="train K runs of the grid at once in each job, sharing its device (each run on "
        "its own CUDA stream; each keeps its own record, checkpoint and result). One small "
        "run leaves most of a GPU idle; benchmark.bench.pack measures what K pays on a card",
    )
    p.add_argument(
        "--array",
        type=int,
        default=1,
        metavar="K",
        help="train up to K compatible runs of each job as one array model (same model, data "
        "set, epochs, precision; SGD; classification; dense, IMP, BIMP, Renda, GMP, and GSM, LC, "
        "DPF, DNW in arrays of their own method); the others are packed (--runs-per-gpu), with "
        "one line saying why. benchmark.bench.array measures it",
    )
    add_array_layout(p)


def launch_settings(args: argparse.Namespace) -> Any:
    """The :class:`LaunchSettings` of the ``submit`` flags (the profile only for slurm)."""
    from benchmark.launch import LaunchSettings, load_profile

    settings = LaunchSettings(
        executor=args.executor,
        workers=args.workers,
        runs_per_task=args.runs_per_task,
        runs_per_gpu=args.runs_per_gpu,
        array=args.array,
        array_layout=args.array_layout,
        threads=args.threads,
        max_requeues=args.max_requeues,
        hold=args.hold,
    )
    if args.executor == "slurm":
        time_min = args.time_min
        if time_min is not None and not float(time_min).is_integer():
            from benchmark.core.errors import ConfigError

            raise ConfigError("--time-min", time_min, "whole minutes for slurm")
        overrides = {
            "partition": args.partition,
            "account": args.account,
            "qos": args.qos,
            "constraint": args.constraint,
            "gpus_per_task": args.gpus_per_task,
            "cpus_per_task": args.cpus_per_task,
            "mem_gb": args.mem_gb,
            "time_min": None if time_min is None else int(time_min),
            "signal_delay_s": args.signal_delay_s,
            "array_parallelism": args.array_parallelism,
            "tasks_per_node": args.tasks_per_node,
            "nodes": args.nodes,
        }
        settings.profile = load_profile(args.profile, overrides)
    else:
        settings.local_time_min = args.time_min or 0.0
        if args.signal_delay_s is not None:
            settings.local_signal_delay_s = args.signal_delay_s
    settings.validate()
    return settings


def cmd_submit(args: argparse.Namespace) -> int:
    """``prunebench submit FILE --executor ...``: exit 1 if a run failed (local/debug)."""
    from benchmark.launch import LaunchError, prepare, submit_grid
    from benchmark.launch.grid import load_grid
    from benchmark.launch.submit import wait_for
    from benchmark.store.results import Store

    grid = load_grid(args.file)
    settings = launch_settings(args)
    store = _store_of(args, grid)
    whole = prepare(grid, store, settings, max_cells=_max_cells(args))
    expansion = whole
    if not args.dry_run:  # what each run checks before any compute, for all before the first
        from benchmark.training.preflight import check_plan

        finished = Store(store).is_finished
        todo = [r.cfg for r in whole.runs if not finished(r.run_id)]
        check_plan(todo, finished=finished, here=settings.executor != "slurm")
    # Staged tuning: stage 1 (and the stage 2 of cells that have selected) now; locally, once it
    # has run, stage 2 of the rest; on SLURM the command is run again when the jobs are done.
    stages = 2 if args.staged and settings.executor != "slurm" and not args.dry_run else 1
    for _ in range(stages):
        if args.staged:
            from benchmark.cli.staged_grid import stage_line, staged_expansion

            expansion, staged = staged_expansion(whole, store, worst_case=args.dry_run)
            print(stage_line(staged), flush=True)
        try:
            result = submit_grid(
                expansion, store, settings, retry_failed=args.retry_failed, dry_run=args.dry_run
            )
        except LaunchError as err:
            print(f"prunebench: submit failed: {err}", file=sys.stderr)
            return 1
        # What was queued is said at once; --wait then follows it (SLURM returns once queued).
        print(result.summary(), flush=True)
        if args.staged and not staged.undecided:
            break
    if args.staged and staged.undecided and stages == 1:
        print(
            f"staged tuning: stage 2 of {staged.cells - staged.decided_cells} cells is planned "
            f"once their stage 1 has finished: run this command again then",
            flush=True,
        )
    if args.dry_run:
        from benchmark.cli.disk import submit_disk_line

        gpus = settings.profile is not None and settings.profile.gpus_per_task > 0
        print_grid_cost(expansion, store, args.estimate_device, settings.executor, gpus,
                        settings.array, settings.array_layout)  # fmt: skip
        print(submit_disk_line(result), flush=True)
    if args.wait and settings.executor == "slurm" and not args.dry_run:
        wait_for(result.submitted_runs, store, out=sys.stdout)
    st = Store(store)
    if settings.executor != "slurm" and not args.dry_run:
        lost = [r for r in result.submitted_runs if st.status(r) is None]
        if lost:
            # Their worker was stopped (or killed) before it wrote a result: say so, not "done".
            print(
                f"{len(lost)} run(s) have no result: their worker was stopped (or another job "
                f"runs them); `prunebench status {args.file}` lists them, submit again to resume"
            )
            from benchmark.launch.local_worker import outlived_note, outliving_tasks

            outlived = outliving_tasks(st, lost)
            if outlived:
                print(f"note: {outlived_note(outlived)}")
            return 1
    failed = [r for r in result.submitted_runs if st.status(r) == "failed"]
    if failed and (settings.executor != "slurm" or args.wait):
        print(f"{len(failed)} run(s) failed; `prunebench status {args.file}` lists them")
        return 1
    return 0


def print_grid_cost(
    expansion: Any,
    store: Path,
    device: str | None,
    executor: str = "local",
    gpus: bool = False,
    array: int = 1,
    layout: str | None = None,
) -> None:
    """A grid's cost per method, for its dense parents and in total (``submit --dry-run``;
    ``gpus``: the profile asks for GPUs; ``array``, ``layout``: ``--array``,
    ``--array-layout``)."""
    from benchmark.cli.costs import cost_text, suggested_device
    from benchmark.launch import grid_nodes
    from benchmark.store.results import Store

    groups: dict[str, list[tuple[str, Any]]] = {}
    for run in expansion.runs:
        groups.setdefault(run.method, []).append((run.run_id, run.cfg))
    st = Store(store)
    ids = [n.run_id for n in grid_nodes(expansion)]
    finished = {rid for rid in ids if st.is_finished(rid)}
    heading = f" of grid {expansion.grid.name}"
    suggest = "cuda" if gpus else suggested_device(executor=executor)
    text, _ = cost_text(groups, finished, str(store), device=device, heading=heading,
                        suggest=suggest, array=array, layout=layout)  # fmt: skip
    print(text)


def cmd_status(args: argparse.Namespace) -> int:
    """``prunebench status FILE [--watch]``."""
    from benchmark.cli.stores import require_store
    from benchmark.launch import LaunchError, prepare
    from benchmark.launch.grid import load_grid
    from benchmark.launch.status import format_status, grid_status, watch

    grid = load_grid(args.file)
    store = _store_of(args, grid)
    require_store(store, "status")
    # Only run ids are needed: skipping validation keeps torchvision out of a status query.
    expansion = prepare(grid, store, check_configs=False, max_cells=_max_cells(args))
    max_failures = 1_000_000 if args.all else 20
    try:
        if args.watch is not None and not args.json:
            watch(expansion, store, interval_s=args.watch, max_failures=max_failures)
            return 0
        status = grid_status(expansion, store)
    except LaunchError as err:
        print(f"prunebench: status failed: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if args.json:
        print(json.dumps(status.to_dict(), indent=2))
    else:
        print(format_status(status, max_failures))
    return 0


COMMANDS = {"grid": cmd_grid, "submit": cmd_submit, "status": cmd_status}
