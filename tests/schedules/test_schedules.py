"""Tests for benchmark.schedules and the ``schedule`` sub-command, on hand-computed values."""

from __future__ import annotations

import argparse
import json

import matplotlib.figure  # noqa: F401  (import once at collection so no test pays for it)
import numpy as np
import pytest

from benchmark.cli.schedules import add_parser, run
from benchmark.config.run import ScheduleConfig
from benchmark.core.errors import ConfigError
from benchmark.reporting.schedule_figure import plot_retraining_schedules
from benchmark.schedules.original import (
    ORIGINAL_SCHEDULES,
    linear_decay,
    original_lrs,
    original_warmup_iters,
    validate_schedule,
)
from benchmark.schedules.retraining import (
    ADAPTIVE_SCHEDULES,
    RETRAIN_SCHEDULES,
    AdaptiveNeeds,
    acc_allr_d1,
    adaptive_needs,
    allr_d1,
    allr_d2,
    allr_scale,
    retrain_lrs,
)

# cos(pi/4) and cos(17*pi/18) = -cos(10 degrees), written out so the tests do not re-derive them.
COS_45 = 0.7071067811865476
COS_10_DEG = 0.984807753012208


def stepped(milestones: list[float], values: list[float], lr: float = 0.1) -> ScheduleConfig:
    """A stepped original schedule config."""
    return ScheduleConfig(name="stepped", lr=lr, milestones=milestones, values=values)


@pytest.fixture
def original40() -> np.ndarray:
    """L = 40 iterations: 0.1 for 20, 0.01 for 10, 0.001 for 10 (one iteration per epoch)."""
    return np.array([0.1] * 20 + [0.01] * 10 + [0.001] * 10)


# ----------------------------------------------------------------------------- original


def test_registries_list_all_names() -> None:
    assert ORIGINAL_SCHEDULES.names() == ["constant", "cosine", "linear", "stepped"]
    assert set(RETRAIN_SCHEDULES.names()) == {
        "FT", "LRW", "SLR", "CLR", "LLR", "ALLR", "AccALLR", "ALLR-d1", "ALLR-d2",
        "tuned-constant", "tuned-stepped", "tuned-cosine", "tuned-linear",
    }  # fmt: skip


def test_stepped_switches_at_epoch_index_of_milestone() -> None:
    lrs = original_lrs(stepped([2, 4], [0.01, 0.001]), epochs=6, iters_per_epoch=2)
    expected = [0.1] * 4 + [0.01] * 4 + [0.001] * 4
    np.testing.assert_allclose(lrs, expected)
    assert lrs.dtype == np.float64


def test_stepped_paper_boundaries_91st_epoch_uses_first_value() -> None:
    lrs = original_lrs(stepped([90, 180], [0.01, 0.001]), epochs=200, iters_per_epoch=1)
    assert (lrs[89], lrs[90], lrs[179], lrs[180], lrs[199]) == (0.1, 0.01, 0.01, 0.001, 0.001)


def test_constant_with_linear_warmup() -> None:
    cfg = ScheduleConfig(name="constant", lr=0.1, warmup_epochs=1)
    lrs = original_lrs(cfg, epochs=3, iters_per_epoch=4)
    np.testing.assert_allclose(lrs, [0.025, 0.05, 0.075, 0.1] + [0.1] * 8)


def test_imagenet_style_warmup_is_point_one_t_over_five() -> None:
    cfg = stepped([30, 60], [0.01, 0.001])
    cfg.warmup_epochs = 5
    lrs = original_lrs(cfg, epochs=90, iters_per_epoch=1)
    np.testing.assert_allclose(lrs[:6], [0.02, 0.04, 0.06, 0.08, 0.1, 0.1])
    assert lrs[30] == 0.01


def test_linear_after_warmup_decays_from_peak() -> None:
    cfg = ScheduleConfig(name="linear", lr=1.0, warmup_epochs=2)
    np.testing.assert_allclose(original_lrs(cfg, 6, 1), [0.5, 1.0, 1.0, 0.75, 0.5, 0.25])


def test_cosine_without_warmup() -> None:
    lrs = original_lrs(ScheduleConfig(name="cosine", lr=1.0), epochs=4, iters_per_epoch=1)
    np.testing.assert_allclose(lrs, [1.0, (1 + COS_45) / 2, 0.5, (1 - COS_45) / 2])


