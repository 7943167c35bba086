"""The captured-step fast path (benchmark.training.fast_step), exercised on the CPU.

CUDA graphs need a GPU; here a backend that "replays" by running the captured function again
drives the same control flow (capture keys, invalidation, warm-up, device learning rates,
accounting), and a backend whose capture fails drives the eager fallback.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import comparable, tiny_config

from benchmark.bench.check_fast_path import CASES, case_config
from benchmark.bench.pipeline import main as bench_pipeline_main
from benchmark.bench.pipeline import phase_lines, projected_minutes
from benchmark.cli.summary import _step_note
from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.models.registry import build_model
from benchmark.training.fast_step import (
    EAGER_WARMUP_ITERS,
    MAX_GRAPHS,
    CudaGraphBackend,
    DeviceLearningRates,
    FastPathWarning,
    RerunBackend,
    StepPlan,
    StepRunner,
    plan_step,
    uses_channels_last,
)
from benchmark.training.loop import TIMING_WARMUP_ITERS, is_warmup_batch
from benchmark.training.trainer import EPOCH_PHASES, Trainer
from benchmark.training.validation import validate
from methods import METHODS, get_method, load_methods
from methods.base import Method, hooks_graph_safe


class ReplayBackend(RerunBackend):
    """Reruns the step as a replay; ``delay`` seconds per capture stand in for the time a real
    capture takes."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.captures = 0

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        time.sleep(self.delay)
        self.captures += 1
        return super().capture(fn)


class FailingBackend:
    """A capture that always fails, as one that met a host synchronisation would."""

    def capture(self, fn: Callable[[], None]) -> Callable[[], None]:
        raise RuntimeError("operation not permitted when stream is capturing")


def fit(cfg: RunConfig, backend: Any = None, parent: Any = None) -> tuple[Trainer, dict]:
    trainer = Trainer(cfg, None, parent, graph_backend=backend)
    metrics = trainer.fit()
    assert metrics is not None
    return trainer, metrics


def history_losses(trainer: Trainer) -> list[float]:
    return [h["train_loss"] for h in trainer.state.history]


# --------------------------------------------------------------------------- declarations


def test_every_shipped_method_declares_graph_safe_hooks() -> None:
    from methods._llm import OneShotLM

    load_methods()
    for name in METHODS.names():
        cls = get_method(name)
        # The language-model methods retrain with AdamW, which the captured path was not
        # written for: they declare graph_safe = False and step eagerly.
        if issubclass(cls, OneShotLM):
            assert cls.graph_safe is False, name
        elif cls.__module__.startswith("methods."):
            assert cls.graph_safe is True, name
            assert hooks_graph_safe(cls), name


def test_an_undeclared_method_is_graph_safe_only_with_the_base_hooks() -> None:
    class KeepsBaseHooks(Method):
        name = "keeps-base-hooks"

    class OverridesAHook(Method):
        name = "overrides-a-hook"

        def before_step(self, step: int) -> None:
            pass

    class DeclaresUnsafe(Method):
        name = "declares-unsafe"
        graph_safe = False

    class DeclaresSafe(OverridesAHook):
        graph_safe = True

    class InheritsSafeHooks(DeclaresSafe):
        pass

    class OverridesADeclaredHook(DeclaresSafe):
        def after_step(self, step: int) -> None:
            pass

    class OwnReparametrization(get_method("str")):  # type: ignore[misc]
        def make_reparam(self, weight: torch.nn.Parameter) -> Any:
            return super().make_reparam(weight)

    class OwnBatchedPass(get_method("str")):  # type: ignore[misc]
        def batched_weights(self, layout: Any, weights: Any) -> Any:
            return super().batched_weights(layout, weights)

    assert hooks_graph_safe(KeepsBaseHooks)
    assert not hooks_graph_safe(OverridesAHook)
    assert not hooks_graph_safe(DeclaresUnsafe)
    assert hooks_graph_safe(DeclaresSafe)
    assert hooks_graph_safe(InheritsSafeHooks)
    # A parent's declaration covers the parent's code, not an override of it.
    assert not hooks_graph_safe(OverridesADeclaredHook)
    assert not hooks_graph_safe(OwnReparametrization)  # its parametrization runs in the forward
    assert not hooks_graph_safe(OwnBatchedPass)  # so does its batched pass
    assert hooks_graph_safe(type("PlainSTR", (get_method("str"),), {}))


