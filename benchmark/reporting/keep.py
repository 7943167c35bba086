"""What a store keeps of its runs' final weights: all of them, or what later steps still need.

``--keep needed`` keeps the weights of

* every dense parent: each ``dense`` run and each run another run (finished or planned) names
  as its parent; a parent is never freed while a child of it is missing;
* each table cell's selected configuration (all its seeds), as the table selects it
  (:func:`benchmark.reporting.selection.select_cells`), and every run of a cell that still
  misses runs (its selection may change);
* runs whose latency is still to be measured (``latency.measure`` without a measurement, or
  with a failed one);
* runs of no table or figure considered (nothing here knows who needs them), and runs whose
  lock is held (running now).

Everything else, the weights no table cell, child run or measurement needs, is freed: the run's
record and metrics stay, so tables, figures and exports are unchanged. ``prunebench free``
applies it; ``prunebench reproduce --keep needed`` applies it to its table when it is built.
Records that cannot be read are named and their weights kept; the files killed writes left are
cleaned where no process holds their run (:mod:`benchmark.store.leftovers`).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.experiments.base import CELL, Experiment, PlannedRun, Scale, plan_frame
from benchmark.reporting.rules import TableRules
from benchmark.store.errors import RunLockedError
from benchmark.store.footprint import format_bytes
from benchmark.store.leftovers import Leftover, clean_leftovers, find_leftovers
from benchmark.store.records import Skipped, skipped_line
from benchmark.store.results import FINISHED, Store

KEEP_CHOICES = ("all", "needed")

PARENT = "dense parent"
SELECTED = "selected configuration of a table cell"
INCOMPLETE = "run of a table cell that misses runs"
LATENCY = "latency still to be measured"
UNPLANNED = "in no table or figure considered"
RUNNING = "running now (its lock is held)"


@dataclass
class Considered:
    """One table or figure whose runs the keep policy looks at, at one scale."""

    experiment: Experiment
    scale: Scale
    runs: list[PlannedRun]

    @functools.cached_property
    def run_ids(self) -> list[str]:
        """The planned runs' ids, in order (computed once: each hashes a whole config)."""
        return [r.cfg.run_id for r in self.runs]


@dataclass
class FreePlan:
    """Per finished run with weights: why its weights stay, or their bytes when they go."""

    keep: dict[str, str] = field(default_factory=dict)
    free: dict[str, int] = field(default_factory=dict)
    # Records that could not be read (their weights stay), files that killed writes left, and
    # once done, what became of each of those.
    skipped: list[Skipped] = field(default_factory=list)
    leftovers: list[Leftover] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)

    def summary(self, done: bool) -> str:
        """What is (or would be) freed, what stays by reason, and the records and files of
        killed writes it skipped or removed."""
        verb = "freed" if done else "would free"
        total = format_bytes(sum(self.free.values()))
        first = f"{verb} the weights of {len(self.free)} runs ({total})"
        reasons = Counter(self.keep.values())
        kept = ", ".join(f"{n} {why}" for why, n in reasons.most_common()) or "none"
        lines = [first, f"kept the weights of {len(self.keep)} runs: {kept}"]
        if self.skipped:
            lines.append(skipped_line(self.skipped, "their weights are kept"))
        if done:
            lines += self.cleaned
        elif self.leftovers:
            lines.append(
                f"would clean {len(self.leftovers)} file(s) left by killed writes, of runs no "
                "process holds then (staged records go to archive/; weights that may be a "
                "result's only copy stay):"
            )
            lines += [f"  {item.describe()}" for item in self.leftovers]
        return "\n".join(lines)


def latency_pending(record: Mapping[str, Any]) -> bool:
    """Whether a finished run asks for a latency measurement it does not have yet."""
    if not record.get("config", {}).get("latency", {}).get("measure", False):
        return False
    latency = record.get("metrics", {}).get("latency")
    return not isinstance(latency, dict) or "error" in latency


def _cell_key(row: Mapping[str, Any], with_goal: bool = True) -> tuple[Any, ...]:
    goal = row["goal"]
    goal_key = "free" if goal is None or (isinstance(goal, float) and math.isnan(goal)) else goal
    keys = [row[c] if c != "goal" else goal_key for c in CELL if with_goal or c != "goal"]
    return (*keys, row["tuned"])


def table_needs(
    considered: Considered, store_frame: pd.DataFrame, rules: TableRules | None = None
) -> dict[str, str]:
    """The runs of one table whose weights stay: its cells' selected configurations and the
    runs of cells that still miss runs (empty for a figure without a table)."""
    from benchmark.reporting.selection import select_cells

    layout = considered.experiment.layout(considered.scale)
    if layout is None:
        return {}
    plan = plan_frame(considered.runs, considered.run_ids)
    selected, missing = select_cells(layout, plan, store_frame, rules)
    chosen = {_cell_key(r) for r in selected.to_dict("records")}
    chosen_free = {_cell_key(r, with_goal=False) for r in selected.to_dict("records")}
    open_cells = {
        _cell_key({**r, "tuned": ""}) for r in missing.to_dict("records") if r["missing"] > 0
    }
    out: dict[str, str] = {}
    for row in plan.to_dict("records"):
        free_goal = _cell_key(row)[2] == "free"
        if _cell_key({**row, "tuned": ""}) in open_cells:
            out[row["run_id"]] = INCOMPLETE
        elif (free_goal and _cell_key(row, with_goal=False) in chosen_free) or (
            _cell_key(row) in chosen
        ):
            out.setdefault(row["run_id"], SELECTED)
    return out