def test_original_warmup_iters_rounds() -> None:
    assert original_warmup_iters(ScheduleConfig(warmup_epochs=0.5), 10) == 5
    assert original_warmup_iters(ScheduleConfig(warmup_epochs=0.26), 10) == 3
    assert original_warmup_iters(ScheduleConfig(), 10) == 0


def test_linear_decay() -> None:
    np.testing.assert_allclose(linear_decay(0.2, 4), [0.2, 0.15, 0.1, 0.05])
    assert linear_decay(0.2, 0).shape == (0,)


def test_unknown_original_name_lists_allowed() -> None:
    with pytest.raises(ConfigError) as info:
        validate_schedule(ScheduleConfig(name="exponential"), 10)
    message = str(info.value)
    assert info.value.field == "schedule.name"
    assert "schedule.name" in message and "'exponential'" in message
    assert "'cosine'" in message and "'stepped'" in message


@pytest.mark.parametrize(
    ("milestones", "values", "field"),
    [([90, 180], [0.01], "schedule.values"), ([180, 90], [0.01, 0.001], "schedule.milestones")],
)
def test_stepped_validation(milestones: list[float], values: list[float], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate_schedule(stepped(milestones, values), 200)
    assert info.value.field == field
    assert field in str(info.value)


def test_non_numeric_fields_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="schedule.lr"):
        validate_schedule(ScheduleConfig(lr="0.1"), 10)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="schedule.milestones"):
        validate_schedule(stepped([float("nan")], [0.01]), 10)


def test_validate_is_cheap_and_ignores_milestones_of_other_shapes() -> None:
    # A huge epoch count would take gigabytes if anything were computed.
    validate_schedule(stepped([90], [0.01]), 10**15)
    validate_schedule(ScheduleConfig(name="linear", milestones=[5, 1], values=[]), 10)


def test_warmup_must_leave_training() -> None:
    with pytest.raises(ConfigError, match="schedule.warmup_epochs"):
        validate_schedule(ScheduleConfig(name="linear", warmup_epochs=10), 10)
    with pytest.raises(ConfigError, match="schedule.warmup_epochs"):
        original_lrs(ScheduleConfig(name="linear", warmup_epochs=1.95), 2, 10)  # rounds to 20


# ----------------------------------------------------------------------------- retraining


def test_ft_is_min_lr_constant(original40: np.ndarray) -> None:
    np.testing.assert_array_equal(retrain_lrs("FT", 20, original40), [0.001] * 20)


def test_min_lr_ignores_original_warmup() -> None:
    original = np.array([0.05, 0.1, 0.1, 0.1])  # constant 0.1 after a 2-step warm-up
    np.testing.assert_array_equal(retrain_lrs("FT", 3, original, original_warmup=2), [0.1] * 3)


def test_min_lr_is_the_minimum_not_the_last_value() -> None:
    original = np.array([0.1, 0.001, 0.01])
    np.testing.assert_array_equal(retrain_lrs("FT", 2, original), [0.001, 0.001])


def test_lrw_is_tail_and_front_pads(original40: np.ndarray) -> None:
    np.testing.assert_array_equal(retrain_lrs("LRW", 20, original40), [0.01] * 10 + [0.001] * 10)
    padded = retrain_lrs("LRW", 5, np.array([0.3, 0.2, 0.1]))
    np.testing.assert_array_equal(padded, [0.3, 0.3, 0.3, 0.2, 0.1])


@pytest.mark.parametrize("kind", ["SLR", "CLR", "LLR"])
def test_fixed_warmup_reaches_max_lr_at_iteration_w_plus_1(
    kind: str, original40: np.ndarray
) -> None:
    lrs = retrain_lrs(kind, 20, original40)  # W = 2
    assert lrs.shape == (20,)
    assert lrs[0] == 0.0
    assert lrs[1] == pytest.approx(0.05)  # (1 - cos(pi/2)) / 2 = 1/2
    assert lrs[2] == 0.1


