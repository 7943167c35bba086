"""The contract every registered method passes (built-ins and plugins alike), on digits and on a
tiny problem of the other tasks (COCO-stand-in segmentation, WMT16-stand-in translation).

- the run finishes within its epoch budget;
- a method with specifiable sparsity ends at exactly the goal sparsity over P;
- the final weights are exact zeros where the final mask is zero, and the stored sparsity and
  speedup agree with the stored weights;
- stopping mid-way and resuming from the checkpoint gives the same final metrics;
- two runs with the same seed give the same result;
- while a hard mask is active, pruned weights stay zero after every optimizer step;
- a data-parallel run with 2 processes (gloo) equals the 1-process run with the same global batch.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import comparable, execute_float64, run_interrupted, tiny_config

from benchmark.config import RunConfig, replace_section
from benchmark.distributed import spawn
from benchmark.fakedata import write_coco, write_wmt16
from benchmark.metrics import sparsity_stats
from benchmark.runner import execute, parent_weights
from benchmark.store import Store
from benchmark.trainer import Trainer
from methods import METHODS, get_method, load_methods

load_methods()
ALL_METHODS = METHODS.names()
GOAL = 0.8
BUDGET = 4

# Overrides that keep each method's run to about a second (its dense parent included).
SMALL = {
    "imp": ["method.parent_epochs=2"],
    "renda": ["method.parent_epochs=1", "method.sparsity=0.5"],
}


# Every named option of a built-in method that changes how it trains: the paper code's
# behaviour is each method's default, these are the alternatives (and the steps label).
OPTIONS: list[tuple[str, tuple[str, ...]]] = [
    ("gmp", ("method.variant='hard'",)),
    ("gmp", ("method.steps=2",)),
    ("dpf", ("method.steps=2",)),
    ("gsm", ("method.rank_over='prunable'",)),
    ("gsm", ("method.recompute_bn=false",)),
    ("lc", ("method.rank_over='prunable'",)),
    ("lc", ("method.wd_schedule='geometric'",)),
    ("lc", ("method.recompute_bn=false",)),
    ("cs", ("method.decay='once'",)),
    ("dst", ("method.decay='once'",)),
]
CASES = [(name, ()) for name in ALL_METHODS] + [c for c in OPTIONS if c[0] in ALL_METHODS]


def contract_config(store: Path, name: str, options: tuple[str, ...] = ()) -> RunConfig:
    """A 4-epoch digits run of method ``name`` (with ``options``) at 80% goal sparsity."""
    return tiny_config(
        store,
        f"method.name={name}",
        f"method.sparsity={GOAL}",
        f"budget.epochs={BUDGET}",
        "budget.initial_epochs=2",
        "budget.cycles=2",
        *SMALL.get(name, []),
        *options,
    )


@pytest.fixture(params=CASES, ids=lambda c: "-".join([c[0], *(o[7:] for o in c[1])]))
def case(request: pytest.FixtureRequest) -> tuple[str, tuple[str, ...]]:
    return request.param


OTHER_TASKS = ("segmentation", "translation")


@pytest.fixture(scope="session")
def standin_roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stand-in files of the segmentation and translation problems (written once)."""
    return {
        "segmentation": write_coco(tmp_path_factory.mktemp("coco"), n_train=6, n_val=2),
        "translation": write_wmt16(tmp_path_factory.mktemp("wmt16"), 32, n_val=4, n_test=4),
    }


def task_overrides(task: str, root: Path) -> tuple[str, ...]:
    """The data and model of a task's tiny problem."""
    if task == "segmentation":
        data = ["data.name=coco", "model.name=deeplabv3_tiny", "data.crop_size=16"]
        data += ["data.batch_size=2", "data.workers=0", "data.val_fraction=0.4"]
    else:
        # Greedy decoding runs up to data.max_length tokens per evaluation.
        data = ["data.name=wmt16", "model.name=t5_tiny", "data.batch_size=16"]
        data += [f"eval.val_every={BUDGET}", "data.max_length=24"]
    # CPU: on CUDA, deterministic mode refuses the backward of bilinear upsampling (segmentation).
    return (*data, f"data.root={str(root)!r}", "runtime.device='cpu'")


def test_plugin_from_entry_point_is_registered() -> None:
    assert "prune-at-end" in ALL_METHODS


