"""The method contract (benchmark/contract.py) on every built-in method and the fixture plugin,
on digits and on a tiny problem of the other tasks (COCO-stand-in segmentation, WMT16-stand-in
translation).

Plugins installed on this machine are not part of this suite (a broken one must not fail it);
their authors run the same checks with ``prunebench check-method NAME``.
It also checks that a data-parallel run with 2 processes (gloo) equals the 1-process run with
the same global batch, for every method.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import env_with_path, execute_float64

from benchmark.config.parse import replace_section
from benchmark.config.run import RunConfig
from benchmark.data.fakedata import write_coco, write_wmt16
from benchmark.store.results import Store
from benchmark.training.contract import BUDGET, check_masks, check_run, contract_config, report
from benchmark.training.distributed import spawn
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from methods import METHODS, load_methods

FIXTURE_PLUGIN = "fixture-prune-at-end"
FIXTURE_MODULE = "prunebench_example_plugin"


def _ours(name: str) -> bool:
    module = METHODS.get(name).__module__
    return module.startswith("methods.") or module == FIXTURE_MODULE


load_methods()
ALL_METHODS = [n for n in METHODS.names() if _ours(n)]

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
    assert FIXTURE_PLUGIN in ALL_METHODS


@pytest.mark.slow
def test_contract(case: tuple[str, tuple[str, ...]], tmp_path: Path) -> None:
    method_name, options = case
    results = check_run(method_name, tmp_path, options)
    assert all(r.passed for r in results), report(results)


# Methods for every task (the language-model methods train causal_lm models only).
ANY_TASK = [n for n in ALL_METHODS if METHODS.get(n).tasks is None]


@pytest.mark.slow
@pytest.mark.parametrize("task", OTHER_TASKS)
@pytest.mark.parametrize("method_name", ANY_TASK)
def test_contract_on_other_tasks(method_name: str, task: str, standin_roots, tmp_path) -> None:
    overrides = task_overrides(task, standin_roots[task])
    assert Trainer(contract_config(tmp_path / "probe", method_name, overrides)).task.name == task
    results = check_run(method_name, tmp_path, overrides)
    assert all(r.passed for r in results), report(results)


@pytest.mark.slow
def test_pruned_weights_stay_zero_after_every_step(
    case: tuple[str, tuple[str, ...]], tmp_path: Path
) -> None:
    method_name, options = case
    result = check_masks(method_name, tmp_path, options)
    assert result.passed, result.line()
    if method_name in ("imp", "bimp", "renda"):
        assert result.count > 0, result.line()  # hard methods are actually checked


def test_external_plugin_runs_from_the_command_line(tmp_path: Path) -> None:
    plugin_dir = Path(__file__).parents[1] / "fixtures" / "plugin"
    env = env_with_path(plugin_dir)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark.cli",
            "run",
            "--set",
            f"method.name={FIXTURE_PLUGIN}",
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
    assert f"({FIXTURE_PLUGIN}): finished" in out.stdout
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
    # Not the LM methods: data-parallel runs of causal_lm datasets are refused (--nproc > 1).
    one = [parallel_config(root / "one", name) for name in ANY_TASK]
    two = [parallel_config(root / "two", name) for name in ANY_TASK]
    with float64():
        records_one = [execute(cfg) for cfg in one]
    spawn(execute_float64, 2, "cpu", two)
    store = Store(root / "two")
    return {
        cfg.method.name: (rec, store.read(cfg.run_id))
        for cfg, rec in zip(two, records_one, strict=True)
    }


@pytest.mark.slow
@pytest.mark.parametrize("method_name", ANY_TASK)
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


def test_a_mask_check_that_checked_no_step_says_skip_with_why(tmp_path: Path) -> None:
    # The fixture plugin prunes at the end: no step runs with a hard mask, so nothing was
    # checked step by step (issue 35: this printed PASS "after 0 masked steps").
    result = check_masks(FIXTURE_PLUGIN, tmp_path)
    assert result.skipped and result.count == 0 and result.passed
    assert result.line().startswith("SKIP  ") and "prunes at the end" in result.line()
    assert "PASS" not in result.line()


def test_a_method_whose_plugin_is_not_installed_gets_an_install_hint() -> None:
    from benchmark.core.errors import ConfigError
    from methods import get_method

    with pytest.raises(ConfigError) as err:
        get_method("my-prune-at-end")
    assert "method.name" in str(err.value) and "'bimp'" in str(err.value)
    assert "pip install" in str(err.value) and "prunebench.methods" in str(err.value)