def test_a_cuda_run_of_an_unsafe_method_steps_eagerly_with_one_warning_line() -> None:
    class Undeclared(Method):
        name = "undeclared"

        def after_step(self, step: int) -> None:
            pass

    with pytest.warns(FastPathWarning) as caught:
        plan = plan_step("auto", "cuda", 1, Undeclared, True, run_id="undeclared-1")
    assert plan == StepPlan(channels_last=True, why_eager=plan.why_eager)
    (warning,) = caught
    text = str(warning.message)
    assert "\n" not in text and "'undeclared'" in text and "Method.graph_safe" in text
    assert text.startswith("run undeclared-1: training steps run eagerly")
    assert plan.as_record()["mode"] == "eager" and "graph_safe" in plan.why_eager


def test_data_parallel_runs_step_eagerly_with_a_warning() -> None:
    with pytest.warns(FastPathWarning, match="data-parallel runs \\(2 processes\\)"):
        plan = plan_step("auto", "cuda", 2, get_method("dense"), False)
    assert not plan.capture and not plan.tensor_lr


def test_cpu_and_switched_off_runs_plan_eager_steps_silently() -> None:
    dense = get_method("dense")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plan_step("auto", "cpu", 1, dense, False) == StepPlan()
        assert plan_step("off", "cuda", 1, dense, True) == StepPlan(channels_last=True)
    assert plan_step("auto", "cuda", 1, dense, True) == StepPlan(True, True, True, "")


def test_runtime_switches_are_validated_naming_field_and_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        validate(tiny_config(tmp_path, "runtime.cuda_graphs='yes'"))
    assert "runtime.cuda_graphs" in str(err.value) and "'auto'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        validate(tiny_config(tmp_path, "runtime.channels_last=true"))
    assert "runtime.channels_last" in str(err.value) and "'off'" in str(err.value)


def test_runtime_switches_are_not_part_of_the_run_id(tmp_path: Path) -> None:
    base = tiny_config(tmp_path)
    off = tiny_config(tmp_path, "runtime.cuda_graphs='off'", "runtime.channels_last='on'")
    assert base.run_id == off.run_id


def test_channels_last_auto_means_conv_models_on_cuda() -> None:
    conv = build_model("resnet20", 10, (3, 32, 32))
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 2))
    assert uses_channels_last("auto", "cuda", conv)
    assert not uses_channels_last("auto", "cpu", conv)
    assert not uses_channels_last("auto", "cuda", mlp)
    assert uses_channels_last("on", "cpu", conv) and not uses_channels_last("off", "cuda", conv)


