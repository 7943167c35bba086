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

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.core.files import load_checkpoint
from benchmark.store.results import Store
from benchmark.training.array import fit
from benchmark.training.array.check import BIMP, check_array, compare, four_runs, losses
from benchmark.training.array.fit import array_span, execute_array, form_arrays
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer

# Tests that compare an array with its runs alone within the CPU's noise floor (another thread
# count) run on the CPU: on a GPU, deterministic kernels make that floor zero (benchmark.bench.
# array's equality part checks a GPU against its own floor).
ON_CPU = "runtime.device='cpu'"


@pytest.mark.slow
def test_an_array_whose_slots_are_reused_equals_its_runs_alone_within_the_noise_floor(
    tmp_path: Path,
) -> None:
    # The noise floor: the runs alone at 2 threads (another split of every reduction). Three
    # slots: the fourth run takes the slot of the second (2 epochs) while the others train on.
    comparison, array = check_array(tmp_path, "runtime.threads=2", extra=[ON_CPU], slots=3)
    print(comparison.text())
    assert comparison.holds(), comparison.text()
    ids = [c.run_id for c in four_runs(tmp_path, ON_CPU)]
    beside = [ids, ids[:3], ids, [ids[0], ids[3], ids[2]]]
    for rid, many, runs in zip(ids, array, beside, strict=True):
        assert many["run_id"] == rid  # the run id does not change
        assert many["metrics"]["array"] == {"size": 3, "runs": runs, "layout": "vmap"}
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
    # Runs of any number of epochs share an array: a run that ends gives its slot to the next.
    longer = tiny_config(tmp_path, "method.name=dense", "budget.epochs=4")
    # DPF's hook between backward and step runs per run: two DPF runs share an array of
    # their own, not one with the BIMP and GMP runs.
    dpfs = [
        tiny_config(tmp_path, "method.name=dpf", "budget.epochs=3", f"seed={s}") for s in (0, 1)
    ]
    wider = tiny_config(tmp_path, "method.name=dense", "model.name=cnn_wide")
    arrays, rest, why = form_arrays([*runs, soft, longer, *dpfs, wider], size=3)
    # Longest first (4, 3, 3, 3 and 2 epochs): the shortest fill the slots at the end.
    assert [[c.run_id for c in a] for a in arrays] == [
        [c.run_id for c in (longer, runs[0], runs[2], runs[3], runs[1])],
        [c.run_id for c in dpfs],
    ]
    assert [c.run_id for c in rest] == [soft.run_id, wider.run_id]
    assert "per-iteration hook" in why[soft.run_id]
    assert "no other run" in why[wider.run_id]
    # Three slots: the 4-epoch run in one, the others in turn in the other two.
    assert array_span([4, 3, 3, 3, 2], 3) == 6 and array_span([4, 3, 3, 3, 2], 8) == 4


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


def test_runs_asking_for_different_compile_settings_never_share_an_array(tmp_path: Path) -> None:
    # An array's one step is compiled or not: a run's own runtime.compile is never overridden
    # by the setting of the run that happened to start the array.
    dense = ["method.name=dense", "budget.epochs=2", "runtime.device=cpu"]
    off, on = (
        tiny_config(tmp_path, *dense, f"runtime.compile={c}", f"seed={s}")
        for s, c in ((2, "off"), (0, "on"))
    )
    also_on = tiny_config(tmp_path, *dense, "runtime.compile=on", "seed=1")
    arrays, rest, why = form_arrays([off, on, also_on], size=4)
    assert [[c.run_id for c in a] for a in arrays] == [[on.run_id, also_on.run_id]]
    assert [c.run_id for c in rest] == [off.run_id] and why[off.run_id] == fit.ALONE
    with pytest.raises(ConfigError, match="runtime.compile"):
        execute_array([off, on])
    assert not list(tmp_path.rglob("*.json"))


