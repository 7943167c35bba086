"""The flags that choose which part of a spec's plan a command works on, and how it is tuned.

``--methods/--sparsities/--seeds/--section`` cut a slice (``benchmark.experiments.slices``);
``--staged`` opts in to staged tuning (``benchmark.reporting.staged``). ``reproduce``, ``table``,
``plot`` and ``export`` share them, so a slice reproduced is the slice tabulated. The values are
parsed without torch; they are checked against the spec's plan before any run starts.
"""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.experiments.slices import Slice, parse_slice


def add_slice_args(p: argparse.ArgumentParser, *, staged: bool = True) -> None:
    """The slice flags (and ``--staged``) on a sub-command."""
    group = p.add_argument_group("a part of the spec (cells outside it are shown as missing)")
    group.add_argument(
        "--methods", default=None, help="comma-separated method names, e.g. bimp,gmp"
    )
    group.add_argument(
        "--sparsities", default=None, help="comma-separated goal sparsities in percent, e.g. 90,95"
    )
    group.add_argument("--seeds", default=None, help="comma-separated seeds, e.g. 0,1")
    group.add_argument(
        "--section", default=None, help="comma-separated sections, e.g. CIFAR-10 (the spec's)"
    )
    if staged:
        p.add_argument(
            "--staged",
            action="store_true",
            help="staged tuning: every configuration on the first seed, the other seeds only "
            "for each cell's configuration selected by validation (labelled as such)",
        )


def add_model_arg(p: argparse.ArgumentParser) -> None:
    """``--model NAME=FOLDER`` (repeatable): a language-model spec on your own checkpoint."""
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME=FOLDER",
        help="with --scale paper, a language-model spec: load model NAME (as a section names it, "
        "e.g. Llama-2-7B, or its Hub repo) and its tokenizer from the save_pretrained FOLDER "
        "(runs under that model's run ids; repeatable)",
    )


def experiment_of(args: argparse.Namespace, scale: str) -> Any:
    """The spec ``args.id`` at ``scale``, on the local models of ``--model`` when given."""
    from benchmark.experiments import get_experiment
    from benchmark.experiments.own_models import with_models

    return with_models(get_experiment(args.id), getattr(args, "model", None) or [], scale)


def slice_of(args: argparse.Namespace) -> Slice:
    """The slice the flags ask for (checked against a plan later)."""
    return parse_slice(
        getattr(args, "methods", None),
        getattr(args, "sparsities", None),
        getattr(args, "seeds", None),
        getattr(args, "section", None),
    )


@dataclass
class Chosen:
    """The part of an experiment's plan a command works on."""

    runs: list[Any]  # PlannedRun of the whole plan
    ids: list[str]  # their run ids, in the same order
    plan: Any  # the whole plan (DataFrame)
    sliced: Any  # the slice's rows of it
    within: Slice
    staged: Any = None  # a StagedPlan, with --staged

    @functools.cached_property
    def parents(self) -> Any:
        """The runs' dense parents (``training.passes.Parents``), each computed once for the
        cost, disk and staged views that ask."""
        from benchmark.training.passes import Parents

        return Parents()

    def pairs(self, run_ids: Any | None = None) -> list[tuple[str, Any]]:
        """(run id, config) of each distinct run of the slice (of ``run_ids`` only, when
        given), in plan order."""
        keep = set(self.sliced["run_id"]) if run_ids is None else set(run_ids)
        seen: dict[str, Any] = {}
        for run_id, r in zip(self.ids, self.runs, strict=True):
            if run_id in keep:
                seen.setdefault(run_id, r.cfg)
        return list(seen.items())

    def configs(self, run_ids: Any | None = None) -> list[Any]:
        """The distinct configs of the slice (of ``run_ids`` only, when given), in plan order."""
        return [cfg for _, cfg in self.pairs(run_ids)]

    def table_plan(self) -> Any:
        """What a table reports: the staged table's plan (plus every planned run outside the
        slice, shown as missing), else the whole plan."""
        if self.staged is None:
            return self.plan
        import pandas as pd

        outside = self.plan[~self.within.keeps(self.plan)]
        return pd.concat([self.staged.table_plan, outside], ignore_index=True)

    def store_view(self, store: Any) -> Any:
        """The store frame with only the slice's runs (those outside it count as missing)."""
        if self.within.everything or not len(store):
            return store
        return store[store["run_id"].isin(self.sliced["run_id"])]

    def labels(self) -> list[str]:
        """How the table or figure was built, when not by the full procedure."""
        from benchmark.reporting.staged import LABEL

        return [LABEL] if self.staged is not None else []