def parents_of(configs: Iterable[Any], records: Iterable[Mapping[str, Any]]) -> set[str]:
    """The run ids that a planned config or a stored record starts from (dense parents)."""
    from methods import get_method

    out = {r["parent_run_id"] for r in records if r.get("parent_run_id")}
    for cfg in configs:
        parent = get_method(cfg.method.name)(cfg).parent_config()
        if parent is not None:
            out.add(parent.run_id)
    return out


def plan_free(
    store_dir: str | Path,
    considered: Sequence[Considered],
    rules: TableRules | None = None,
) -> FreePlan:
    """Decide, for every finished run of the store that has weights, whether they stay."""
    from benchmark.store.frame import load_store

    store = Store(store_dir)
    records = store.records()
    frame = load_store(store_dir)
    configs = {rid: r.cfg for c in considered for r, rid in zip(c.runs, c.run_ids, strict=True)}
    planned = set(configs)
    parents = parents_of(configs.values(), records)
    needs: dict[str, str] = {}
    for item in considered:
        for rid, why in table_needs(item, frame, rules).items():
            if needs.get(rid) != SELECTED:
                needs[rid] = why
    plan = FreePlan(skipped=list(store.skipped.values()), leftovers=find_leftovers(store))
    for record in records:
        rid = record["run_id"]
        weights = store.weights_path(rid)
        if record.get("status") != FINISHED or not weights.exists():
            continue
        if rid in parents or record.get("method") == "dense":
            plan.keep[rid] = PARENT
        elif latency_pending(record):
            plan.keep[rid] = LATENCY
        elif rid in needs:
            plan.keep[rid] = needs[rid]
        elif rid not in planned:
            plan.keep[rid] = UNPLANNED
        elif store.lock_held(f"run-{rid}"):
            plan.keep[rid] = RUNNING  # as free_weights will find it: the dry run agrees
        else:
            plan.free[rid] = weights.stat().st_size
    return plan


def free_weights(store_dir: str | Path, plan: FreePlan) -> FreePlan:
    """Delete the weights ``plan`` frees, each under its run's lock (a run that is running now
    keeps them), and the files killed writes left (:func:`benchmark.store.leftovers.
    clean_leftovers`); returns what was done."""
    store = Store(store_dir)
    done = FreePlan(keep=dict(plan.keep), skipped=plan.skipped, leftovers=plan.leftovers)
    done.cleaned = clean_leftovers(store, plan.leftovers)
    for rid, size in plan.free.items():
        try:
            with store.lock(f"run-{rid}", wait=False):
                store.weights_path(rid).unlink(missing_ok=True)
        except RunLockedError:
            done.keep[rid] = RUNNING
            continue
        done.free[rid] = size
    return done


def kept_bytes_estimate(
    runs: Sequence[PlannedRun],
    sizes: Mapping[str, int],
    layout: Any,
    run_ids: Sequence[str] | None = None,
    parent_ids: Iterable[str] | None = None,
) -> int:
    """Before anything ran: the bytes ``--keep needed`` keeps of a table once it is complete:
    every dense run, and per cell one configuration's runs (per goal column for the methods
    whose sparsity is not set beforehand). ``sizes`` maps run ids to their packed bytes;
    ``run_ids`` (the runs' ids, in order) and ``parent_ids`` (their dense parents' ids) spare
    computing them again, when the caller has them."""
    from methods import get_method

    ids = [r.cfg.run_id for r in runs] if run_ids is None else list(run_ids)
    if parent_ids is None:
        parents = (get_method(r.cfg.method.name)(r.cfg).parent_config() for r in runs)
        parent_ids = {p.run_id for p in parents if p is not None}
    dense = {rid for rid, r in zip(ids, runs, strict=True) if r.cfg.method.name == "dense"}
    dense |= set(parent_ids)
    total = sum(sizes.get(rid, 0) for rid in dense)
    if layout is None:
        return total
    goals = {s: len(b.sparsities) for b in layout.blocks for s, _ in b.groups}
    cells: dict[tuple[Any, ...], dict[str, list[str]]] = {}
    seen: set[str] = set()
    for rid, r in zip(ids, runs, strict=True):
        if rid in dense or rid in seen:  # a run feeding several cells is kept once
            continue
        seen.add(rid)
        key = (r.section, r.row, r.sparsity, r.budget, r.x)
        cells.setdefault(key, {}).setdefault(r.tuned, []).append(rid)
    for key, configs in cells.items():
        per_config = [sum(sizes.get(rid, 0) for rid in ids) for ids in configs.values()]
        kept_configs = 1 if key[2] is not None else min(len(per_config), goals.get(key[0], 1))
        total += round(sum(per_config) / len(per_config) * kept_configs)
    return total