def test_slr_compresses_steps_by_r_over_l(original40: np.ndarray) -> None:
    # R = 18, L = 40: lr(k) = e[floor(40k/18)]; 0.01 from k = 9 (= 20*18/40), 0.001 from k = 14.
    lrs = retrain_lrs("SLR", 20, original40)
    expected = [0.0, 0.05] + [0.1] * 9 + [0.01] * 5 + [0.001] * 4
    np.testing.assert_allclose(lrs, expected)


def test_slr_index_is_floored() -> None:
    # W = 0, R = 3, L = 4: indices floor(4k/3) = 0, 1, 2 (a ceiling would give 0, 2, 3).
    lrs = retrain_lrs("SLR", 3, np.array([0.4, 0.3, 0.2, 0.1]))
    np.testing.assert_allclose(lrs, [0.4, 0.3, 0.2])


def test_slr_replaces_original_warmup_by_max_lr() -> None:
    original = np.array([0.2, 0.4, 0.4, 0.3, 0.2, 0.1])  # linear 0.4 with a 2-step warm-up
    lrs = retrain_lrs("SLR", 6, original, original_warmup=2)  # W = 0, R = L: a plain copy
    np.testing.assert_allclose(lrs, [0.4, 0.4, 0.4, 0.3, 0.2, 0.1])


def test_clr_cosine_from_max_to_near_min(original40: np.ndarray) -> None:
    lrs = retrain_lrs("CLR", 20, original40)
    assert lrs[2 + 9] == pytest.approx(0.001 + 0.099 / 2)  # k = R/2
    assert lrs[-1] == pytest.approx(0.001 + 0.099 * (1 - COS_10_DEG) / 2)  # k = 17 = R-1
    assert lrs[-1] > 0.001
    assert lrs[-1] == pytest.approx(0.0017520160, abs=1e-9)


def test_llr_linear_to_near_zero(original40: np.ndarray) -> None:
    lrs = retrain_lrs("LLR", 20, original40)
    assert lrs[2 + 9] == pytest.approx(0.05)
    assert lrs[-1] == pytest.approx(0.1 / 18)
    np.testing.assert_allclose(np.diff(lrs[2:]), -0.1 / 18)


@pytest.mark.parametrize("kind", sorted(ADAPTIVE_SCHEDULES))
def test_adaptive_kinds_are_scaled_llr(kind: str, original40: np.ndarray) -> None:
    lrs = retrain_lrs(kind, 20, original40, scale=0.5)
    np.testing.assert_allclose(lrs, 0.5 * retrain_lrs("LLR", 20, original40))
    assert (lrs[1], lrs[2]) == (pytest.approx(0.025), 0.05)


def test_no_warmup_when_w_is_zero(original40: np.ndarray) -> None:
    lrs = retrain_lrs("LLR", 9, original40)  # W = floor(0.9) = 0, k = i - 1
    np.testing.assert_allclose(lrs, [0.1 * (1 - k / 9) for k in range(9)])
    assert lrs[0] == 0.1


def test_single_warmup_step_when_n_is_ten(original40: np.ndarray) -> None:
    lrs = retrain_lrs("LLR", 10, original40)  # W = 1, R = 9
    np.testing.assert_allclose(lrs, [0.0, 0.1] + [0.1 * (1 - k / 9) for k in range(1, 9)])


def test_fixed_kinds_ignore_tuning_knobs(original40: np.ndarray) -> None:
    plain = retrain_lrs("CLR", 20, original40)
    knobs = retrain_lrs("CLR", 20, original40, scale=0.2, initial_lr=5.0, warmup_fraction=0.5)
    np.testing.assert_array_equal(plain, knobs)


def test_tuned_constant_with_warmup(original40: np.ndarray) -> None:
    lrs = retrain_lrs("tuned-constant", 20, original40, initial_lr=0.05, warmup_fraction=0.1)
    np.testing.assert_allclose(lrs, [0.0, 0.025] + [0.05] * 18)


def test_tuned_linear_and_cosine_go_to_zero(original40: np.ndarray) -> None:
    linear = retrain_lrs("tuned-linear", 20, original40, initial_lr=0.05)
    assert (linear[0], linear[10], linear[-1]) == (
        0.05,
        pytest.approx(0.025),
        pytest.approx(0.0025),
    )
    cosine = retrain_lrs("tuned-cosine", 4, original40, initial_lr=0.05)
    np.testing.assert_allclose(
        cosine, [0.05, 0.05 * (1 + COS_45) / 2, 0.025, 0.05 * (1 - COS_45) / 2]
    )


