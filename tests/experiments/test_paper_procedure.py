"""The paper-scale specs plan the paper's procedure (Section 4.3, Appendix B/C): plans only, no
training. One test per difference of issue 12 that lives in the specs (the table rules are in
tests/reporting/test_tables.py)."""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pandas as pd
import pytest

from benchmark.config.run import RunConfig
from benchmark.experiments import get_experiment
from benchmark.experiments.base import PlannedRun, plan_frame
from benchmark.experiments.method_tables import MethodGrid, stepped_levels
from benchmark.experiments.problems import (
    MAXVIT_IMAGENET,
    RESNET50_IMAGENET,
    RESNET56_CIFAR10,
    WRN_CIFAR100,
)
from benchmark.experiments.schedule_tables import ScheduleTable
from benchmark.reporting.selection import aggregate
from methods import get_method

CIFAR_TABLES = ("stable-unstable-results", "appendix-cifar10-results", "appendix-cifar100-results")


@cache
def _runs(name: str) -> tuple[PlannedRun, ...]:
    return tuple(get_experiment(name).runs("paper", "/tmp/prunebench-plan"))


def _cifar(run: PlannedRun) -> bool:
    return run.cfg.data.name.startswith("cifar")


def _section(name: str, section: str) -> list[PlannedRun]:
    return [r for r in _runs(name) if r.section == section]


@pytest.mark.slow  # expands three paper grids (thousands of configs); cached for the others
@pytest.mark.parametrize("name", CIFAR_TABLES)
def test_cifar_comparisons_retrain_every_method_but_bimp_30_epochs_with_ft(name):
    runs = _runs(name)
    assert {r.cfg.finetune.epochs for r in runs if _cifar(r) and r.cfg.method.name != "bimp"} == {
        30
    }
    assert {r.cfg.finetune.epochs for r in runs if r.cfg.method.name == "bimp"} == {0}
    assert {r.cfg.finetune.epochs for r in runs if not _cifar(r)} <= {0}  # ImageNet: no FT


@pytest.mark.parametrize(
    ("name", "section", "parent_epochs"),
    [
        ("stable-unstable-results", "CIFAR-10", 200),
        ("stable-unstable-results", "ImageNet", 90),
        ("appendix-cifar100-results", "comparison", 200),
    ],
)
def test_lc_and_gsm_run_from_scratch_and_from_the_trained_dense_model(name, section, parent_epochs):
    for method in ("lc", "gsm"):
        runs = [r for r in _section(name, section) if r.cfg.method.name == method]
        pretrained = [r for r in runs if r.cfg.method.params.from_pretrained]
        scratch = [r for r in runs if not r.cfg.method.params.from_pretrained]
        assert {r.cfg.budget.epochs for r in pretrained} == {10, 20, 40}
        assert {r.cfg.method.params.parent_epochs for r in pretrained} == {parent_epochs}
        assert {r.cfg.budget.epochs for r in scratch} == {parent_epochs}
        # Every from-pretrained budget is tried at every setting of the scratch grid.
        assert len(pretrained) == 3 * len(scratch)
        parent = get_method(method)(pretrained[0].cfg).parent_config()
        assert parent is not None and parent.budget.epochs == parent_epochs


def _pretrained_parents(name: str) -> dict[tuple[str, int, float], dict[str, RunConfig]]:
    """(section, seed, weight decay) -> the dense parents of those from-pretrained LC/GSM runs."""
    out: dict[tuple[str, int, float], dict[str, RunConfig]] = {}
    for r in _runs(name):
        if r.cfg.method.name in ("lc", "gsm") and r.cfg.method.params.from_pretrained:
            parent = get_method(r.cfg.method.name)(r.cfg).parent_config()
            assert parent is not None
            key = (r.section, r.cfg.seed, r.cfg.optim.weight_decay)
            out.setdefault(key, {})[parent.run_id] = parent
    return out


