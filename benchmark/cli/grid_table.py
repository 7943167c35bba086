"""``prunebench table GRID.toml``: the table of a user's own grid (method x goal sparsity).

The grid's runs are read from its store (``--store``, else the grid's ``output.dir``, else
results/runs); runs the store lacks are shown as missing. The slice flags and ``--staged`` work
as for a spec.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.cli.costs import DEFAULT_STORE
from benchmark.cli.output import emit, render_table, table_width
from benchmark.cli.plan_flags import slice_of
from benchmark.cli.stores import require_store
from benchmark.core.errors import ConfigError


def is_grid_file(text: str) -> bool:
    """Whether a table id is a grid file (a ``.toml`` path) rather than a spec id."""
    return text.endswith(".toml") or ("/" in text and Path(text).is_file())


def cmd_grid_table(args: argparse.Namespace) -> int:
    """The table of the grid file ``args.id``: method x goal sparsity, configuration selected
    by validation, mean +- std over seeds."""
    if not Path(args.id).is_file():
        raise ConfigError("table id", args.id, "a table id (prunebench list) or a grid TOML file")
    if args.paper:
        raise ConfigError("--paper", True, "a paper table's id: a grid has no published values")
    from benchmark.reporting.rules import TableRules

    rules = TableRules(ddof=args.ddof, max_distance=args.max_distance)
    within = slice_of(args)
    by = [k.strip() for k in (args.by or "").split(",") if k.strip()]
    from benchmark.launch import prepare
    from benchmark.launch.grid import load_grid

    grid = load_grid(args.id)
    output = grid.base.get("output", {})
    default = output.get("dir", DEFAULT_STORE) if isinstance(output, dict) else DEFAULT_STORE
    store_dir = Path(args.store or default)
    require_store(store_dir, "table")
    if args.stats:
        from benchmark.reporting.seedstats import check_level

        check_level(args.level)
    from benchmark.reporting.grid_table import grid_plan
    from benchmark.reporting.tables import build_table
    from benchmark.store.frame import load_store

    expansion = prepare(grid, store_dir, check_configs=False)
    swept = set(expansion.swept_keys())
    unknown = [k for k in by if k not in swept]
    if unknown:
        raise ConfigError("--by", unknown[0], "keys the grid sweeps: " + ", ".join(sorted(swept)))
    from benchmark.models.causal_lm import LM_MODELS

    lm = bool(expansion.runs) and all(r.cfg.model.name in LM_MODELS for r in expansion.runs)
    plan, layout = grid_plan(((r.cfg, r.values) for r in expansion.runs), by, lm)
    within.check(plan, f"grid {grid.name}")
    store = load_store(store_dir)
    table_plan, labels, staged = plan, [], None
    if args.staged:
        import pandas as pd

        from benchmark.reporting.staged import LABEL, closing_note, staged_plan

        staged = staged_plan(within.apply(plan), store, layout, rules)
        outside = plan[~within.keeps(plan)]
        table_plan = pd.concat([staged.table_plan, outside], ignore_index=True)
        labels = [LABEL]
    table = build_table(
        grid.name, f"grid {args.id}", layout, table_plan, store, rules=rules, within=within
    )
    table.labels += labels
    if lm:
        table.notes.append(
            "tokens/s: training tokens per second of a row's retraining runs (--- where its "
            "runs only prune once and train nothing); PPL: lower is better"
        )
    if staged is not None:
        note = closing_note(staged, store, layout, rules)
        table.notes.append(note)
        print(f"[table] {note}", file=sys.stderr)
    if args.stats:
        from benchmark.reporting.table_stats import annotate

        view = (
            store[store["run_id"].isin(within.apply(table_plan)["run_id"])] if len(store) else store
        )
        annotate(table, layout, table_plan, view, level=args.level, method=args.ci, rules=rules)
    width = table_width(args.out)
    emit(render_table(table, args.format, str(store_dir), args.preamble, width), args.out)
    return 0
