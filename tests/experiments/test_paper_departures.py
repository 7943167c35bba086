"""The paper-scale specs follow the paper where issue 25 found them departing from it (items 2-5):
the main table's ImageNet GMP row, one dense-parent rule everywhere, the budgets where the
paper contradicts itself, and three small departures. Plans only, no training; each test plans
a cut-down grid so it takes seconds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmark.core.errors import ConfigError
from benchmark.experiments import get_experiment
from benchmark.experiments.base import PlannedRun, Problem
from benchmark.experiments.figure_specs import EnvelopeFigure, SelectionCriteriaFigure
from benchmark.experiments.method_tables import MethodGrid, MethodRow, MethodTable
from benchmark.experiments.problems import RESNET56_CIFAR10
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable
from methods import get_method


def _method_runs(grid: MethodGrid, tmp: Path) -> list[PlannedRun]:
    return MethodTable("t", "t", smoke=(grid,), paper=(grid,)).runs("paper", tmp)


def _parent_wd(run: PlannedRun) -> float:
    parent = get_method(run.cfg.method.name)(run.cfg).parent_config()
    assert parent is not None
    return parent.optim.weight_decay


# --------------------------------------------------------------------------- 25.2
def test_the_main_tables_imagenet_gmp_row_prunes_hard_every_5_or_10_epochs(tmp_path: Path) -> None:
    spec = get_experiment("stable-unstable-results")
    (imagenet,) = [g for g in spec.grids["paper"] if g.section == "ImageNet"]
    gmp = dataclasses.replace(imagenet, rows=tuple(r for r in imagenet.rows if r.label == "GMP"))
    runs = _method_runs(gmp, tmp_path)
    params = [r.cfg.method.params for r in runs]
    assert {p.variant for p in params} == {"hard"}
    assert {p.interval for p in params} == {5, 10} and {p.steps for p in params} == {0}
    # Stepped and linear schedules, weight decay 1e-4, lr 0.1 (tab:gmp-vs-bimp-imagenet).
    assert {r.cfg.schedule.name for r in runs} == {"stepped", "linear"}
    assert {(r.cfg.optim.weight_decay, r.cfg.schedule.lr) for r in runs} == {(1e-4, 0.1)}


# --------------------------------------------------------------------------- 25.3
def test_schedule_table_runs_start_from_the_parent_of_their_own_weight_decay(
    tmp_path: Path,
) -> None:
    spec = get_experiment("appendix-schedule-comparison-cifar10-oneshot")
    assert isinstance(spec, ScheduleTable)
    grid = dataclasses.replace(
        spec.grids["paper"], sparsities=(90,), budgets=("5%",), translations=("FT",), tuned=()
    )
    runs = ScheduleTable("t", "t", grid, grid).runs("paper", tmp_path)
    assert {r.cfg.optim.weight_decay for r in runs} == {1e-4, 2e-4, 5e-4}
    for run in runs:
        assert _parent_wd(run) == run.cfg.optim.weight_decay
    # The other rule, kept as a named option: one parent per seed, the standard weight decay.
    standard = dataclasses.replace(grid.problem, parent_rule="standard")
    shared = ScheduleTable("t", "t", grid, dataclasses.replace(grid, problem=standard))
    assert {_parent_wd(r) for r in shared.runs("paper", tmp_path)} == {1e-4}


@pytest.mark.parametrize("rule", ["per_weight_decay", "standard"])
def test_figures_and_lc_gsm_follow_the_same_parent_rule(rule: str, tmp_path: Path) -> None:
    problem = dataclasses.replace(RESNET56_CIFAR10, seeds=(0,), parent_rule=rule)
    expected = (lambda wd: wd) if rule == "per_weight_decay" else (lambda wd: 1e-4)
    envelope = get_experiment("cifar10-envelope")
    assert isinstance(envelope, EnvelopeFigure)
    env_grid = dataclasses.replace(
        envelope.grids["paper"], problem=problem, epochs_per_cycle=(10,), cycles=(1,)
    )
    criteria = get_experiment("appendix-confidence-cifar10-oneshot")
    assert isinstance(criteria, SelectionCriteriaFigure)
    crit_grid = dataclasses.replace(
        criteria.grids["paper"], problem=problem, sparsities=(90.0,), criteria=("global",)
    )
    runs = EnvelopeFigure("e", "e", env_grid, env_grid).runs("paper", tmp_path)
    runs += SelectionCriteriaFigure("c", "c", crit_grid, crit_grid).runs("paper", tmp_path)
    lc = MethodGrid(
        problem, (90,), (MethodRow("LC", "lc", pretrained=True),), pretrained_epochs=(10,)
    )
    runs += [r for r in _method_runs(lc, tmp_path) if r.cfg.method.params.from_pretrained]
    children = [r for r in runs if r.cfg.method.name != "dense"]
    assert {r.cfg.method.name for r in children} == {"imp", "renda", "lc"}
    for run in children:
        assert _parent_wd(run) == expected(run.cfg.optim.weight_decay), run.cfg.method.name
    # The envelope's dense reference is the parent its IMP children start from.
    imp_parents = {
        get_method("imp")(r.cfg).parent_config().run_id  # type: ignore[union-attr]
        for r in runs
        if r.cfg.method.name == "imp"
    }
    dense = {r.cfg.run_id for r in runs if r.cfg.method.name == "dense"}
    assert dense == imp_parents


def test_an_unknown_parent_rule_is_refused() -> None:
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(RESNET56_CIFAR10, parent_rule="shared")
    assert err.value.field == "parent_rule" and "per_weight_decay" in err.value.allowed


# --------------------------------------------------------------------------- 25.4
@pytest.mark.parametrize(
    "table", ["appendix-ALLR-d1d2-Comparison", "appendix-ALLR-AccALLR-Comparison"]
)
def test_allr_ablations_retrain_2_5_and_20_epochs(table: str, tmp_path: Path) -> None:
    spec = get_experiment(table)
    assert isinstance(spec, ScheduleTable)
    grid = dataclasses.replace(spec.grids["paper"], sparsities=(90,), translations=("ALLR",))
    runs = ScheduleTable("t", "t", grid, grid).runs("paper", tmp_path)
    epochs = {r.budget: r.cfg.budget.epochs for r in runs}
    assert epochs == {"2%": 2, "5%": 5, "20%": 20}


def test_structured_cifar10_retrains_its_captions_epochs(tmp_path: Path) -> None:
    # The one rule (as the ALLR ablations): a caption's epoch counts are trained, under the
    # printed labels: the caption's "15% (30 epochs)" is the header's "20%" column.
    spec = get_experiment("appendix-schedule-comparison-structured-c10")
    assert isinstance(spec, ScheduleTable)
    grid = dataclasses.replace(spec.grids["paper"], sparsities=(50,), translations=("FT",))
    runs = ScheduleTable("t", "t", grid, grid).runs("paper", tmp_path)
    assert {r.budget: r.cfg.budget.epochs for r in runs} == {"5%": 10, "10%": 20, "20%": 30}
    header = dataclasses.replace(grid, budget_epochs={})
    assert header.cycles_and_epochs("20%") == (1, 40)


def test_imagenet_gmp_ablation_keeps_the_standard_warm_up(tmp_path: Path) -> None:
    """The stepped and linear rows train the main table's GMP runs (5 warm-up epochs); the
    cyclic row restarts GMP's own decay at every pruning step."""
    ablation = get_experiment("gmp-vs-bimp-imagenet").runs("paper", tmp_path)
    main = get_experiment("stable-unstable-results").runs("paper", tmp_path)
    shared = {r.cfg.run_id for r in main if r.cfg.method.name == "gmp"}
    for label, schedule in (("stepped", "stepped"), ("linear", "linear")):
        rows = [r for r in ablation if r.row == f"GMP ({label})"]
        assert len(rows) == 12 and {r.cfg.run_id for r in rows} <= shared
        assert {(r.cfg.schedule.name, r.cfg.method.params.lr_schedule) for r in rows} == {
            (schedule, "original")
        }
        assert {r.cfg.schedule.warmup_epochs for r in rows} == {5.0}
    cyclic = [r for r in ablation if r.row == "GMP (cyclic)"]
    assert {r.cfg.method.params.lr_schedule for r in cyclic} == {"cyclic"}


