"""K runs trained as one array model equal the same runs alone, and each stays a run.

An array computes each run's forward, gradient and step with other kernels than the run alone
(a grouped convolution, a [K, D] SGD step), so it is equal to the runs alone within float noise,
not bit for bit. The noise floor is measured here: the same runs alone at another thread count
(another split of every reduction). The array must stay within a small multiple of it in every
epoch's loss, within one test image in accuracy, and its final masks may differ only where
that noise flips a tie (counted).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.core.errors import ConfigError
from benchmark.core.files import load_checkpoint
from benchmark.store.results import Store
from benchmark.training.array import fit
from benchmark.training.array.check import BIMP, check_array, compare, four_runs, losses
from benchmark.training.array.fit import execute_array, form_arrays
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer

# Tests that compare an array with its runs alone within the CPU's noise floor (another thread
# count) run on the CPU: on a GPU, deterministic kernels make that floor zero (benchmark.bench.
# array's equality part checks a GPU against its own floor).
ON_CPU = "runtime.device='cpu'"


@pytest.mark.slow
def test_an_array_of_four_runs_equals_them_alone_within_the_float_noise_floor(
    tmp_path: Path,
) -> None:
    # The noise floor: the runs alone at 2 threads (another split of every reduction).
    comparison, array = check_array(tmp_path, "runtime.threads=2", extra=[ON_CPU])
    print(comparison.text())
    assert comparison.holds(), comparison.text()
    ids = [c.run_id for c in four_runs(tmp_path, ON_CPU)]
    for rid, many in zip(ids, array, strict=True):
        assert many["run_id"] == rid  # the run id does not change
        assert many["metrics"]["array"] == {"size": 4, "runs": ids, "layout": "vmap"}
        assert many["metrics"]["step"]["eager_iterations"] > 0


def test_the_check_fails_an_array_that_is_not_the_runs_alone(tmp_path: Path) -> None:
    # The comparison can fail: runs with other learning rates are no "array" of the runs alone.
    stores = (tmp_path / "alone", tmp_path / "rounded", tmp_path / "array")
    alone = [execute(four_runs(stores[0])[0])]
    rounded = [execute(four_runs(stores[1], "runtime.threads=2")[0])]
    other = tiny_config(stores[2], *BIMP, "method.criterion=global", "schedule.lr=0.09")
    differs = execute(other)
    differs["run_id"] = alone[0]["run_id"]
    Store(stores[2]).weights_path(other.run_id).rename(
        Store(stores[2]).weights_path(alone[0]["run_id"])
    )
    assert not compare(stores, alone, rounded, [differs]).holds()


def test_the_loop_layout_trains_what_vmap_trains(tmp_path: Path) -> None:
    dense = ["method.name=dense", "budget.epochs=1", ON_CPU]  # vmap's and loop's rounding
    cfgs = [tiny_config(tmp_path / s, *dense) for s in "ab"]
    second = [tiny_config(tmp_path / s, *dense, "seed=1") for s in "ab"]
    vmapped = execute_array([cfgs[0], second[0]], layout="vmap")
    looped = execute_array([cfgs[1], second[1]], layout="loop")
    for a, b in zip(vmapped, looped, strict=True):
        assert isinstance(a, dict) and isinstance(b, dict)
        assert losses(a) == pytest.approx(losses(b), rel=1e-5)
        assert b["metrics"]["array"]["layout"] == "loop"


def test_a_killed_array_resumes_every_run_exactly_where_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uninterrupted = execute_array(four_runs(tmp_path / "whole")[::3])
    original = Trainer.write_checkpoint

    def save_then_die(self: Trainer) -> None:
        original(self)
        if self.state.epoch == 2 and self.cfg.method.name == "gmp":
            raise SystemExit(3)  # the last run's checkpoint: every run has written epoch 2

    monkeypatch.setattr(Trainer, "write_checkpoint", save_then_die)
    with pytest.raises(SystemExit):
        execute_array(four_runs(tmp_path / "killed")[::3])
    monkeypatch.setattr(Trainer, "write_checkpoint", original)
    resumed = execute_array(four_runs(tmp_path / "killed")[::3])
    for whole, again in zip(uninterrupted, resumed, strict=True):
        assert isinstance(whole, dict) and isinstance(again, dict)
        assert again["resumed"] and losses(again) == losses(whole)
        w1 = load_checkpoint(Store(tmp_path / "whole").weights_path(whole["run_id"]))
        w2 = load_checkpoint(Store(tmp_path / "killed").weights_path(again["run_id"]))
        assert all(torch.equal(w1[k], w2[k]) for k in w1)


def test_a_diverging_run_ends_alone_and_the_others_finish(tmp_path: Path) -> None:
    good, _, _, other = four_runs(tmp_path / "three")
    diverging = tiny_config(
        tmp_path / "three", "method.name=dense", "budget.epochs=3", "schedule.lr=1e30"
    )
    # Run 0, whose model the array's forward takes its structure from, is the one that ends.
    out = execute_array([diverging, good, other])
    assert isinstance(out[0], Exception) and "training loss" in str(out[0])
    record = Store(tmp_path / "three").read(diverging.run_id)
    assert record is not None and record["status"] == "failed"
    # The others train what they train in an array without it (the loop layout: bit for bit).
    good, _, _, other = four_runs(tmp_path / "two")
    two = execute_array([good, other])
    for with_it, without in zip(out[1:], two, strict=True):
        assert isinstance(with_it, dict) and isinstance(without, dict)
        assert losses(with_it) == losses(without)
        assert with_it["metrics"]["test"] == without["metrics"]["test"]


def test_a_grid_forms_arrays_of_compatible_runs_and_packs_the_rest(tmp_path: Path) -> None:
    runs = four_runs(tmp_path)
    soft = tiny_config(tmp_path, "method.name=str", "budget.epochs=3")
    longer = tiny_config(tmp_path, "method.name=dense", "budget.epochs=4")
    # DPF's hook between backward and step runs per run: two DPF runs share an array of
    # their own, not one with the BIMP and GMP runs.
    dpfs = [
        tiny_config(tmp_path, "method.name=dpf", "budget.epochs=3", f"seed={s}") for s in (0, 1)
    ]
    arrays, rest, why = form_arrays([*runs, soft, longer, *dpfs], size=3)
    assert [[c.run_id for c in a] for a in arrays] == [
        [c.run_id for c in runs[:3]],
        [c.run_id for c in dpfs],
    ]
    assert [c.run_id for c in rest] == [soft.run_id, runs[3].run_id, longer.run_id]
    assert "per-iteration hook" in why[soft.run_id]
    assert "no other run" in why[longer.run_id]


def test_runs_that_cannot_share_an_array_are_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    soft = tiny_config(tmp_path, "method.name=str", "budget.epochs=3")
    with pytest.raises(ConfigError, match="array"):
        execute_array([four_runs(tmp_path)[0], soft])
    dpf = tiny_config(tmp_path, "method.name=dpf", "budget.epochs=3")
    with pytest.raises(ConfigError, match="the same method when it has a before_step hook"):
        execute_array([four_runs(tmp_path)[0], dpf])
    with pytest.raises(ConfigError, match="array-layout"):
        execute_array(four_runs(tmp_path)[:2], layout="grouped-by-hand")
    assert not list(tmp_path.rglob("*.json"))
    assert fit.why_not_fused(four_runs(tmp_path)[3]) == ""
    adamw = tiny_config(tmp_path, "method.name=dense", "budget.epochs=3", "optim.name=adamw")
    assert "SGD only" in fit.why_not_fused(adamw)
    with pytest.raises(ConfigError, match="array"):
        execute_array([four_runs(tmp_path)[0], adamw])


def test_runs_of_another_task_train_packed_not_as_an_array(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Language-model runs with the SGD optimizer pass the config checks, but their model takes
    keyword inputs and returns a structured output: they train packed, with the reason said."""
    from benchmark.config.parse import config_from_dict
    from benchmark.training.validation import validate

    def lm(seed: int):  # noqa: ANN202 - a RunConfig
        cfg = config_from_dict(
            {
                "seed": seed,
                "data": {"name": "pydoc", "max_length": 32, "batch_size": 4, "epoch_iters": 2},
                "model": {"name": "llama_tiny"},
                "method": {"name": "dense"},
                "budget": {"epochs": 1},
                "runtime": {"device": "cpu", "threads": 1},
                "logging": {"progress": False},
                "output": {"dir": str(tmp_path / "runs")},
            }
        )
        validate(cfg)
        return cfg

    out = execute_array([lm(0), lm(1)])
    assert all(isinstance(r, dict) and r["status"] == "finished" for r in out), out
    assert "packed, not as an array: the causal_lm task" in capsys.readouterr().err
    assert all("array" not in r["metrics"] for r in out)