@pytest.mark.slow
def test_contract(case: tuple[str, tuple[str, ...]], tmp_path: Path) -> None:
    method_name, options = case
    check_contract(contract_config(tmp_path / "store", method_name, options), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("task", OTHER_TASKS)
@pytest.mark.parametrize("method_name", ALL_METHODS)
def test_contract_on_other_tasks(method_name: str, task: str, standin_roots, tmp_path) -> None:
    overrides = task_overrides(task, standin_roots[task])
    cfg = contract_config(tmp_path / "store", method_name, overrides)
    assert Trainer(cfg).task.name == task
    check_contract(cfg, tmp_path)


def check_contract(cfg: RunConfig, tmp_path: Path) -> None:
    """Run ``cfg`` and check every clause of the contract (see the module docstring)."""
    method_name = cfg.method.name
    method_cls = get_method(method_name)
    record = execute(cfg)
    m = record["metrics"]

    # within the epoch budget
    if method_cls.budget_fields:
        assert len(record["history"]) <= cfg.budget.epochs

    # exact goal sparsity over P
    if method_cls.info.sparsity_specifiable:
        assert m["num_prunable"] - m["nonzero_prunable"] == round(
            cfg.method.sparsity * m["num_prunable"]
        )

    # stored sparsity and speedup agree with the stored weights
    store = Store(cfg.output.dir)
    trainer = Trainer(cfg)
    trainer.model.load_state_dict(torch.load(store.weights_path(cfg.run_id)))
    stats = sparsity_stats(trainer.model, trainer.ctx.prunable)
    assert stats["sparsity"] == pytest.approx(m["sparsity"])
    assert stats["nonzero_prunable"] == m["nonzero_prunable"]
    speed = trainer.task.speedup(trainer.model, trainer.data)
    assert speed["speedup"] == pytest.approx(m["speedup"])

    # the same seed gives the same result; an interrupted run resumes exactly
    _, parent = parent_weights(cfg, store)
    again = Trainer(cfg, None, parent).fit()
    assert comparable(again) == comparable(m)
    assert comparable(run_interrupted(cfg, 2, tmp_path / "ckpt")) == comparable(m)


@pytest.mark.slow
def test_pruned_weights_stay_zero_after_every_step(
    case: tuple[str, tuple[str, ...]], tmp_path: Path
) -> None:
    method_name, options = case
    cfg = contract_config(tmp_path / "store", method_name, options)
    _, parent = parent_weights(cfg, Store(cfg.output.dir))
    trainer = Trainer(cfg, None, parent)
    method = trainer.method
    original = method.after_step
    checked = 0

    def after_step(step: int) -> None:
        nonlocal checked
        original(step)
        if method.masks_active:
            for p, mask in zip(trainer.ctx.masks.params, trainer.ctx.masks.masks, strict=True):
                assert torch.all(p.detach()[mask == 0] == 0), f"step {step}"
            checked += 1

    method.after_step = after_step  # type: ignore[method-assign]
    trainer.fit()
    final_masks = trainer.ctx.masks
    for p, mask in zip(final_masks.params, final_masks.masks, strict=True):
        assert torch.all(p.detach()[mask == 0] == 0)
    if method_name in ("imp", "bimp", "renda"):
        assert checked > 0  # hard methods are actually checked


def test_external_plugin_runs_from_the_command_line(tmp_path: Path) -> None:
    plugin_dir = Path(__file__).parent / "fixtures" / "plugin"
    env = {
        **os.environ,
        "PYTHONPATH": f"{plugin_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark.cli",
            "run",
            "--set",
            "method.name=prune-at-end",
            "--set",
            f"output.dir='{tmp_path}'",
            "--set",
            "logging.progress=false",
            "--set",
            "budget.epochs=2",
            "--set",
            "runtime.threads=1",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert "(prune-at-end): finished" in out.stdout
    assert "sparsity        0.9000" in out.stdout


# --------------------------------------------------------------------------- data-parallel runs
# Why float64 and global BatchNorm statistics: with per-rank statistics a BN model trained by 2
# processes normalises with 2 half batches, a different computation; and in float32 the ~1e-7
# differences of summation order grow through training (BN, lr 0.1) to ~1e-4 in the loss after
# a few epochs and can flip a magnitude-pruning decision at the threshold. In float64 the same
# growth stays near 1e-15, so equal accuracies and 1e-5 losses test the data-parallel logic:
# batch slices, loss scaling of the smaller last batch, gradient averaging, global BN, identical
# pruning decisions on every rank.


@contextmanager
def float64() -> Iterator[None]:
    """Run the body with float64 as torch's default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def parallel_config(store: Path, name: str) -> RunConfig:
    """The contract run with batch 256 (fewer steps) and global BatchNorm statistics."""
    cfg = contract_config(store, name)
    cfg = replace_section(cfg, runtime=dataclasses.replace(cfg.runtime, sync_bn=True))
    return replace_section(cfg, data=dataclasses.replace(cfg.data, batch_size=256))


@pytest.fixture(scope="module")
def one_and_two_processes(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Every method's run trained by 1 process (here) and by 2 processes (one process group)."""
    root = tmp_path_factory.mktemp("data-parallel")
    one = [parallel_config(root / "one", name) for name in ALL_METHODS]
    two = [parallel_config(root / "two", name) for name in ALL_METHODS]
    with float64():
        records_one = [execute(cfg) for cfg in one]
    spawn(execute_float64, 2, "cpu", two)
    store = Store(root / "two")
    return {
        cfg.method.name: (rec, store.read(cfg.run_id))
        for cfg, rec in zip(two, records_one, strict=True)
    }


@pytest.mark.slow
@pytest.mark.parametrize("method_name", ALL_METHODS)
def test_two_processes_equal_one_process(
    method_name: str, one_and_two_processes: dict[str, tuple[dict[str, Any], dict[str, Any]]]
) -> None:
    one, two = one_and_two_processes[method_name]
    assert two is not None and two["status"] == "finished"
    dp = two["distributed"]
    assert dp["processes"] == 2 and dp["backend"] == "gloo" and dp["sync_bn"]
    # The masks were compared across ranks after every epoch and after the final prune.
    assert dp["rank_checks"] == len(two["history"]) + 1
    m1, m2 = one["metrics"], two["metrics"]
    for split in ("test", "val"):
        assert m2[split]["top1"] == m1[split]["top1"], split
        assert m2[split]["loss"] == pytest.approx(m1[split]["loss"], rel=1e-5), split
    assert m2["nonzero_prunable"] == m1["nonzero_prunable"]
    losses = [h["train_loss"] for h in one["history"]]
    assert [h["train_loss"] for h in two["history"]] == pytest.approx(losses, rel=1e-5)
