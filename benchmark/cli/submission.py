"""How ``reproduce`` runs what a table misses: through the launcher (idempotent, dense parents
first), reading the datasets from another folder where asked.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.config.parse import replace_section
from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError


def run_missing(
    configs: list[RunConfig],
    store: Any,
    name: str,
    args: argparse.Namespace,
    stage: int | None,
    parents: Any,
) -> None:
    """Check, then submit, the unfinished ``configs`` of ``reproduce`` (of a stage of staged
    tuning): every check a run makes before any compute is made for all of them (and their
    dense parents) before the first one starts."""
    from benchmark.training.preflight import check_plan

    missing = [c for c in configs if not store.is_finished(c.run_id)]
    if args.data_root is not None:
        missing = reading_from(missing, args.data_root, args.scale)
    if args.measure_latency:
        from benchmark.measure.run_latency import asking_for_latency

        missing = [asking_for_latency(c) for c in missing]
    if stage is not None:
        print(f"[reproduce] staged tuning, stage {stage}: {len(missing)} runs to train",
              file=sys.stderr)  # fmt: skip
    check_plan(missing, parents, store.is_finished, here=args.executor != "slurm")
    submit_missing(
        missing,
        args.executor,
        args.store,
        name=f"{name}-{args.scale}",
        workers=args.workers,
        profile=args.profile,
        runs_per_gpu=args.runs_per_gpu,
        array=args.array,
        array_layout=args.array_layout,
        retry_failed=args.retry_failed,
    )


def submit_missing(
    configs: Sequence[RunConfig],
    executor: str,
    store_dir: str | Path,
    *,
    name: str,
    workers: int = 1,
    profile: str | None = None,
    runs_per_gpu: int = 1,
    array: int = 1,
    array_layout: str | None = None,
    retry_failed: bool = False,
    dry_run: bool = False,
) -> list[str]:
    """Submit the configs the store has not finished; returns their run ids.

    This is the one place that knows how runs are executed: through the launcher
    (``benchmark.launch.submit_grid``: idempotent, skips finished or queued runs, dense parents
    first) as a grid named ``name``. Without the launcher, the local executor runs them here,
    one after the other, with ``benchmark.training.runner.execute``. ``dry_run``: nothing runs;
    with ``array`` > 1 the lines saying how the jobs would form arrays go to stderr, as
    ``submit --dry-run`` prints them.
    """
    from benchmark.store.results import Store

    store = Store(store_dir)
    missing = [c for c in configs if not store.is_finished(c.run_id)]
    if not missing:
        return []
    try:
        from benchmark import launch
        from benchmark.launch.expansion import Expansion, GridRun
        from benchmark.launch.grid import Grid
    except ImportError:
        launch = None
    if launch is None:
        if executor != "local":
            raise ConfigError("--executor", executor, "local (the launcher is not installed)")
        if dry_run:
            return [c.run_id for c in missing]
        from benchmark.training.runner import execute

        for i, cfg in enumerate(missing, start=1):
            print(f"[reproduce] {i}/{len(missing)} {cfg.run_id}", file=sys.stderr, flush=True)
            execute(cfg)
        return [c.run_id for c in missing]
    settings = launch.LaunchSettings(
        executor=executor,
        workers=workers,
        runs_per_gpu=runs_per_gpu,
        array=array,
        array_layout=array_layout,
        profile=launch.load_profile(profile) if profile is not None else None,
    )
    grid = Grid(name=name, base={}, groups=[], methods={}, description=f"prunebench {name}")
    expansion = Expansion(grid, [GridRun(c.run_id, c, {}) for c in missing], len(missing))
    root = Path(store_dir).resolve()
    result = launch.submit_grid(
        expansion, root, settings, retry_failed=retry_failed, out=sys.stderr, dry_run=dry_run
    )
    if dry_run:
        from benchmark.launch.arrays import array_lines

        if array > 1:
            print("\n".join(array_lines(result.specs, array, array_layout)), file=sys.stderr)
        return [n.run_id for n in result.plan.submit]
    print(result.summary(), file=sys.stderr)
    return list(result.submitted_runs)


def check_launch_flags(args: Any) -> None:
    """Refuse a bad ``--workers`` or ``--profile`` of ``reproduce`` by name,
    before the store's folders are made or any run starts."""
    from benchmark.config.run import check

    check(args.workers >= 1, "--workers", args.workers, "an integer >= 1")
    try:
        from benchmark import launch
    except ImportError:  # without the launcher only the local executor runs (submit_missing)
        return
    if args.profile is not None:  # (a slurm run without one is refused where it submits)
        launch.load_profile(args.profile)


def check_array_flags(args: Any) -> None:
    """Refuse ``--array-layout`` naming no layout, or without ``--array K`` > 1."""
    if args.array_layout is not None:
        from benchmark.training.array.fit import check_layout

        check_layout(args.array_layout, args.array)


def reading_from(configs: list[RunConfig], root: str, scale: str) -> list[RunConfig]:
    """``configs`` reading their datasets under ``root`` (absolute; the run ids stay the same)."""
    if scale != "paper":
        # Smoke runs read the stand-in files reproduce writes where their problems say.
        raise ConfigError("--data-root", root, "a folder, with --scale paper only")
    folder = str(Path(root).expanduser().resolve())
    return [replace_section(c, data=dataclasses.replace(c.data, root=folder)) for c in configs]