# --------------------------------------------------------------------------- 25.5
def test_gmp_vs_bimp_cifar100_plans_no_finetuning(tmp_path: Path) -> None:
    spec = get_experiment("gmp-vs-bimp-cifar100")
    assert isinstance(spec, MethodTable)
    (grid,) = spec.grids["paper"]
    one = dataclasses.replace(grid, sparsities=(90,), rows=grid.rows[:1] + grid.rows[-1:])
    runs = _method_runs(one, tmp_path)
    assert {r.cfg.method.name for r in runs} == {"gmp", "bimp"}
    assert {r.cfg.finetune.epochs for r in runs} == {0}


def test_vgg16_layer_collapse_averages_three_seeds() -> None:
    spec = get_experiment("appendix-distribution-layer-collapse")
    assert isinstance(spec, SelectionCriteriaFigure)
    assert spec.grids["paper"].problem.seeds == (0, 1, 2)


def test_renda_runs_the_papers_2000_2800_and_3600_epochs(tmp_path: Path) -> None:
    envelope = get_experiment("cifar10-envelope")
    assert isinstance(envelope, EnvelopeFigure)
    problem = dataclasses.replace(RESNET56_CIFAR10, seeds=(0,), weight_decays=(1e-4,))
    grid = dataclasses.replace(
        envelope.grids["paper"], problem=problem, epochs_per_cycle=(10,), cycles=(1,)
    )
    runs = EnvelopeFigure("e", "e", grid, grid).runs("paper", tmp_path)
    renda = {r.sparsity: get_method("renda")(r.cfg) for r in runs if r.cfg.method.name == "renda"}
    assert {s: m.total_epochs() for s, m in renda.items()} == {90: 2000, 95: 2800, 98: 3600}
    assert renda[90].plan.targets[-1] == 0.9 and len(renda[90].plan.targets) == 10


@pytest.mark.parametrize("cycles", ["12", "-1"])
def test_renda_refuses_cycles_that_cannot_all_prune(cycles: str) -> None:
    from benchmark.training.validation import load_config

    with pytest.raises(ConfigError) as err:
        load_config(None, ["method.name=renda", "method.sparsity=0.9", f"method.cycles={cycles}"])
    assert err.value.field == "method.cycles" and "[1, 11]" in err.value.allowed


def test_problem_parent_rule_default_is_the_reference() -> None:
    assert Problem("p", {}, "m", 1, {}, (1e-4,), (0,)).parent_rule == "per_weight_decay"
    assert ScheduleGrid(RESNET56_CIFAR10, (90,), ("5%",)).cycles_and_epochs("5%") == (1, 10)
