"""Staged tuning: every configuration on the first seed, the other seeds only for the selected one.

The paper's procedure (and the default) trains every configuration of a cell with every seed and
selects the configuration with the best mean validation accuracy. Staged tuning (opt in with
``--staged``) spends less:

1. **stage 1**: the first seed of each cell, every configuration (a cell with one configuration
   runs all its seeds here: there is nothing to select);
2. each cell whose stage 1 is complete selects its configuration by validation exactly as the
   table does (:func:`benchmark.reporting.selection.select_cells`: the same metric, the same
   placing of methods without a goal sparsity), from the first seed alone;
3. **stage 2**: the other seeds of the selected configuration only.

The staged table reports the selected configuration of each cell (mean +- std over its seeds);
cells whose stage 1 is not complete show their stage-1 runs (missing or partial). It says so in
its title, and exports record it. Selecting on one seed instead of the mean over all of them may
pick another configuration than the full procedure: :func:`compare` counts the cells where it
does, when the full plan's runs are in the store.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmark.experiments.base import CELL, Experiment, Scale, TableLayout
from benchmark.reporting.selection import TableRules, join_store, select_cells

LABEL = "staged tuning: configurations selected on the first seed"
# A configuration of a cell; a method without a goal sparsity is planned with goal NaN and
# placed in a column only after training, so its key leaves the goal out.
CONFIG = [*CELL, "tuned"]
LOOSE = ["section", "row", "budget", "x", "tuned"]


@dataclass
class StagedPlan:
    """Both stages of a plan as far as the store decides them, and what the table reports."""

    full: pd.DataFrame
    stage1: pd.DataFrame
    # The other seeds of the configurations selected so far (cells with a complete stage 1).
    stage2: pd.DataFrame
    # The stage-2 runs the cells whose stage 1 is incomplete add at most (see _worst_case).
    worst_case: list[str]
    table_plan: pd.DataFrame
    selected: pd.DataFrame  # per cell (goal placed), the configuration stage 1 selected
    decided: frozenset[str]  # the cells (keys of _cell_of) whose stage 1 is complete
    cells: int
    # Dense parents (run ids) that the stage-2 runs of the undecided cells may need, whichever
    # configuration they select, beyond the parents of run_ids() (see _worst_parents).
    worst_parents: list[str] = dataclasses.field(default_factory=list)

    @property
    def decided_cells(self) -> int:
        """Cells that have selected their configuration."""
        return len(self.decided)

    @property
    def runs(self) -> int:
        """Distinct runs of both stages as decided now."""
        return len(set(self.stage1["run_id"]) | set(self.stage2["run_id"]))

    @property
    def undecided(self) -> int:
        """At most this many stage-2 runs are still to be decided."""
        return len(self.worst_case)

    @property
    def at_most(self) -> int:
        """Distinct runs of both stages once every cell has selected (an upper bound)."""
        return self.runs + self.undecided

    def run_ids(self, worst_case: bool = True) -> list[str]:
        """The runs of both stages (with the worst case of the undecided cells), once each."""
        ids = [*self.stage1["run_id"], *self.stage2["run_id"]]
        return list(dict.fromkeys(ids + (self.worst_case if worst_case else [])))


def _keys(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One string per row joining ``columns`` (NaN as "nan"), for set membership."""
    out = frame[columns[0]].map(str)
    for column in columns[1:]:
        out = out + "|" + frame[column].map(str)
    return out


def _cell_of(plan: pd.DataFrame) -> pd.Series:
    """The cell each planned run feeds before placement (goal NaN for unplaced methods)."""
    return _keys(plan, CELL)


def stage_one(plan: pd.DataFrame) -> pd.DataFrame:
    """Stage 1: the first seed of every configuration; every seed of single-configuration cells."""
    if plan.empty:
        return plan
    cell = _cell_of(plan)
    configs = plan.groupby(cell)["tuned"].transform("nunique")
    first = plan.groupby(cell)["seed"].transform("min")
    return plan[(plan["seed"] == first) | (configs == 1)].reset_index(drop=True)