def choose(
    experiment: Any,
    scale: str,
    store: str | Path,
    within: Slice,
    *,
    staged: bool = False,
    rules: Any = None,
    runs: list[Any] | None = None,
) -> Chosen:
    """The slice of ``experiment``'s plan at ``scale`` (checked: a value the spec lacks is an
    error naming the flag), and its staged plan from the store in ``store`` with ``staged``."""
    from benchmark.experiments.base import plan_frame

    runs = experiment.runs(scale, store) if runs is None else runs
    ids = [r.cfg.run_id for r in runs]
    plan = plan_frame(runs, ids)
    within.check(plan, f"{experiment.id} at {scale} scale")
    sliced = within.apply(plan)
    chosen = Chosen(runs, ids, plan, sliced, within)
    if staged:
        from benchmark.reporting.staged import staged_plan
        from benchmark.store.frame import load_store
        from benchmark.training.passes import run_passes

        weight = {run_id: float(run_passes(c)) for run_id, c in chosen.pairs()}
        known = chosen.parents
        parents = {rid: p[0] for rid, c in chosen.pairs() if (p := known.of(rid, c)) is not None}
        layout = experiment.layout(scale)
        chosen.staged = staged_plan(sliced, load_store(store), layout, rules, weight, parents)
    return chosen


MAY_NEED = "dense parents stage 2 may need"


def parent_pairs(chosen: Chosen, parent_ids: list[str]) -> list[tuple[str, Any]]:
    """(run id, config) of the dense parents ``parent_ids`` of the slice's runs."""
    wanted = set(parent_ids)
    found: dict[str, Any] = {}
    for run_id, cfg in chosen.pairs():
        parent = chosen.parents.of(run_id, cfg)
        if parent is not None and parent[0] in wanted:
            found.setdefault(*parent)
    return list(found.items())


def parents_note(chosen: Chosen, store: Any) -> str:
    """``; + N dense parents ... (M missing)`` for the parents outside the slice's own runs,
    which the submission counts among its runs (and trains first); empty without them."""
    own = {run_id for run_id, _ in chosen.pairs()}
    parents = {
        parent[0]
        for run_id, cfg in chosen.pairs()
        if (parent := chosen.parents.of(run_id, cfg)) is not None and parent[0] not in own
    }
    if not parents:
        return ""
    missing = sum(not store.is_finished(run_id) for run_id in parents)
    plural = "s" if len(parents) > 1 else ""
    return f"; + {len(parents)} dense parent{plural} they start from ({missing} missing)"