def test_tuned_stepped_is_rescaled_slr(original40: np.ndarray) -> None:
    lrs = retrain_lrs("tuned-stepped", 20, original40, initial_lr=0.05, warmup_fraction=0.1)
    expected = [0.0, 0.025] + [0.05] * 9 + [0.005] * 5 + [0.0005] * 4
    np.testing.assert_allclose(lrs, expected)


def test_tuned_warmup_fraction_zero_starts_at_initial_lr(original40: np.ndarray) -> None:
    lrs = retrain_lrs("tuned-stepped", 20, original40, initial_lr=0.05)  # W = 0, R = 20
    np.testing.assert_allclose(lrs, [0.05] * 10 + [0.005] * 5 + [0.0005] * 5)


def test_unknown_retrain_kind_lists_allowed(original40: np.ndarray) -> None:
    with pytest.raises(ConfigError) as info:
        retrain_lrs("OneCycle", 20, original40)
    message = str(info.value)
    assert info.value.field == "method.schedule"
    assert "'OneCycle'" in message and "'LLR'" in message and "'tuned-linear'" in message


def test_tuned_needs_initial_lr(original40: np.ndarray) -> None:
    with pytest.raises(ConfigError) as info:
        retrain_lrs("tuned-cosine", 20, original40)
    assert info.value.field == "method.initial_lr"
    assert "method.initial_lr" in str(info.value)


def test_bad_scale_and_warmup_fraction(original40: np.ndarray) -> None:
    with pytest.raises(ConfigError, match="scale"):
        retrain_lrs("ALLR", 20, original40, scale=1.5)
    with pytest.raises(ConfigError, match="method.warmup_fraction"):
        retrain_lrs("tuned-linear", 20, original40, initial_lr=0.1, warmup_fraction=1.0)


def test_bad_cycle_length_or_original(original40: np.ndarray) -> None:
    with pytest.raises(ValueError, match="n"):
        retrain_lrs("LLR", 0, original40)
    with pytest.raises(ValueError, match="original_warmup"):
        retrain_lrs("LLR", 5, original40, original_warmup=40)


# ----------------------------------------------------------------------------- ALLR factors


def test_allr_d1_normalises_by_sqrt_fraction() -> None:
    assert allr_d1(3.0, 10.0, 0.36) == pytest.approx(0.5)
    assert allr_d1(0.0, 10.0, 0.0) == 0.0  # nothing pruned


def test_allr_d2_is_clipped_time_ratio() -> None:
    assert allr_d2(60, 200) == pytest.approx(0.3)
    assert allr_d2(300, 200) == 1.0


def test_allr_scale_combinations() -> None:
    assert allr_scale(0.5, 0.3) == 0.5
    assert allr_scale(0.2, 0.3) == 0.3
    assert allr_scale(None, 0.3) == 0.3
    assert allr_scale(1.7, None) == 1.0
    with pytest.raises(ValueError):
        allr_scale(None, None)


def test_acc_allr_d1_is_clipped_relative_drop() -> None:
    assert acc_allr_d1(0.8, 0.6) == pytest.approx(0.25)
    assert acc_allr_d1(0.8, 0.9) == 0.0
    assert acc_allr_d1(0.5, 0.0) == 1.0


def test_adaptive_needs() -> None:
    assert adaptive_needs("ALLR") == AdaptiveNeeds(d1=True, d2=True)
    assert adaptive_needs("AccALLR") == AdaptiveNeeds(d2=True, acc=True)
    assert adaptive_needs("ALLR-d1") == AdaptiveNeeds(d1=True)
    assert adaptive_needs("ALLR-d2") == AdaptiveNeeds(d2=True)
    assert adaptive_needs("LLR") == AdaptiveNeeds()
    with pytest.raises(ConfigError, match="method.schedule"):
        adaptive_needs("nope")


# ----------------------------------------------------------------------------- CLI + figure


def cli(argv: list[str]) -> int:
    """Parse ``argv`` with a parser holding only the schedule sub-command and run it."""
    parser = argparse.ArgumentParser(prog="prunebench")
    add_parser(parser.add_subparsers(dest="command"))
    return run(parser.parse_args(argv))