def staged_plan(
    plan: pd.DataFrame,
    store: pd.DataFrame,
    layout: TableLayout | None,
    rules: TableRules | None = None,
    weight: Mapping[str, float] | None = None,
    parents: Mapping[str, str] | None = None,
) -> StagedPlan:
    """Both stages of ``plan`` given the finished runs of ``store`` (``weight``: run id ->
    cost, to bound the undecided cells by their most expensive configurations; ``parents``:
    run id -> the run id of its dense parent, to bound the parents stage 2 may add)."""
    stage1 = stage_one(plan)
    cells = _cell_of(plan)
    joined = join_store(stage1, store)
    complete = joined.groupby(_cell_of(stage1))["done"].all()
    decided = set(complete[complete].index)
    selected, _ = select_cells(layout, stage1[_cell_of(stage1).isin(decided)], store, rules)
    in_decided = cells.isin(decided)
    chosen = _matches(plan, selected)
    stage2 = plan[in_decided & chosen & ~plan["run_id"].isin(stage1["run_id"])]
    table_plan = pd.concat(
        [plan[in_decided & chosen], stage1[~_cell_of(stage1).isin(decided)]], ignore_index=True
    )
    staged = StagedPlan(
        full=plan,
        stage1=stage1,
        stage2=stage2.reset_index(drop=True),
        worst_case=_worst_case(plan[~in_decided], stage1, layout, weight),
        table_plan=table_plan.drop_duplicates(subset=[*CELL, "run_id"], ignore_index=True),
        selected=selected,
        decided=frozenset(decided),
        cells=int(cells.nunique()),
    )
    if parents:
        staged.worst_parents = _worst_parents(plan[~in_decided], staged, parents)
    return staged


def _worst_parents(
    undecided: pd.DataFrame, staged: StagedPlan, parents: Mapping[str, str]
) -> list[str]:
    """The dense parents of every stage-2 candidate of the undecided cells (any configuration
    may be selected, and configurations can start from different parents) that the runs of
    ``staged.run_ids()`` do not already need."""
    rest = undecided[~undecided["run_id"].isin(staged.stage1["run_id"])]
    known = {parents[r] for r in staged.run_ids() if r in parents}
    maybe = dict.fromkeys(parents[r] for r in rest["run_id"] if r in parents)
    return [p for p in maybe if p not in known]


def _matches(plan: pd.DataFrame, selected: pd.DataFrame) -> pd.Series:
    """Which planned runs belong to a selected configuration of their cell."""
    if selected.empty or plan.empty:
        return pd.Series(False, index=plan.index)
    exact = set(_keys(selected, CONFIG))
    loose = set(_keys(selected, LOOSE))
    unplaced = plan["goal"].isna()
    return (unplaced & _keys(plan, LOOSE).isin(loose)) | (
        ~unplaced & _keys(plan, CONFIG).isin(exact)
    )


def _worst_case(
    undecided: pd.DataFrame,
    stage1: pd.DataFrame,
    layout: TableLayout | None,
    weight: Mapping[str, float] | None,
) -> list[str]:
    """The stage-2 runs the undecided cells add at most: the other seeds of one configuration
    per cell (one per goal column for a method without a goal sparsity), the heaviest ones by
    ``weight`` (run id -> cost; every run 1 without it)."""
    rest = undecided[~undecided["run_id"].isin(stage1["run_id"])]
    if rest.empty:
        return []
    goals = {s: len(b.sparsities) for b in layout.blocks for s, _ in b.groups} if layout else {}
    out: list[str] = []
    for _, group in rest.groupby(_cell_of(rest), sort=False):
        by_config = {t: list(dict.fromkeys(g["run_id"])) for t, g in group.groupby("tuned")}

        def cost(ids: list[str]) -> float:
            return sum(weight.get(i, 1.0) for i in ids) if weight is not None else len(ids)

        ranked = sorted(by_config.values(), key=cost, reverse=True)
        free = bool(group["goal"].isna().iloc[0])
        columns = max(1, goals.get(group["section"].iloc[0], 1)) if free else 1
        for ids in ranked[:columns]:
            out += ids
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Comparison:
    """How the staged selection compares with the full procedure's, where both can select."""

    cells: int  # cells both procedures selected a configuration for
    changed: int  # of those, cells where they selected different configurations