def print_dry_run(
    experiment: Any, scale: str, chosen: Chosen, store: str, finished: set[str], args: Any
) -> None:
    """The dry run's cost: per table row, the dense parents and in total; with ``--staged``
    both plans' runs and device-hours."""
    from benchmark.cli.costs import cost_text, suggested_device

    groups: dict[str, list[tuple[str, Any]]] = {}
    by_id = dict(chosen.pairs())
    multi = chosen.sliced["section"].nunique() > 1
    rows = chosen.sliced.drop_duplicates("run_id")
    # Column by column: a paper-scale plan has thousands of rows, and to_dict costs ~0.1 s.
    for section, row, run_id in zip(rows["section"], rows["row"], rows["run_id"], strict=True):
        label = f"{section} / {row}" if multi else str(row)
        groups.setdefault(label, []).append((run_id, by_id[run_id]))
    device = getattr(args, "estimate_device", None)
    suggest = suggested_device(scale, getattr(args, "executor", "local"))
    heading = f" of {experiment.id} ({scale} scale" + (
        f"; slice: {chosen.within.label()})" if not chosen.within.everything else ")"
    )
    array = getattr(args, "array", 1) or 1
    layout = getattr(args, "array_layout", None)
    text, full = cost_text(
        groups,
        finished,
        store,
        device=device,
        heading=heading,
        suggest=suggest,
        array=array,
        parents=chosen.parents,
        layout=layout,
    )
    print(text, file=sys.stderr)
    for line in setup_measure_lines(experiment.id, scale, chosen, full.total.no_setup, finished):
        print(line, file=sys.stderr)
    if chosen.staged is None:
        return
    s = chosen.staged
    staged_ids = set(s.run_ids())
    staged_groups = {k: [p for p in v if p[0] in staged_ids] for k, v in groups.items()}
    if s.worst_parents:  # counted as runs of their own, like every dense parent
        staged_groups[MAY_NEED] = parent_pairs(chosen, s.worst_parents)
    _, est = cost_text(staged_groups, finished, store, device=device, suggest=suggest, array=array,
                       parents=chosen.parents, layout=layout)  # fmt: skip
    bound = "at most " if s.undecided else ""
    parents = f" and up to {len(s.worst_parents):,} more dense parents" if s.worst_parents else ""
    print(
        f"staged tuning (--staged): stage 1 (first seed, every configuration) "
        f"{s.stage1['run_id'].nunique():,} runs; stage 2 (other seeds of each cell's selected "
        f"configuration) {bound}{s.stage2['run_id'].nunique() + s.undecided:,} runs{parents} "
        f"({s.decided_cells} of {s.cells} cells selected so far)",
        file=sys.stderr,
    )
    for name, e, runs in (
        ("full procedure", full, full.total.runs),
        ("staged tuning ", est, est.total.runs),
    ):
        least = "at least " if e.total.at_dense_rate else ""
        hours = (
            f"{least}{e.total.all_hours:,.1f} device-hours"
            if e.total.known
            else "device-hours unknown"
        )
        print(
            f"  {name}: {bound if e is est else ''}{runs:,} runs, {e.total.passes:,} passes, "
            f"{hours}",
            file=sys.stderr,
        )


def setup_measure_lines(
    experiment_id: str, scale: str, chosen: Chosen, unmeasured: Any, finished: set[str]
) -> list[str]:
    """For each workload whose one-shot seconds nothing measured (``unmeasured``), the run of
    the slice that measures them (its first missing run of the fewest dataset passes, i.e. a
    one-shot prune without retraining where there is one) and the command that runs it."""
    import shlex

    from benchmark.launch.estimate import workload
    from benchmark.training.passes import run_passes

    by_id = dict(chosen.pairs())
    out = []
    for w in sorted(unmeasured, key=lambda w: w.text()):
        rows = [
            r
            for r in chosen.sliced.drop_duplicates("run_id").itertuples()
            if r.run_id not in finished and workload(by_id[r.run_id]) == w
        ]
        if not rows:
            continue
        # A prune that does not retrain: the fewest passes, and a pruned row before the dense.
        r = min(rows, key=lambda r: (run_passes(c := by_id[r.run_id]), c.method.sparsity == 0))
        out += [
            f"  {w.text()}: run {r.run_id} ({r.section} / {r.row}, seed {r.seed}) measures its "
            "one-shot seconds:",
            f"    prunebench reproduce {experiment_id} --scale {scale} --section "
            f"{shlex.quote(str(r.section))} "
            f"--methods {r.method} --seeds {r.seed}",
        ]
    return out