@pytest.mark.parametrize(
    ("name", "problems"),
    [
        ("stable-unstable-results", {"CIFAR-10": RESNET56_CIFAR10, "ImageNet": RESNET50_IMAGENET}),
        ("appendix-cifar10-results", {"comparison": RESNET56_CIFAR10}),
        ("appendix-cifar100-results", {"comparison": WRN_CIFAR100}),
    ],
)
def test_pretrained_variants_of_a_seed_share_the_standard_dense_model(name, problems):
    parents = _pretrained_parents(name)
    # One parent per seed, problem and weight decay (the paper's code looks a parent up by the
    # run's weight decay), not one per tuned lr, schedule or momentum.
    assert {(s, seed) for s, seed, _ in parents} == {(s, seed) for s in problems for seed in (0, 1)}
    for (section, seed, wd), by_id in parents.items():
        assert len(by_id) == 1, (section, seed, wd)
        (parent,) = by_id.values()
        problem = problems[section]
        assert parent.seed == seed and parent.budget.epochs == problem.epochs
        assert parent.optim.weight_decay == wd
        assert parent.optim.momentum == 0.9
        schedule = {k: getattr(parent.schedule, k) for k in problem.schedule}
        assert schedule == dict(problem.schedule)


def test_pretrained_lc_gsm_and_imp_children_share_the_dense_parent():
    # The ResNet-56 of a weight decay trained for the retraining tables is the one LC/GSM of
    # that weight decay start from (1e-4 and 5e-4 are tuned by both).
    spec = get_experiment("appendix-schedule-comparison-cifar10-oneshot")
    imp = {
        get_method("imp")(r.cfg).parent_config().run_id  # type: ignore[union-attr]
        for r in spec.runs("paper", "/tmp/prunebench-plan")
        if r.cfg.model.name == "resnet56"
    }
    by_key = _pretrained_parents("appendix-cifar10-results")
    shared = {i for (_, _, wd), by_id in by_key.items() if wd in (1e-4, 5e-4) for i in by_id}
    assert len(imp) == 6 and len(shared) == 4 and shared <= imp


def test_the_better_of_scratch_and_pretrained_is_selected_per_cell():
    plan = plan_frame(_runs("stable-unstable-results"))
    lc = plan[(plan["section"] == "CIFAR-10") & (plan["row"] == "LC")].reset_index(drop=True)
    pretrained = lc["tuned"].str.contains("from_pretrained=True")
    # From the trained model wins at 90%, from scratch at 95% and 99%.
    val = np.where(pretrained == (lc["goal"] == 90.0), 0.9, 0.8)
    store = pd.DataFrame(
        {
            "run_id": lc["run_id"],
            "status": "finished",
            "val.top1": val,
            "test.top1": val,
            "sparsity": lc["goal"] / 100,
            "speedup": 1.0,
            "images_per_s": 1.0,
        }
    )
    best, _ = aggregate(lc, store)
    chosen = dict(
        zip(best["goal"], best["tuned"].str.contains("from_pretrained=True"), strict=True)
    )
    assert chosen == {90.0: True, 95.0: False, 99.0: False}


@pytest.mark.parametrize(
    ("problem", "lr", "values"),
    [
        (RESNET56_CIFAR10, 0.05, [0.005, 0.0005]),
        (RESNET56_CIFAR10, 0.2, [0.02, 0.002]),
        (WRN_CIFAR100, 0.05, [0.01, 0.002, 0.0004]),
        (WRN_CIFAR100, 0.15, [0.03, 0.006, 0.0012]),
    ],
)
def test_a_tuned_initial_lr_keeps_the_decay_factors(problem, lr, values):
    settings = {"schedule.name": "stepped", "schedule.lr": lr}
    assert stepped_levels(problem, settings, "relative") == {"schedule.values": values}
    assert stepped_levels(problem, settings, "absolute") == {}


@pytest.mark.parametrize("name", CIFAR_TABLES)
def test_the_planned_cifar_runs_decay_relative_to_their_initial_lr(name):
    for r in _runs(name):
        s = r.cfg.schedule
        if _cifar(r) and s.name == "stepped":
            base = RESNET56_CIFAR10 if r.cfg.data.name == "cifar10" else WRN_CIFAR100
            expected = [v * s.lr / base.schedule["lr"] for v in base.schedule["values"]]
            assert s.values == pytest.approx(expected)


def _schedules(runs: list[PlannedRun], label: str) -> set[tuple[str, float]]:
    return {(r.cfg.schedule.name, r.cfg.schedule.lr) for r in runs if r.row == label}


