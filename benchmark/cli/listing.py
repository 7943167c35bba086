"""``prunebench list``: every table and figure id, what it shows, the runs the store holds, and
the size of its paper-scale plan: runs and dataset passes (read from the catalog, without torch).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmark.cli.experiments import DEFAULT_STORE, finished_ids
from benchmark.core.textwidth import fit_table, width_of


def add_parsers(sub: Any) -> None:
    """Register ``list`` on the ``prunebench`` sub-parser set."""
    lst = sub.add_parser(
        "list",
        help="every table and figure id, the runs the store holds, and each paper-scale plan's "
        "runs and dataset passes",
    )
    lst.add_argument("--store", default=DEFAULT_STORE, help="results store folder")
    lst.add_argument("--scale", choices=("smoke", "paper"), default="smoke")


def passes_text(extra: dict[str, Any]) -> str:
    """The paper-scale dataset passes of a catalog entry (dense parents included)."""
    passes = extra.get("paper_passes")
    return "-" if passes is None else f"{passes:,}"


def cmd_list(args: argparse.Namespace) -> int:
    """``prunebench list``: ids, what each shows (table, figure), how many of its runs the store
    holds, and its paper-scale runs and dataset passes (from the catalog: answers without
    loading torch)."""
    from benchmark.experiments.catalog import load
    from benchmark.experiments.not_reproducible import NOT_REPRODUCIBLE

    finished = finished_ids(args.store)
    rows = []
    for entry in load().values():
        if args.scale == "smoke":
            planned = set(entry.smoke_runs)
        else:
            from benchmark.experiments import get_experiment

            planned = set(get_experiment(entry.id).plan("paper", args.store)["run_id"])
        held = f"{len(planned & finished)}/{len(planned)}" if planned else "no runs"
        shows = "+".join(k for k in ("table", "figure") if getattr(entry, k)) or entry.kind
        passes = passes_text(entry.extra)
        rows.append((entry.id, shows, held, f"{entry.paper_runs:,}", passes, entry.description))
    # The paper's other tables, listed so that none is silently missing.
    for name, reason in NOT_REPRODUCIBLE.items():
        why = f"not reproducible here: {reason.split(':')[0]}"
        rows.append((name, "table", "-", "-", "-", why))
    header = (
        "id",
        "shows",
        f"runs held ({args.scale})",
        "paper-scale runs",
        "paper-scale passes",
        "description",
    )
    print(fit_table([header, *rows], width_of(), align="lllrrl", prose=True))
    print(
        "\nshows: table and/or figure (plot ID draws those with a figure). passes: epochs over the "
        "training set, dense parents and post-training fine-tuning included; what they cost on a "
        "device: reproduce ID --scale paper --dry-run",
    )
    print("prunebench table ID / plot ID / reproduce ID --scale smoke")
    return 0


COMMANDS = {"list": cmd_list}
