"""IMP, BIMP and the Renda baseline: cycle plans, pruning per cycle, schedules, parents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import comparable, record_lrs, run_interrupted, run_uninterrupted, tiny_config

from benchmark.core.files import load_checkpoint
from benchmark.schedules.original import linear_decay
from benchmark.schedules.retraining import retrain_lrs
from benchmark.store.results import Store
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from methods.bimp import CyclePlan, cycle_targets, split_epochs


def test_split_epochs_gives_remainder_to_last_cycle() -> None:
    assert split_epochs(10, 3) == [3, 3, 4]
    assert split_epochs(6, 3) == [2, 2, 2]
    assert split_epochs(5, 1) == [5]


def test_each_cycle_prunes_the_same_fraction_of_what_remains() -> None:
    targets = cycle_targets(0.9, 3)
    q = 1 - (1 - 0.9) ** (1 / 3)
    remaining = [1.0] + [1 - t for t in targets]
    for before, after in zip(remaining, remaining[1:], strict=False):
        assert (before - after) / before == pytest.approx(q)
    assert targets[-1] == pytest.approx(0.9)


def test_cycle_plan_starts() -> None:
    plan = CyclePlan(initial_epochs=7, cycle_epochs=[1, 2], targets=[0.5, 0.9])
    assert plan.starts == [7, 8] and plan.total_epochs == 10


def test_bimp_prunes_at_cycle_starts_with_exact_sparsity(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "budget.epochs=6",
        "budget.initial_epochs=3",
        "budget.cycles=3",
        "method.sparsity=0.8",
    )
    record = execute(cfg)
    hist = record["history"]
    targets = cycle_targets(0.8, 3)
    assert [h["sparsity"] for h in hist] == pytest.approx([0, 0, 0, *targets], abs=1e-4)
    cycles = record["metrics"]["cycles"]
    assert [c["epoch"] for c in cycles] == [3, 4, 5]
    assert all(c["fraction_pruned"] == pytest.approx(1 - 0.2 ** (1 / 3), abs=1e-3) for c in cycles)
    # ALLR: d2 = E_cycle / T0, scale = min(max(d1, d2), 1)
    for c in cycles:
        assert c["d2"] == pytest.approx(1 / 3)
        assert c["scale"] == pytest.approx(min(max(c["d1"], c["d2"]), 1))
        assert 0 < c["relative_norm_drop"] < 1


def test_bimp_learning_rates_follow_initial_decay_and_retraining_schedule(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "budget.epochs=5",
        "budget.initial_epochs=3",
        "budget.cycles=1",
        "method.schedule=LLR",
        "schedule.lr=0.1",
    )
    trainer = Trainer(cfg)
    lrs = record_lrs(trainer)
    ipe = trainer.ipe
    initial = linear_decay(0.1, 3 * ipe)
    np.testing.assert_allclose(lrs[: 3 * ipe], initial)
    expected = retrain_lrs("LLR", 2 * ipe, initial)
    np.testing.assert_allclose(lrs[3 * ipe :], expected)
    assert expected[0] == 0.0 and max(expected) == pytest.approx(0.1)


def test_imp_trains_dense_parent_once_and_reuses_it(tmp_path: Path) -> None:
    store = tmp_path / "s"
    common = ["method.name=imp", "budget.cycles=1", "method.parent_epochs=2", "budget.epochs=2"]
    ft = execute(tiny_config(store, *common, "method.schedule=FT"))
    allr = execute(tiny_config(store, *common, "method.schedule=ALLR"))
    assert ft["parent_run_id"] == allr["parent_run_id"]
    parent = Store(store).read(ft["parent_run_id"])
    assert parent["status"] == "finished" and parent["method"] == "dense"
    assert len(parent["history"]) == 2
    dense_runs = [r for r in Store(store).records() if r["method"] == "dense"]
    assert len(dense_runs) == 1
    # IMP's history starts at the prune: the parent's epochs are not part of its budget
    assert len(ft["history"]) == 2 and ft["history"][0]["sparsity"] == pytest.approx(0.9, abs=1e-3)


def test_imp_from_parent_starts_from_parent_weights(tmp_path: Path) -> None:
    store = tmp_path / "s"
    cfg = tiny_config(
        store, "method.name=imp", "budget.cycles=1", "method.parent_epochs=2", "budget.epochs=1"
    )
    execute(cfg)
    parent_id = Store(store).read(cfg.run_id)["parent_run_id"]
    parent_state = load_checkpoint(Store(store).weights_path(parent_id))
    trainer = Trainer(cfg, None, parent_state)
    for key, value in trainer.model.state_dict().items():
        # On a GPU the model lives there; the parent's weights were saved from the CPU.
        assert torch.equal(value.cpu(), parent_state[key].cpu()), key


def test_ft_retrains_at_the_minimum_learning_rate(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "method.name=imp",
        "budget.cycles=1",
        "method.parent_epochs=3",
        "budget.epochs=1",
        "method.schedule=FT",
        "schedule.name=stepped",
        "schedule.milestones=[1, 2]",
        "schedule.values=[0.01, 0.001]",
    )
    execute(cfg)
    trainer = Trainer(cfg, None, None)
    trainer.method.on_epoch_start(0)
    assert [trainer.method.lr(i) for i in range(trainer.ipe)] == [
        pytest.approx(0.001)
    ] * trainer.ipe


def test_stability_is_measured_at_the_final_prune(tmp_path: Path) -> None:
    record = execute(
        tiny_config(
            tmp_path / "s",
            "budget.epochs=4",
            "budget.initial_epochs=3",
            "budget.cycles=1",
            "method.sparsity=0.95",
        )
    )
    st = record["metrics"]["stability"]
    assert st["acc_after"] < st["acc_before"]  # IMP is pruning-unstable at 95%
    assert st["pruning_stability"] == pytest.approx(
        1 - (st["acc_before"] - st["acc_after"]) / st["acc_before"]
    )


def test_renda_prunes_twenty_percent_per_cycle_with_lrw(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "s", "method.name=renda", "method.parent_epochs=1", "method.sparsity=0.5"
    )
    record = execute(cfg)
    cycles = record["metrics"]["cycles"]
    assert len(cycles) == 4  # 0.8^3 = 0.512 > 0.5 >= 0.8^4
    assert [c["target_sparsity"] for c in cycles] == pytest.approx([0.2, 0.36, 0.488, 0.5])
    assert len(record["history"]) == 4  # T_orig = 1 epoch per cycle
    assert record["metrics"]["sparsity"] == pytest.approx(0.5, abs=1e-3)


@pytest.mark.parametrize("criterion", ["global", "uniform", "erk", "lamp", "random"])
def test_criteria_reach_goal_sparsity(tmp_path: Path, criterion: str) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "budget.epochs=3",
        "budget.initial_epochs=2",
        "budget.cycles=1",
        f"method.criterion={criterion}",
    )
    assert execute(cfg)["metrics"]["sparsity"] == pytest.approx(0.9, abs=1e-3)


def test_structured_filter_pruning_zeroes_filters_and_bn_channels(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "budget.epochs=3",
        "budget.initial_epochs=2",
        "budget.cycles=1",
        "method.structured=true",
        "method.sparsity=0.5",
    )
    record = execute(cfg)
    weights = load_checkpoint(Store(cfg.output.dir).weights_path(cfg.run_id))
    convs = [k for k, v in weights.items() if k.endswith("weight") and v.dim() == 4]
    assert convs
    for name in convs:
        w = weights[name]
        dead = w.flatten(1).abs().sum(1) == 0
        assert int(dead.sum()) == round(0.5 * w.shape[0])
    assert record["metrics"]["speedup"] > 1
    assert comparable(run_interrupted(cfg, 2, tmp_path / "r")) == comparable(run_uninterrupted(cfg))


@pytest.mark.parametrize(
    "schedule", ["FT", "LRW", "SLR", "CLR", "LLR", "ALLR", "AccALLR", "ALLR-d1", "ALLR-d2"]
)
def test_every_retraining_schedule_runs(tmp_path: Path, schedule: str) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "method.name=imp",
        "budget.cycles=1",
        "method.parent_epochs=2",
        "budget.epochs=1",
        f"method.schedule={schedule}",
    )
    record = execute(cfg)
    assert record["metrics"]["sparsity"] == pytest.approx(0.9, abs=1e-3)
    if schedule == "AccALLR":
        c = record["metrics"]["cycles"][0]
        assert c["train_acc_after"] < c["train_acc_before"]


def test_tuned_schedule_requires_initial_lr(tmp_path: Path) -> None:
    from benchmark.core.errors import ConfigError

    with pytest.raises(ConfigError, match="method.initial_lr"):
        tiny_config(tmp_path / "s", "method.schedule=tuned-linear")
    cfg = tiny_config(
        tmp_path / "s",
        "method.schedule=tuned-linear",
        "method.initial_lr=0.05",
        "method.warmup_fraction=0.1",
    )
    assert execute(cfg)["status"] == "finished"


def test_retraining_weight_decay_grid_shares_one_parent(tmp_path: Path) -> None:
    store = tmp_path / "s"
    common = [
        "method.name=imp",
        "budget.cycles=1",
        "method.parent_epochs=1",
        "budget.epochs=1",
        "method.parent_weight_decay=5e-4",
    ]
    a = execute(tiny_config(store, *common, "optim.weight_decay=1e-4"))
    b = execute(tiny_config(store, *common, "optim.weight_decay=2e-4"))
    assert a["run_id"] != b["run_id"]
    assert a["parent_run_id"] == b["parent_run_id"]
    parent = Store(store).read(a["parent_run_id"])
    assert parent["config"]["optim"]["weight_decay"] == 5e-4
    with pytest.raises(Exception, match="method.parent_weight_decay"):
        tiny_config(store, *common[:-1], "method.parent_weight_decay=-1.0")


def test_bimp_presets_are_the_papers_grids_and_valid(tmp_path: Path) -> None:
    import itertools

    from methods import get_method

    presets = get_method("bimp").presets
    assert presets["cifar10"]["budget.initial_epochs"] == [20, 60, 100]
    assert presets["cifar100"]["budget.cycles"] == [1, 2, 3, 4]
    grid = presets["imagenet"]
    for t0, j in itertools.product(grid["budget.initial_epochs"], grid["budget.cycles"]):
        cfg = tiny_config(
            tmp_path, "budget.epochs=90", f"budget.initial_epochs={t0}", f"budget.cycles={j}"
        )
        assert cfg.budget.initial_epochs == t0


def test_first_bimp_cycle_starts_with_a_fresh_optimizer(tmp_path: Path) -> None:
    # The paper's code runs T0 training and the cycles as two runs: no momentum carries over.
    cfg = tiny_config(
        tmp_path / "s",
        "method.name='bimp'",
        "budget.epochs=4",
        "budget.initial_epochs=2",
        "budget.cycles=2",
    )
    trainer = Trainer(cfg)
    assert trainer.fit(stop_after=2) is None
    assert any("momentum_buffer" in s for s in trainer.optimizer.state.values())
    trainer.method.on_epoch_start(2)  # the first cycle prunes
    assert not any("momentum_buffer" in s for s in trainer.optimizer.state.values())
    # The second cycle keeps the optimizer (the reference's cycles share one run).
    trainer.fit(stop_after=3)
    trainer.method.on_epoch_start(3)
    assert any("momentum_buffer" in s for s in trainer.optimizer.state.values())