def test_every_method_adds_the_linear_schedule_where_the_paper_does():
    imagenet = _section("stable-unstable-results", "ImageNet")
    for label in ("GMP", "GSM", "DPF", "DNW", "LC", "STR", "DST"):
        assert _schedules(imagenet, label) == {("stepped", 0.1), ("linear", 0.1)}, label
    cifar100 = _section("appendix-cifar100-results", "comparison")
    # Stepped at each initial lr, linear only at 0.1 (CS included); BIMP trains its own schedule.
    stepped = {("stepped", lr) for lr in (0.05, 0.1, 0.15)}
    for label in ("GMP", "GSM", "DPF", "DNW", "LC", "STR", "CS", "DST"):
        assert _schedules(cifar100, label) == stepped | {("linear", 0.1)}, label
    assert _schedules(cifar100, "BIMP") == stepped
    assert {r.cfg.method.params.lr_schedule for r in cifar100 if r.row == "GMP"} == {"original"}
    cifar10 = _section("stable-unstable-results", "CIFAR-10")
    assert _schedules(cifar10, "CS") == {("stepped", 0.1)}  # CS: the original schedule only
    assert _schedules(cifar10, "GMP") == {("stepped", lr) for lr in (0.05, 0.1, 0.15, 0.2)}


def _values(runs: list[PlannedRun], method: str, field: str) -> set[float]:
    return {getattr(r.cfg.method.params, field) for r in runs if r.cfg.method.name == method}


def test_str_and_dst_also_plan_their_extended_grids():
    cifar10 = list(_runs("appendix-cifar10-results"))
    assert {-40, -30, -20, -10, -100, 100} <= _values(cifar10, "str", "s_init")
    extended = [r for r in cifar10 if r.row == "STR" and r.cfg.method.params.s_init == -20]
    assert {r.cfg.optim.weight_decay for r in extended} == {5e-5, 1e-4}
    assert {1e-7, 5e-7, 1e-6, 5e-4} <= _values(cifar10, "dst", "alpha")
    extended = [r for r in cifar10 if r.row == "DST" and r.cfg.method.params.alpha == 1e-7]
    assert {r.cfg.optim.weight_decay for r in extended} == {0.0, 1e-4}
    cifar100 = list(_runs("appendix-cifar100-results"))
    assert {-200, -150, -25, 0, -5000} <= _values(cifar100, "str", "s_init")
    assert len(_values(cifar100, "dst", "alpha")) == 18  # 5 + 14, 5e-4 in both


def _parents(spec: ScheduleTable) -> set[str]:
    return {
        get_method("imp")(r.cfg).parent_config().run_id  # type: ignore[union-attr]
        for r in spec.runs("paper", "/tmp/prunebench-plan")
    }


def test_retraining_weight_decays_each_start_from_their_own_dense_parent():
    spec = get_experiment("appendix-schedule-comparison-structured-c10")
    assert isinstance(spec, ScheduleTable)
    runs = spec.runs("paper", "/tmp/prunebench-plan")
    assert {r.cfg.optim.weight_decay for r in runs} == {1e-4, 2e-4, 5e-4}
    for r in runs[:50]:
        parent = get_method("imp")(r.cfg).parent_config()
        assert parent is not None and parent.optim.weight_decay == r.cfg.optim.weight_decay
    assert len(_parents(spec)) == 6  # one per (seed, weight decay), as the paper's code
    # The named option: one parent per seed, shared by every retraining weight decay.
    paper = spec.grids["paper"]
    standard = dataclasses.replace(paper.problem, parent_rule="standard")
    own = ScheduleTable(spec.id, spec.description, spec.grids["smoke"], paper)
    own.grids["paper"] = dataclasses.replace(paper, problem=standard)
    assert len(_parents(own)) == 2


def test_maxvit_trains_with_label_smoothing_and_gradient_clipping():
    runs = _runs("appendix-schedule-comparison-imagenet-maxvit")
    assert {(r.cfg.optim.label_smoothing, r.cfg.optim.grad_clip) for r in runs} == {(0.1, 1.0)}
    parent = get_method("imp")(runs[0].cfg).parent_config()
    assert parent is not None
    assert (parent.optim.label_smoothing, parent.optim.grad_clip) == (0.1, 1.0)
    assert MAXVIT_IMAGENET.extra["optim"] == {"label_smoothing": 0.1, "grad_clip": 1.0}


def test_method_grid_defaults_plan_no_ft_and_relative_decay():
    grid = MethodGrid(RESNET56_CIFAR10, (90,), ())
    assert (grid.finetune_epochs, grid.decay, grid.pretrained_epochs) == (
        0,
        "relative",
        (10, 20, 40),
    )