def test_runs_whose_optimizers_group_their_parameters_differently_are_planned_apart(
    tmp_path: Path,
) -> None:
    # LC's decay variant ranking the prunable weights keeps them in an optimizer group of their
    # own: such runs cannot step one array's optimizer with runs that rank every parameter. The
    # plan says so (it used to count them as one array, then the job trained them packed).
    lc = ["method.name=lc", "budget.epochs=2", ON_CPU]
    every = tiny_config(tmp_path, *lc)
    prunable = [
        tiny_config(tmp_path, *lc, "method.rank_over=prunable", f"seed={s}") for s in (0, 1)
    ]
    arrays, rest, why = form_arrays([every, *prunable], size=4)
    assert [[c.run_id for c in a] for a in arrays] == [[c.run_id for c in prunable]]
    assert [c.run_id for c in rest] == [every.run_id] and why[every.run_id] == fit.ALONE
    lines: list[str] = []
    records = execute_array(prunable, log=lines.append)
    assert "as one array" in lines[0], lines
    assert all(isinstance(r, dict) and r["metrics"]["array"]["size"] == 2 for r in records)


def test_runs_that_would_train_packed_are_left_out_of_arrays_when_planned(tmp_path: Path) -> None:
    """What the run would find when it starts (its data set's task, its model's modules, the
    layout asked for) decides before it runs, so a dry run counts as arrays only what trains
    as arrays."""
    from benchmark.config.parse import config_from_dict

    def cfg(data: str, model: str, seed: int, **data_extra: object) -> RunConfig:
        return config_from_dict(
            {
                "seed": seed,
                "data": {"name": data, **data_extra},
                "model": {"name": model},
                "method": {"name": "dense"},
                "output": {"dir": str(tmp_path)},
            }
        )

    pairs = {
        "the causal_lm task": [cfg("pydoc", "llama_tiny", s, max_length=32) for s in (0, 1)],
        "the segmentation task": [cfg("coco", "deeplabv3_tiny", s) for s in (0, 1)],
        "draws random numbers in its forward (Dropout)": [
            cfg("cifar10", "wrn28_10", s) for s in (0, 1)
        ],
    }
    for reason, runs in pairs.items():
        arrays, rest, why = form_arrays(runs, 4)
        assert not arrays and rest == runs
        assert all(reason in why[c.run_id] for c in runs), why
    resnets = [cfg("imagenet", "resnet50", s) for s in (0, 1)]
    assert form_arrays(resnets, 4)[0] == [resnets]
    arrays, _, why = form_arrays(resnets, 4, "grouped")
    assert not arrays and "grouped array layout cannot run the model" in why[resnets[0].run_id]


def _same_runs(whole: list, again: list, stores: tuple[Path, Path]) -> None:
    """Every run of ``again`` (resumed) is bit for bit the uninterrupted one of ``whole``,
    and says it trained in the same array."""
    for one, other in zip(whole, again, strict=True):
        assert isinstance(one, dict) and isinstance(other, dict), other
        assert losses(other) == losses(one)
        assert other["metrics"]["test"] == one["metrics"]["test"]
        assert other["metrics"]["array"] == one["metrics"]["array"]
        w1 = load_checkpoint(Store(stores[0]).weights_path(one["run_id"]))
        w2 = load_checkpoint(Store(stores[1]).weights_path(other["run_id"]))
        assert all(torch.equal(w1[k], w2[k]) for k in w1)


def test_an_array_killed_between_its_runs_checkpoints_resumes_as_the_same_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill after one run has checkpointed an epoch and before the other has: the rerun
    trains them in one array again (one an epoch ahead of the other), as uninterrupted."""
    uninterrupted = execute_array(four_runs(tmp_path / "whole", ON_CPU)[::3])
    original = Trainer.write_checkpoint

    def save_then_die(self: Trainer) -> None:
        original(self)
        if self.state.epoch == 2 and self.cfg.method.name == "bimp":
            raise SystemExit(3)  # the BIMP run wrote epoch 2, the GMP run is at epoch 1

    monkeypatch.setattr(Trainer, "write_checkpoint", save_then_die)
    with pytest.raises(SystemExit):
        execute_array(four_runs(tmp_path / "killed", ON_CPU)[::3])
    monkeypatch.setattr(Trainer, "write_checkpoint", original)
    resumed = execute_array(four_runs(tmp_path / "killed", ON_CPU)[::3])
    assert all(r["resumed"] for r in resumed)
    _same_runs(uninterrupted, resumed, (tmp_path / "whole", tmp_path / "killed"))


def test_an_array_killed_in_its_runs_final_writes_finishes_the_others_in_an_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill right after the first run's result is written: the other run resumes from its
    checkpoint of the epoch before and trains its last epoch in an array (of one), not alone;
    its record names the array it trained in."""
    from benchmark.launch.task import GridTask
    from benchmark.training.runner import Session

    uninterrupted = execute_array(four_runs(tmp_path / "whole", ON_CPU)[::3])
    original = Session.finish

    def finish_then_die(self: Session, metrics: dict) -> dict:
        record = original(self, metrics)
        if self.cfg.method.name == "bimp":
            raise SystemExit(3)
        return record

    monkeypatch.setattr(Session, "finish", finish_then_die)
    with pytest.raises(SystemExit):
        execute_array(four_runs(tmp_path / "killed", ON_CPU)[::3])
    monkeypatch.setattr(Session, "finish", original)
    store = Store(tmp_path / "killed")
    first, last = four_runs(tmp_path / "killed", ON_CPU)[::3]
    assert store.is_finished(first.run_id) and not store.is_finished(last.run_id)
    # The job's rerun: the finished run is skipped, the other is the only one left.
    GridTask([first, last], array=4)()
    resumed = [store.read(first.run_id), store.read(last.run_id)]
    assert resumed[1]["resumed"]
    _same_runs(uninterrupted, resumed, (tmp_path / "whole", tmp_path / "killed"))