def test_channels_last_on_the_cpu_trains_to_the_same_losses(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, "method.name='dense'", "model.name='cnn_wide'", "budget.epochs=2")
    nhwc = tiny_config(tmp_path, "method.name='dense'", "model.name='cnn_wide'", "budget.epochs=2")
    nhwc.runtime.channels_last = "on"
    plain, _ = fit(cfg)
    last, metrics = fit(nhwc)
    conv = next(m for m in last.model.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert metrics["step"]["channels_last"] is True
    np.testing.assert_allclose(history_losses(last), history_losses(plain), rtol=1e-3)


# --------------------------------------------------------------------------- learning rates


def test_device_learning_rates_equal_the_eager_ones_at_every_step(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path,
        "method.name='dense'",
        "budget.epochs=3",
        "schedule.name='stepped'",
        "schedule.milestones=[1, 2]",
        "schedule.values=[0.013, 0.0017]",
        "schedule.warmup_epochs=0.5",
    )
    trainer = Trainer(cfg)
    opt = trainer.optimizer
    opt.param_groups[0]["lr_scale"] = 0.3  # a group at a scaled learning rate
    lrs = DeviceLearningRates(opt, trainer.device)
    for step in range(trainer.total_epochs * trainer.ipe):
        lr = trainer.lr_at(step, step // trainer.ipe)
        lrs.set(lr)
        for group in opt.param_groups:
            # The float32 value the SGD kernel computes with when given the Python float.
            expected = np.float32(lr * group.get("lr_scale", 1.0))
            assert group["lr"].dtype == torch.float32 and group["lr"].item() == expected


def test_device_learning_rates_survive_loading_an_optimizer_state(tmp_path: Path) -> None:
    trainer = Trainer(tiny_config(tmp_path, "method.name='dense'"))
    lrs = DeviceLearningRates(trainer.optimizer, trainer.device)
    saved = trainer.optimizer.state_dict()
    saved["param_groups"][0]["lr"] = 0.25  # an eager run's checkpoint holds a float
    trainer.optimizer.load_state_dict(saved)
    lrs.install()
    lrs.set(0.5)
    assert all(g["lr"].item() == 0.5 for g in trainer.optimizer.param_groups)


def test_fused_sgd_with_a_tensor_lr_matches_the_eager_step() -> None:
    torch.manual_seed(0)
    params = [torch.randn(50, 20), torch.randn(20)]
    grads = [[torch.randn_like(p) for p in params] for _ in range(5)]
    results = []
    for fused in (False, True):
        ps = [torch.nn.Parameter(p.clone()) for p in params]
        opt = torch.optim.SGD(
            ps, lr=0.0, momentum=0.9, nesterov=True, weight_decay=5e-4, fused=fused or None
        )
        lrs = DeviceLearningRates(opt, torch.device("cpu")) if fused else None
        for k, step_grads in enumerate(grads):
            lr = 0.1 / (k + 1)
            if lrs is not None:
                lrs.set(lr)
            else:
                opt.param_groups[0]["lr"] = lr
            for p, g in zip(ps, step_grads, strict=True):
                p.grad = g.clone()
            opt.step()
        results.append([p.detach() for p in ps])
    for eager, fused in zip(*results, strict=True):
        torch.testing.assert_close(fused, eager, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- the runner


@pytest.mark.parametrize("case", list(CASES))
def test_replayed_steps_equal_eager_steps_bit_for_bit(tmp_path: Path, case: str) -> None:
    cfg = case_config(tmp_path / "s", case)
    replayed, metrics = fit(cfg, ReplayBackend())
    with pytest.warns(FastPathWarning, match="capturing the step failed"):
        eager, eager_metrics = fit(cfg, FailingBackend())
    assert metrics["step"]["mode"] == "cuda_graphs" and metrics["step"]["replays"] > 0
    assert eager_metrics["step"]["mode"] == "eager"
    assert eager_metrics["step"]["captures"] == 0
    assert comparable(metrics) == comparable(eager_metrics)
    states = replayed.model.state_dict(), eager.model.state_dict()
    for a, b in zip(states[0].values(), states[1].values(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("case", ["dense", "gmp", "cs", "lc"])
def test_the_fast_path_trains_as_the_eager_loop_within_float_noise(
    tmp_path: Path, case: str
) -> None:
    # Fused SGD with a tensor learning rate against the foreach step with a Python one: the
    # issue's bound for the GPU (per-epoch train loss within 1e-3 relative over a 2-epoch run)
    # holds here too. (Longer, CS's growing temperature amplifies the float noise.)
    cfg = case_config(tmp_path / "s", case, "budget.epochs=2", "finetune.epochs=0")
    fast, _ = fit(cfg, ReplayBackend())
    plain, _ = fit(cfg)
    np.testing.assert_allclose(history_losses(fast), history_losses(plain), rtol=1e-3)


def test_graphs_are_captured_once_per_epoch_and_refreshes_keep_them(tmp_path: Path) -> None:
    for case in ("dense", "dpf"):
        backend = ReplayBackend()
        trainer, metrics = fit(case_config(tmp_path / case, case), backend)
        epochs = trainer.total_epochs
        # Every epoch captures once: DPF's refreshes between iterations write in place.
        assert metrics["step"]["captures"] == backend.captures == epochs, case
        # Eager: the process's warm-up, and each epoch's shorter last batch.
        short = trainer.data.num_train % trainer.data.batch_size != 0
        assert metrics["step"]["eager_iterations"] == EAGER_WARMUP_ITERS + short * epochs
        iterations = epochs * trainer.ipe
        assert metrics["step"]["replays"] + metrics["step"]["eager_iterations"] == iterations


def test_a_capture_key_change_captures_a_new_graph(tmp_path: Path) -> None:
    # LC's L/C variant bakes mu into its penalty step: a new mu every 4 iterations.
    backend = ReplayBackend()
    held: list[int] = []
    trainer = Trainer(case_config(tmp_path, "lc", "finetune.epochs=0"), graph_backend=backend)
    capture = trainer.runner._capture

    def recording(*args: Any) -> Any:
        out = capture(*args)
        held.append(len(trainer.runner.graphs))
        return out

    trainer.runner._capture = recording  # type: ignore[method-assign]
    metrics = trainer.fit()
    assert metrics is not None
    mus = {trainer.method.mu(s) for s in range(trainer.total_epochs * trainer.ipe)}
    assert len(mus) > trainer.total_epochs
    assert metrics["step"]["captures"] >= len(mus)
    # Superseded graphs are dropped: never more than MAX_GRAPHS memory pools at once.
    assert max(held) == MAX_GRAPHS < len(mus)


def test_batches_of_other_shapes_step_eagerly_without_a_graph_of_their_own() -> None:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x: torch.Tensor, y: torch.Tensor, k: int) -> None:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    plan = StepPlan(capture=True, tensor_lr=False)
    runner = StepRunner(plan, step, lambda k: (), opt, torch.device("cpu"), ReplayBackend())
    sizes = [4, 4, 4, 4, 6, 4, 4]  # a batch of another shape at iteration 4
    for k, n in enumerate(sizes):
        runner.run(torch.randn(n, 3), torch.randn(n, 2), k)
    assert runner.stats.eager == EAGER_WARMUP_ITERS + 1  # the warm-up, and the odd batch
    assert runner.stats.captures == 2  # the odd batch's eager step dropped the first graph
    assert runner.stats.replays == len(sizes) - runner.stats.eager


def test_capture_time_is_reported_apart_from_training_time(tmp_path: Path) -> None:
    delay = 0.2
    trainer, metrics = fit(case_config(tmp_path, "dense"), ReplayBackend(delay=delay))
    captures = metrics["step"]["captures"]
    assert metrics["compile_seconds"] >= captures * delay
    seconds = trainer.state.throughput.seconds
    # Every capture happened inside an epoch's timed iterations, yet none is in the timing.
    assert seconds < metrics["wall_seconds"] - captures * delay
    assert metrics["images_per_s"] == pytest.approx(trainer.state.throughput.images / seconds)
    assert len(metrics["epoch_seconds"]) == trainer.total_epochs
    assert sum(metrics["epoch_seconds"]) <= metrics["wall_seconds"]


def test_a_new_batch_shape_is_warm_up_not_training_time(tmp_path: Path) -> None:
    cfg = case_config(tmp_path, "dense", "data.batch_size=100")
    trainer = Trainer(cfg, None, None, graph_backend=ReplayBackend())
    batch, short = 100, trainer.data.num_train % 100
    assert short > 0 and trainer.ipe > TIMING_WARMUP_ITERS + 1
    delay = 0.25
    run = trainer.runner.run

    def slow_short_batches(x: torch.Tensor, y: torch.Tensor, step: int) -> float:
        if x.shape[0] != batch:
            time.sleep(delay)  # what cuDNN autotuning costs a new shape on a GPU
        return run(x, y, step)

    trainer.runner.run = slow_short_batches  # type: ignore[method-assign]
    metrics = trainer.fit()
    assert metrics is not None
    epochs = trainer.total_epochs
    # Only the first short batch is warm-up: later ones are timed (and counted) as training.
    assert delay <= metrics["warmup_seconds"] < 2 * delay
    timed = epochs * (trainer.data.num_train - TIMING_WARMUP_ITERS * batch) - short
    assert trainer.state.throughput.images == timed
    assert trainer.state.throughput.seconds >= (epochs - 1) * delay
    phases = metrics["epoch_phases"]
    assert len(phases) == epochs and all(set(p) == set(EPOCH_PHASES) for p in phases)
    assert phases[0]["warmup"] >= delay and all(p["warmup"] == 0.0 for p in phases[1:])
    for wall, part in zip(metrics["epoch_seconds"], phases, strict=True):
        assert part["train"] >= part["capture"] + part["warmup"]
        spent = part["train"] + part["method"] + part["evaluate"] + part["checkpoint"]
        assert spent <= wall <= spent + 0.25  # only bookkeeping between the phases


def test_the_methods_prunes_are_timed_apart_from_training_and_evaluation(tmp_path: Path) -> None:
    # BIMP, 3 epochs (1 initial, 2 cycles) and 1 of fine-tuning: a prune starts epochs 2 and 3,
    # and the final prune starts the fine-tuning epoch.
    trainer = Trainer(case_config(tmp_path, "bimp"), None, None, graph_backend=ReplayBackend())
    delay = 0.3
    method = trainer.method
    on_epoch_start, finalize = method.on_epoch_start, method.finalize

    def slow_prune_at_start(epoch: int) -> None:
        if epoch == 1:
            time.sleep(delay)  # what a prune's evaluations cost on a real test set
        on_epoch_start(epoch)

    def slow_finalize() -> None:
        time.sleep(delay)
        finalize()

    method.on_epoch_start = slow_prune_at_start  # type: ignore[method-assign]
    method.finalize = slow_finalize  # type: ignore[method-assign]
    metrics = trainer.fit()
    assert metrics is not None
    phases = metrics["epoch_phases"]
    assert phases[1]["method"] >= delay and phases[3]["method"] >= delay
    assert phases[0]["method"] < delay and phases[2]["method"] < delay
    for wall, part in zip(metrics["epoch_seconds"], phases, strict=True):
        # Counted once: as "method", and neither as training nor as evaluation.
        spent = part["train"] + part["method"] + part["evaluate"] + part["checkpoint"]
        assert spent <= wall <= spent + 0.25


def test_only_a_new_batch_size_is_warm_up() -> None:
    first = (128, 3, 32, 32)
    assert is_warmup_batch((72, 3, 32, 32), first, {first})  # an epoch's short last batch
    assert not is_warmup_batch((72, 3, 32, 32), first, {first, (72, 3, 32, 32)})  # seen
    assert not is_warmup_batch(first, first, {first})
    # Per-batch padded sequences: every length is new, and none of them is warm-up.
    assert not is_warmup_batch((32, 41), (32, 17), {(32, 17)})
    assert not is_warmup_batch((20, 41), (32, 17), {(32, 17)})
    assert not is_warmup_batch((72, 3, 32, 32), None, set())


def test_a_checkpoint_keeps_the_phases_of_the_epochs_before_it(tmp_path: Path) -> None:
    cfg = case_config(tmp_path, "dense")
    path = tmp_path / "ckpt.pt"
    assert Trainer(cfg, path).fit(stop_after=2) is None
    resumed = Trainer(cfg, path)
    assert resumed.try_resume()
    first, second = resumed.state.epoch_phases
    assert "checkpoint" in first and "checkpoint" not in second  # written before its own write
    metrics = resumed.fit()
    assert metrics is not None and len(metrics["epoch_phases"]) == resumed.total_epochs


def test_show_says_how_the_steps_ran() -> None:
    graphs = {"step": {"mode": "cuda_graphs", "why_eager": ""}, "compile_seconds": 0.25}
    assert _step_note(graphs) == " (CUDA graphs; 0.2 s capturing, not counted)"
    tuned = {**graphs, "warmup_seconds": 1.5}
    assert _step_note(tuned) == (
        " (CUDA graphs; 0.2 s capturing, 1.5 s on new batch shapes (kernel autotuning), "
        "not counted)"
    )
    eager = {"step": {"mode": "eager", "why_eager": "data-parallel runs (2 processes) ..."}}
    assert _step_note(eager) == " (eager: data-parallel runs (2 processes) ...)"
    assert _step_note({"step": {"mode": "eager", "why_eager": ""}}) == ""
    assert _step_note({}) == ""  # a result stored before the fast path existed


def test_any_method_name_is_a_check_case(tmp_path: Path) -> None:
    # Not a shipped case (a plugin's name works the same way): the method with its defaults.
    assert "imp" not in CASES
    cfg = case_config(tmp_path, "imp")
    assert cfg.method.name == "imp" and cfg.budget.epochs == 3 and cfg.finetune.epochs == 1
    assert case_config(tmp_path, "lc-geometric").method.params.wd_schedule == "geometric"


def test_a_200_epoch_projection_counts_one_time_costs_once() -> None:
    # The first epoch autotunes, the fourth holds a one-off event (BIMP's last prune).
    done = [10.0, 2.0, 2.2, 6.0, 2.0]
    naive, steady = projected_minutes({"epoch_seconds": done, "wall_seconds": 23.0})
    assert naive == pytest.approx(23.0 / 5 * 200 / 60)
    assert steady == pytest.approx((sum(done) + 2.1 * 195) / 60)
    assert projected_minutes({"epoch_seconds": [4.0], "wall_seconds": 4.5}) == (15.0, 15.0)


@pytest.mark.parametrize(
    ("argv", "field"), [(["--size", "4"], "--size"), (["--batch", "0"], "--batch")]
)
def test_the_pipeline_benchmark_refuses_bad_sizes_before_any_work(
    argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bench_pipeline_main([*argv, "--device", "cpu"])
    err = capsys.readouterr().err
    assert f"{field} = " in err and "allowed: an integer >=" in err


def test_the_pipeline_benchmark_prints_each_epochs_phases() -> None:
    phases = {
        "train": 1.4,
        "capture": 0.1,
        "warmup": 0.0,
        "method": 0.1,
        "evaluate": 0.2,
        "checkpoint": 0.05,
    }
    metrics = {
        "epoch_seconds": [1.75, 1.7],
        "epoch_phases": [phases, {k: v for k, v in phases.items() if k != "checkpoint"}],
        "warmup_seconds": 0.0,
    }
    header, first, second, total = phase_lines(metrics)
    assert header.split() == ["epoch", "wall", "s", *EPOCH_PHASES]
    assert first.split() == ["1", "1.75", "1.40", "0.10", "0.00", "0.10", "0.20", "0.05"]
    assert second.split()[-1] == "-"  # a phase the result does not hold
    assert total == "warm-up on new batch shapes: 0.00 s"


def test_resuming_a_replayed_run_equals_the_uninterrupted_one(tmp_path: Path) -> None:
    cfg = case_config(tmp_path / "s", "bimp")
    _, full = fit(cfg, ReplayBackend())
    ckpt = tmp_path / "run.pt"
    first = Trainer(cfg, ckpt, None, graph_backend=ReplayBackend())
    assert first.fit(stop_after=2) is None
    resumed = Trainer(cfg, ckpt, None, graph_backend=ReplayBackend())
    assert resumed.try_resume()
    metrics = resumed.fit()
    assert metrics is not None and comparable(metrics) == comparable(full)


def test_a_run_resumed_under_another_step_plan_uses_its_own_optimizer_kernel(
    tmp_path: Path,
) -> None:
    # runtime.* is not part of the run id: an eager checkpoint may be resumed on the fast path
    # (and back). The checkpoint's groups must not bring their kernel choice along.
    cfg = case_config(tmp_path / "s", "dense")
    # Eager also on a GPU (where "auto" would capture); the same run id.
    eager_cfg = case_config(tmp_path / "s", "dense", "runtime.cuda_graphs='off'")
    assert eager_cfg.run_id == cfg.run_id
    ckpt = tmp_path / "run.pt"
    assert Trainer(eager_cfg, ckpt).fit(stop_after=1) is None
    fast = Trainer(cfg, ckpt, graph_backend=ReplayBackend())
    assert fast.try_resume()
    assert all(
        g["fused"] is True and isinstance(g["lr"], torch.Tensor)
        for g in fast.optimizer.param_groups
    )
    assert fast.fit(stop_after=2) is None
    assert fast.runner.stats.replays > 0 and not fast.runner.stats.failures
    eager = Trainer(eager_cfg, ckpt)
    assert eager.try_resume()
    assert all(not g["fused"] for g in eager.optimizer.param_groups)
    metrics = eager.fit()
    assert metrics is not None and metrics["step"]["mode"] == "eager"


def test_a_plugin_without_declarations_runs_eagerly_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Plugin(Method):
        name = "fast-step-plugin"
        info = get_method("dense").info

        def after_step(self, step: int) -> None:
            super().after_step(step)

    monkeypatch.setitem(METHODS._items, Plugin.name, Plugin)
    cfg = tiny_config(tmp_path, "method.name='fast-step-plugin'")
    with pytest.warns(FastPathWarning, match="Method.graph_safe"):
        _, metrics = fit(cfg, ReplayBackend())
    assert metrics["step"]["mode"] == "eager" and metrics["step"]["captures"] == 0
    assert "graph_safe" in metrics["step"]["why_eager"]


def test_profile_pipeline_reports_a_window_of_real_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmark.bench.profile_pipeline import main as profile_main

    args = ["--device", "cpu", "--root", str(tmp_path), "--size", "300", "--batch", "32"]
    profile_main([*args, "--model", "cnn_small", "--mode", "eager", "--skip", "2", "--iters", "3"])
    out = capsys.readouterr().out
    assert "bimp, cnn_small, batch 32, mode eager, cpu: windows of 3 iterations after 2" in out
    assert re.search(r"^wall-clock \d+\.\d+ ms per iteration \(\d+ images/s\)$", out, re.M)
    assert "back-to-back replays: none, no captured step (eager steps)" in out
    assert "profiled: " in out and "aten::" in out
    with pytest.raises(SystemExit):
        # 5 + 2 x 3 batches of 32 need 352 training images: 392 with 10% held out.
        profile_main([*args, "--skip", "5", "--iters", "3"])
    assert "--size = 300 is invalid; allowed: >= 392" in capsys.readouterr().err


def test_back_to_back_replays_time_the_captured_step_alone(tmp_path: Path) -> None:
    from benchmark.bench.profile_pipeline import back_to_back_ms

    trainer = Trainer(case_config(tmp_path, "dense"), None, None, graph_backend=ReplayBackend())
    assert back_to_back_ms(trainer.runner, 5) is None  # nothing captured yet
    x, y = next(iter(trainer.data.train_batches(0, 0)))
    for step in range(EAGER_WARMUP_ITERS + 1):
        trainer.runner.run(x, y, step)
    assert trainer.runner.graphs
    replays = trainer.runner.stats.replays
    calls = []
    captured = list(trainer.runner.graphs.values())[-1]
    captured.replay = lambda: calls.append(time.sleep(0.01))  # type: ignore[func-returns-value]
    assert back_to_back_ms(trainer.runner, 4) >= 10.0
    assert len(calls) == 4 and trainer.runner.stats.replays == replays


def test_the_profiles_device_time_counts_only_the_devices_own_events() -> None:
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from benchmark.bench.profile_pipeline import device_events, device_seconds

    def event(device: DeviceType, us: float, annotation: bool = False) -> SimpleNamespace:
        return SimpleNamespace(
            device_type=device, self_device_time_total=us, is_user_annotation=annotation
        )

    kernel, copy = event(DeviceType.CUDA, 1500.0), event(DeviceType.CUDA, 500.0)
    events = [event(DeviceType.CPU, 9000.0), kernel, copy, event(DeviceType.CUDA, 7e3, True)]
    assert device_events(events) == [kernel, copy]
    assert device_seconds(events) == pytest.approx(2e-3)
    # Nothing traced on the device (graph replays CUPTI did not see) is no events, not 0 s idle.
    assert device_events([event(DeviceType.CPU, 9000.0)]) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a GPU")
def test_a_failed_capture_leaves_random_numbers_usable() -> None:
    # A capture that fails (a step that reads a value back to the host) used to leave the CUDA
    # generator in capture mode: every later random draw in the process raised.
    device = torch.device("cuda")
    backend = CudaGraphBackend(device)
    x = torch.ones(4, device=device)

    def syncs() -> None:
        (x * 2).sum().item()

    with pytest.raises(RuntimeError):
        backend.capture(syncs)
    assert torch.randn(3, device=device).shape == (3,)
    torch.nn.init.kaiming_uniform_(torch.empty(4, 4, device=device))
    out = torch.empty(8, device=device)

    def draws() -> None:
        out.copy_(torch.nn.functional.dropout(torch.ones(8, device=device), 0.5))

    backend.capture(draws)()  # a capture with random numbers still works
    torch.cuda.synchronize(device)
    assert set(out.unique().tolist()) <= {0.0, 2.0}
