"""``prunebench submit GRID.toml --staged``: a grid run by staged tuning, as ``table GRID.toml
--staged`` reports it (:mod:`benchmark.reporting.staged`).

Stage 1 trains the first seed of every configuration of each cell (method x goal sparsity x
model/dataset); stage 2, planned from the store once a cell's stage 1 has finished, trains the
other seeds of the configuration its validation selected. Locally both stages run in one
command; on SLURM the command queues what can run now and says to run it again when the jobs
are done (stage 2 follows from stage 1's results).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any


def staged_expansion(
    expansion: Any, store_dir: str | Path, worst_case: bool = False
) -> tuple[Any, Any]:
    """``expansion`` cut to the runs staged tuning trains now (stage 1, and stage 2 of the cells
    that have selected; with ``worst_case``, also the most stage 2 can add: for a dry run), and
    the :class:`~benchmark.reporting.staged.StagedPlan`."""
    from benchmark.reporting.grid_table import grid_plan
    from benchmark.reporting.staged import staged_plan
    from benchmark.store.frame import load_store

    plan, layout = grid_plan((r.cfg, r.values) for r in expansion.runs)
    staged = staged_plan(plan, load_store(store_dir), layout)
    now = set(staged.run_ids(worst_case=worst_case))
    runs = [r for r in expansion.runs if r.run_id in now]
    return dataclasses.replace(expansion, runs=runs), staged


def stage_line(staged: Any) -> str:
    """Both stages' run counts as the store decides them now."""
    bound = "at most " if staged.undecided else ""
    stage2 = staged.stage2["run_id"].nunique() + staged.undecided
    return (
        f"staged tuning (--staged): stage 1 (first seed, every configuration) "
        f"{staged.stage1['run_id'].nunique()} runs; stage 2 (other seeds of each cell's selected "
        f"configuration) {bound}{stage2} runs ({staged.decided_cells} of {staged.cells} cells "
        f"selected so far) instead of the full grid's {staged.full['run_id'].nunique()} runs"
    )
