"""``prunebench free``: delete the final weights no later step needs (benchmark.reporting.keep).

Heavy imports (torch, pandas, the specs) happen inside the functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.config.run import DEFAULT_STORE


def add_parsers(sub: Any) -> None:
    """Register ``free`` on the ``prunebench`` sub-parser set."""
    free = sub.add_parser(
        "free",
        help="delete the final weights no table cell, child run or latency measurement needs",
        description="Delete the final weights (weights/<run>.pt) that no later step needs: "
        "kept are every dense parent, each table cell's selected configuration (all seeds), "
        "every run of a cell that still misses runs, runs whose latency is still to be "
        "measured, and runs of no table or figure considered. Records and metrics stay, so "
        "tables, figures and exports are unchanged.",
    )
    free.add_argument(
        "ids", nargs="*", metavar="ID", help="tables/figures whose runs to consider (default: all)"
    )
    free.add_argument("--store", default=DEFAULT_STORE, help="results store folder")
    free.add_argument(
        "--scale",
        choices=("auto", "smoke", "paper"),
        default="auto",
        help="which plan of each id (auto: smoke when the store holds smoke runs of it)",
    )
    free.add_argument("--dry-run", action="store_true", help="only say what would be freed")


def considered(ids: Sequence[str], scale: str, store_dir: str) -> list[Any]:
    """The specs ``ids`` (all of them when empty) with their planned runs at ``scale``; only
    those whose plan can hold a run of the store are planned (the others change nothing)."""
    from benchmark.cli.experiments import _scale
    from benchmark.experiments import get_experiment
    from benchmark.experiments.catalog import check_id, load
    from benchmark.reporting.keep import Considered
    from benchmark.store.results import FINISHED, Store

    for experiment_id in ids:
        check_id(experiment_id)  # every id is checked before anything is read
    entries = load()
    chosen = list(ids) or [e.id for e in entries.values() if e.smoke_runs or e.paper_runs]
    records = Store(store_dir).records()
    finished = {r["run_id"] for r in records if r.get("status") == FINISHED}
    store = Path(store_dir).resolve()
    out = []
    for experiment_id in chosen:
        at = _scale(experiment_id, scale, store_dir, finished)
        if not may_hold(entries[experiment_id], at, records):
            continue
        experiment = get_experiment(experiment_id)
        out.append(Considered(experiment, at, list(experiment.runs(at, store))))  # type: ignore[arg-type]
    return out


def may_hold(entry: Any, scale: str, records: Sequence[dict[str, Any]]) -> bool:
    """Whether the plan of a catalog entry at ``scale`` can hold a run of ``records``: at smoke
    scale one of its run ids, at paper scale a run of one of its models.

    A spec that holds none decides nothing for the store: what it would keep is its own plan
    and its runs' dense parents, which are kept anyway.
    """
    if scale == "smoke":
        return bool(set(entry.smoke_runs) & {r["run_id"] for r in records})
    models = {_model(r) for r in records}
    return bool(models & set(entry.extra.get("paper_passes_by_model", {})))


def _model(record: dict[str, Any]) -> str | None:
    return ((record.get("config") or {}).get("model") or {}).get("name")


def cmd_free(args: argparse.Namespace) -> int:
    """``prunebench free [ID...]``: delete the weights no later step needs."""
    from benchmark.reporting.keep import free_weights, plan_free

    if not Path(args.store).is_dir():
        from benchmark.core.errors import ConfigError

        raise ConfigError("--store", args.store, "an existing results store folder")
    specs = considered(args.ids, args.scale, args.store)
    plan = plan_free(args.store, specs)
    if not args.dry_run:
        plan = free_weights(args.store, plan)
    print(plan.summary(done=not args.dry_run))
    return 0


COMMANDS = {"free": cmd_free}
