"""The trainer: determinism, exact resume (also after SIGKILL), metrics, options, failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import comparable, record_lrs, run_interrupted, run_uninterrupted, tiny_config

from benchmark.core.files import load_checkpoint
from benchmark.store.results import Store
from benchmark.training.runner import execute
from benchmark.training.state import DivergenceError
from benchmark.training.trainer import Trainer, configure_kernels, resolve_device


def test_same_seed_same_result_different_seed_differs(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=2")
    a = comparable(run_uninterrupted(cfg))
    b = comparable(run_uninterrupted(cfg))
    assert a == b
    other = comparable(
        run_uninterrupted(
            tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=2", "seed=1")
        )
    )
    assert other["test"] != a["test"] or other["train_loss"] != a["train_loss"]


def test_resume_from_epoch_checkpoint_is_exact(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "s", "budget.epochs=5", "budget.initial_epochs=3")
    full = comparable(run_uninterrupted(cfg))
    for stop in (2, 3, 4):  # before, at and after the first prune
        assert comparable(run_interrupted(cfg, stop, tmp_path / f"c{stop}")) == full


def test_deterministic_kernels_are_chosen_for_gpus_only() -> None:
    cudnn = torch.backends.cudnn
    saved = (torch.are_deterministic_algorithms_enabled(), cudnn.deterministic, cudnn.benchmark)
    saved_env = os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    try:
        torch.use_deterministic_algorithms(False)
        configure_kernels(torch.device("cpu"), True)  # CPU kernels are reproducible already
        assert not torch.are_deterministic_algorithms_enabled()
        assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
        configure_kernels(torch.device("cuda"), True)
        assert torch.are_deterministic_algorithms_enabled()
        assert cudnn.deterministic and not cudnn.benchmark
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        configure_kernels(torch.device("cuda"), False)
        assert not torch.are_deterministic_algorithms_enabled()
        assert not cudnn.deterministic and cudnn.benchmark
    finally:
        torch.use_deterministic_algorithms(saved[0])
        cudnn.deterministic, cudnn.benchmark = saved[1], saved[2]
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        if saved_env is not None:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved_env


def test_checkpoint_of_another_run_is_ignored(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=2")
    ckpt = tmp_path / "x.pt"
    Trainer(cfg, ckpt).fit(stop_after=1)
    other = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=2", "seed=5")
    assert not Trainer(other, ckpt).try_resume()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "benchmark.cli", *args]


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_gives_identical_result(tmp_path: Path) -> None:
    """Kill a real `prunebench run` process with SIGKILL, resume it, compare to a clean run."""
    overrides = [
        "--set",
        "logging.progress=false",
        "--set",
        "runtime.threads=1",
        "--set",
        "runtime.deterministic=true",
        "--set",
        "budget.epochs=12",
        "--set",
        "budget.initial_epochs=8",
        "--set",
        "data.batch_size=32",
    ]
    killed_store, clean_store = tmp_path / "killed", tmp_path / "clean"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen(
        _cli("run", "--set", f"output.dir='{killed_store}'", *overrides),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ckpt_dir = killed_store / "checkpoints"
    deadline = time.time() + 120
    while time.time() < deadline and not any(ckpt_dir.glob("*.pt")):
        time.sleep(0.05)
    time.sleep(0.3)  # let it get into a later epoch
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert any(ckpt_dir.glob("*.pt")), "the run wrote no checkpoint before it was killed"
    assert not list(killed_store.glob("*.json")), "the run finished before it was killed"
    resumed = subprocess.run(
        _cli("run", "--resume", "--json", "--set", f"output.dir='{killed_store}'", *overrides),
        env=env,
        capture_output=True,
        text=True,
    )
    assert resumed.returncode == 0, resumed.stderr
    clean = subprocess.run(
        _cli("run", "--json", "--set", f"output.dir='{clean_store}'", *overrides),
        env=env,
        capture_output=True,
        text=True,
    )
    assert clean.returncode == 0, clean.stderr
    a, b = json.loads(resumed.stdout), json.loads(clean.stdout)
    assert a["resumed"] is True and b["resumed"] is False
    assert a["run_id"] == b["run_id"]
    assert comparable(a["metrics"]) == comparable(b["metrics"])
    strip = [{k: v for k, v in h.items()} for h in a["history"]]
    assert strip == b["history"]


def test_result_has_every_metric(tmp_path: Path) -> None:
    record = execute(tiny_config(tmp_path / "s", "budget.epochs=4", "budget.initial_epochs=2"))
    m = record["metrics"]
    assert 0 < m["test"]["top1"] <= 1 and "top5" not in m["test"]  # 10 classes: top-1 only
    assert 0 < m["val"]["top1"] <= 1
    assert m["sparsity"] == pytest.approx(0.9, abs=1e-3)
    assert 0 < m["sparsity_total"] < m["sparsity"]
    assert m["speedup"] > 1 and m["speedup_corrected"] > 1
    assert m["images_per_s"] > 0 and m["wall_seconds"] > 0
    assert 0 <= m["stability"]["pruning_stability"] <= 1.5
    assert len(m["cycles"]) == 2 and all("relative_norm_drop" in c for c in m["cycles"])
    assert len(record["history"]) == 4 and all("val" in h for h in record["history"])
    # test accuracy after every prune/retrain cycle
    assert [("test" in h) for h in record["history"]] == [False, False, True, True]
    env = record["environment"]
    assert env["torch"] == torch.__version__ and env["device"] == resolve_device("auto").type
    assert record["config"]["method"]["name"] == "bimp"


def test_evaluation_runs_in_eval_mode(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=1")
    trainer = Trainer(cfg)
    modes: list[bool] = []
    trainer.model.register_forward_pre_hook(lambda mod, inp: modes.append(mod.training))
    trainer.model.train()
    trainer.evaluate("val")
    assert modes and not any(modes)
    assert trainer.model.training  # restored


@pytest.mark.parametrize(
    "option",
    [
        "optim.label_smoothing=0.1",
        "optim.grad_clip=1.0",
        "optim.bf16=true",
        "optim.nesterov=false",
        "model.init=he_normal",
    ],
)
def test_optional_training_features_run(tmp_path: Path, option: str) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=1", option)
    metrics = run_uninterrupted(cfg)
    assert metrics["test"]["top1"] > 0.2


@pytest.mark.parametrize(
    ("options", "nesterov"),
    [((), True), (("optim.weight_decay=0",), False), (("optim.nesterov=false",), False)],
)
def test_optimizer_uses_nesterov_as_the_papers_code_unless_set(
    tmp_path: Path, options: tuple[str, ...], nesterov: bool
) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=1", *options)
    groups = Trainer(cfg).optimizer.param_groups
    assert all(g["nesterov"] is nesterov for g in groups)


def test_learning_rate_is_set_per_iteration(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "method.name=dense",
        "budget.epochs=2",
        "schedule.name=linear",
        "schedule.lr=0.2",
    )
    trainer = Trainer(cfg)
    seen = record_lrs(trainer)
    n = 2 * trainer.ipe
    assert len(seen) == n
    assert seen[0] == pytest.approx(0.2)
    assert seen[1] == pytest.approx(0.2 * (1 - 1 / n))
    assert seen[-1] == pytest.approx(0.2 / n)


def test_diverging_run_is_recorded_as_failed(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=2", "schedule.lr=1e6")
    with pytest.raises(DivergenceError):
        execute(cfg)
    record = Store(cfg.output.dir).read(cfg.run_id)
    assert record["status"] == "failed"
    assert "DivergenceError" in record["error"]
    assert record["traceback"]


def test_post_training_finetune_keeps_zeros_and_reports_choice(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        "budget.epochs=3",
        "budget.initial_epochs=2",
        "budget.cycles=1",
        "finetune.epochs=2",
    )
    record = execute(cfg)
    m = record["metrics"]
    assert len(record["history"]) == 5
    assert m["finetune"]["epochs"] == 2 and isinstance(m["finetune"]["used"], bool)
    assert m["sparsity"] == pytest.approx(0.9, abs=1e-3)
    weights = load_checkpoint(Store(cfg.output.dir).weights_path(cfg.run_id))
    zeros = sum(
        int((w == 0).sum()) for k, w in weights.items() if k.endswith("weight") and w.dim() > 1
    )
    assert zeros >= int(0.9 * m["num_prunable"]) - 1