ORIGINAL_ARGS = ["schedule", "--original", "stepped", "--lr", "0.1", "--milestones", "2", "4"]
ORIGINAL_ARGS += ["--values", "0.01", "0.001", "--epochs", "6", "--iters-per-epoch", "1"]


def test_cli_prints_original_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(ORIGINAL_ARGS) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"kind": "stepped", "lrs": [0.1, 0.1, 0.01, 0.01, 0.001, 0.001]}


def test_cli_prints_list_for_several_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli([*ORIGINAL_ARGS, "--retrain", "FT", "LRW", "ALLR", "--retrain-epochs", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [o["kind"] for o in out] == ["FT", "LRW", "ALLR"]
    assert out[0]["lrs"] == [0.001] * 3
    assert out[1]["lrs"] == [0.01, 0.001, 0.001]
    # Default ALLR discount is d2 = 3/6 = 0.5; W = 0, so lr = 0.05 * (1 - k/3).
    assert out[2]["lrs"] == pytest.approx([0.05, 0.05 * 2 / 3, 0.05 / 3])


def test_cli_single_kind_with_scale_and_tuned(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*ORIGINAL_ARGS, "--retrain-epochs", "2", "--retrain"]
    assert cli([*argv, "ALLR-d1", "--scale", "0.5"]) == 0
    # One kind gives one object; N = 2 so W = 0 and lr = 0.5 * 0.1 * (1 - k/2).
    assert json.loads(capsys.readouterr().out) == {"kind": "ALLR-d1", "lrs": [0.05, 0.025]}
    assert cli([*argv, "tuned-constant", "--initial-lr", "0.2"]) == 0
    assert json.loads(capsys.readouterr().out) == {"kind": "tuned-constant", "lrs": [0.2, 0.2]}


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (["--retrain", "LLR", "Bogus", "--retrain-epochs", "2"], "method.schedule"),
        (["--retrain", "tuned-linear", "--retrain-epochs", "2"], "method.initial_lr"),
        (["--retrain", "ALLR-d1", "--retrain-epochs", "2"], "--scale"),
        (["--retrain", "LLR"], "--retrain-epochs"),
        (["--plot", "out.txt"], "--plot"),
    ],
)
def test_cli_bad_input_returns_2(
    extra: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli([*ORIGINAL_ARGS, *extra]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert field in captured.err


def test_cli_bad_original_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["schedule", "--original", "wavy"]) == 2
    err = capsys.readouterr().err
    assert "schedule.name" in err and "'stepped'" in err


def test_cli_plot_writes_pdf(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lrs.pdf"
    assert (
        cli([*ORIGINAL_ARGS, "--retrain", "LLR", "--retrain-epochs", "2", "--plot", str(path)]) == 0
    )
    assert path.read_bytes()[:5] == b"%PDF-"
    out = capsys.readouterr().out
    assert out == f"wrote {path} (1 schedule(s))\n"  # where the plot went, no flood of JSON
    args = [*ORIGINAL_ARGS, "--retrain", "LLR", "--retrain-epochs", "2", "--plot", str(path)]
    assert cli([*args, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["kind"] == "LLR"
    assert f"wrote {path}" in captured.err


def test_figure1_has_six_labelled_lines(tmp_path) -> None:
    path = tmp_path / "fig1.png"
    fig = plot_retraining_schedules(path, iters_per_epoch=1)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = fig.axes[0]
    assert len(ax.get_lines()) == 6
    assert ax.get_xlabel() == "retraining epoch"
    assert ax.get_ylabel() == "learning rate"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:5] == ["FT", "LRW", "SLR", "CLR", "LLR"]
    assert labels[5].startswith("ALLR") and "d2" in labels[5] and "0.3" in labels[5]
    allr = ax.get_lines()[5].get_ydata()
    assert max(allr) == pytest.approx(0.03)  # 0.3 * maxLR
    x = ax.get_lines()[0].get_xdata()
    assert (len(x), x[0], x[-1]) == (60, 0.0, 59.0)


def test_figure1_explicit_scale_label() -> None:
    fig = plot_retraining_schedules(None, original_epochs=20, retrain_epochs=6, scale=0.5)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[5] == "ALLR (d = 0.5)"
    assert max(fig.axes[0].get_lines()[5].get_ydata()) == pytest.approx(0.05)