def compare(
    staged: StagedPlan,
    store: pd.DataFrame,
    layout: TableLayout | None,
    rules: TableRules | None = None,
) -> Comparison | None:
    """Cells whose staged selection differs from the full procedure's (None unless every run of
    the full plan is finished in ``store``: only then does the full procedure select)."""
    joined = join_store(staged.full, store)
    if not bool(joined["done"].all()):
        return None
    full, _ = select_cells(layout, staged.full, store, rules)
    mine = staged.selected.set_index(CELL)["tuned"]
    theirs = full.set_index(CELL)["tuned"]
    both = mine.index.intersection(theirs.index)
    changed = int((mine.loc[both] != theirs.loc[both]).sum())
    return Comparison(cells=len(both), changed=changed)


def wall_seconds(plan: pd.DataFrame, store: pd.DataFrame) -> float:
    """Summed wall-clock seconds of the finished runs of ``plan`` (each run once)."""
    if "wall_seconds" not in store.columns or plan.empty:
        return 0.0
    done = store[store["status"].eq("finished") & store["run_id"].isin(plan["run_id"])]
    return float(done.drop_duplicates("run_id")["wall_seconds"].fillna(0.0).sum())


def skipped_seconds(staged: StagedPlan, store: pd.DataFrame) -> tuple[float, int]:
    """Wall-clock seconds staged tuning saves on the decided cells, and how many of the skipped
    runs were timed themselves (the others are estimated by the first-seed run of their
    configuration, which stage 1 trained)."""
    kept = set(staged.stage1["run_id"]) | set(staged.stage2["run_id"])
    decided = _cell_of(staged.full).isin(staged.decided)
    skipped = staged.full[decided & ~staged.full["run_id"].isin(kept)].drop_duplicates("run_id")
    if skipped.empty or "wall_seconds" not in store.columns:
        return 0.0, 0
    done = store[store["status"].eq("finished")].drop_duplicates("run_id")
    seconds = dict(zip(done["run_id"], done["wall_seconds"], strict=True))
    firsts = staged.stage1.drop_duplicates(LOOSE)
    by_config = dict(zip(_keys(firsts, LOOSE), firsts["run_id"].map(seconds.get), strict=True))
    total, timed = 0.0, 0
    for key, rid in zip(_keys(skipped, LOOSE), skipped["run_id"], strict=True):
        own = seconds.get(rid)
        if own is not None and not math.isnan(own):
            total, timed = total + own, timed + 1
        else:
            first = by_config.get(key)
            total += first if first is not None and not math.isnan(first) else 0.0
    return total, timed


def closing_note(
    staged: StagedPlan,
    store: pd.DataFrame,
    layout: TableLayout | None,
    rules: TableRules | None = None,
) -> str:
    """Both plans' run counts, the wall-clock saved and the cells whose selection changed."""
    full = staged.full["run_id"].nunique()
    runs = f"{staged.runs}" if not staged.undecided else f"at most {staged.at_most}"
    saved, timed = skipped_seconds(staged, store)
    skipped = full - staged.at_most
    how = "measured" if timed and timed == skipped else "estimated from each configuration's "
    how += "" if how == "measured" else "first-seed run"
    text = (
        f"staged tuning: {runs} runs instead of the full procedure's {full} "
        f"({full - staged.at_most} fewer); {staged.decided_cells} of {staged.cells} cells "
        f"selected on the first seed; wall-clock saved: {saved:.1f} s ({how})"
    )
    comparison = compare(staged, store, layout, rules)
    if comparison is None:
        return text + (
            "; cells whose selection differs from the full procedure: unknown until every run of "
            "the full plan is in the store"
        )
    return text + (
        f"; cells whose selection differs from the full procedure: {comparison.changed} of "
        f"{comparison.cells}"
    )


def staged_export(
    experiment: Experiment, scale: Scale, store_dir: str | Path, staged: StagedPlan
) -> pd.DataFrame:
    """The tidy export (``benchmark.reporting.export``) of every run staged tuning plans, with
    ``procedure`` = "staged" and ``selected`` marking the configuration each cell chose."""
    from benchmark.reporting.export import export_frame

    chosen = export_frame(experiment, scale, store_dir, plan=staged.table_plan, procedure="staged")
    both = pd.concat([staged.stage1, staged.stage2], ignore_index=True)
    shown = set(_keys(staged.table_plan, [*CELL, "run_id"]))
    rest = both[~_keys(both, [*CELL, "run_id"]).isin(shown)]
    if rest.empty:
        return chosen
    others = export_frame(experiment, scale, store_dir, plan=rest, procedure="staged")
    others["selected"] = False
    return pd.concat([chosen, others], ignore_index=True)