def _dense(store: Path, seed: int, epochs: int) -> RunConfig:
    return tiny_config(
        store, "method.name=dense", f"budget.epochs={epochs}", f"seed={seed}", ON_CPU
    )


def _weights(store: Path, run_id: str) -> dict[str, torch.Tensor]:
    return load_checkpoint(Store(store).weights_path(run_id))


def test_a_run_that_takes_a_freed_slot_trains_as_in_an_array_of_its_own(tmp_path: Path) -> None:
    """Three runs of 3, 1 and 2 epochs through 2 slots: the third takes the slot of the second
    while the first trains on. Its parameters, BatchNorm statistics and momentum are written
    into the slot (a stale row of the run before would change it), so on the CPU (loop
    layout: each run's arithmetic is its own) every run trains bit for bit what it trains
    with a slot of its own from the start."""

    def runs(store: str) -> list[RunConfig]:
        return [_dense(tmp_path / store, s, e) for s, e in ((0, 3), (1, 1), (2, 2))]

    together = execute_array(runs("three"))
    reused = execute_array(runs("two"), size=2)
    for one, other in zip(together, reused, strict=True):
        assert isinstance(one, dict) and isinstance(other, dict), other
        assert losses(other) == losses(one)
        assert other["metrics"]["test"] == one["metrics"]["test"]
        w1, w2 = (
            _weights(tmp_path / "three", one["run_id"]),
            _weights(tmp_path / "two", other["run_id"]),
        )
        assert all(torch.equal(w1[k], w2[k]) for k in w1)
    ids = [c.run_id for c in runs("two")]
    # Each record names the runs that stepped beside it: the first saw all three.
    assert [r["metrics"]["array"]["runs"] for r in reused] == [ids, ids[:2], [ids[0], ids[2]]]
    assert {r["metrics"]["array"]["size"] for r in reused} == {2}


def test_a_killed_array_whose_slots_were_reused_resumes_each_run_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed once the third run, in the second's slot, checkpointed its first epoch; the rerun
    (one slot: the runs in turn) resumes each run from its own checkpoint, the third written
    into the slot with its checkpoint's momentum, bit for bit as uninterrupted."""

    def runs(store: str) -> list[RunConfig]:
        return [_dense(tmp_path / store, s, e) for s, e in ((0, 3), (1, 1), (2, 2), (3, 1))]

    whole = execute_array(runs("whole"), size=2)
    original = Trainer.write_checkpoint

    def save_then_die(self: Trainer) -> None:
        original(self)
        if self.cfg.seed == 2 and self.state.epoch == 1:
            raise SystemExit(3)

    monkeypatch.setattr(Trainer, "write_checkpoint", save_then_die)
    with pytest.raises(SystemExit):
        execute_array(runs("killed"), size=2)
    monkeypatch.setattr(Trainer, "write_checkpoint", original)
    again = execute_array(runs("killed"), size=1)
    assert [r["resumed"] for r in again] == [True, False, True, False]  # the second had finished
    for one, other in zip(whole, again, strict=True):
        assert losses(other) == losses(one)
        w1, w2 = (
            _weights(tmp_path / "whole", one["run_id"]),
            _weights(tmp_path / "killed", other["run_id"]),
        )
        assert all(torch.equal(w1[k], w2[k]) for k in w1)
