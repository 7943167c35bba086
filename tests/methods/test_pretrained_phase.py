"""GSM and LC from a trained dense model: the learning rates of their 10-40-epoch phase and the
dense parent every tuned variant of a seed shares (methods/base.py, ``PretrainedParams``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.training.trainer import Trainer
from benchmark.training.validation import load_config
from methods import get_method
from tests.helpers import record_lrs, tiny_config

METHODS = ("gsm", "lc")
# A 10-epoch "problem": 0.1, then 0.01 from epoch 5 and 0.001 from epoch 8; the phase from the
# trained model runs 5 of them, then 2 epochs of post-training FT.
STEPPED = (
    "schedule.name='stepped'",
    "schedule.lr=0.1",
    "schedule.milestones=[5, 8]",
    "schedule.values=[0.01, 0.001]",
)
PHASE = ("method.from_pretrained=true", "method.parent_epochs=10", "budget.epochs=5")


def _lrs(tmp_path: Path, method: str, *overrides: str) -> tuple[np.ndarray, int]:
    cfg = tiny_config(tmp_path, f"method.name='{method}'", *PHASE, *overrides)
    trainer = Trainer(cfg, None, None)
    return np.array(record_lrs(trainer)), trainer.ipe


def _stepped_at(epoch: np.ndarray) -> np.ndarray:
    return np.select([epoch < 5, epoch < 8], [0.1, 0.01], 0.001)


@pytest.mark.parametrize("method", METHODS)
def test_the_phase_compresses_the_problem_schedule_and_ft_runs_at_its_last_level(
    tmp_path: Path, method: str
) -> None:
    lrs, ipe = _lrs(tmp_path, method, *STEPPED, "finetune.epochs=2")
    n = 5 * ipe
    assert len(lrs) == n + 2 * ipe
    # Step k of the 5-epoch phase takes the 10-epoch schedule's lr at step 2k.
    k = np.arange(n)
    np.testing.assert_allclose(lrs[:n], _stepped_at((2 * k) // ipe))
    # Rounded: on the GPU the learning rate reaches the optimizer as a float32 tensor.
    assert {0.1, 0.01, 0.001} == set(np.round(lrs[:n], 6))
    np.testing.assert_allclose(lrs[n:], 0.001)  # FT: the phase's smallest lr


def test_a_linear_schedule_decays_to_zero_over_the_phase(tmp_path: Path) -> None:
    lrs, ipe = _lrs(tmp_path, "gsm", "schedule.name='linear'", "schedule.lr=0.2")
    k = np.arange(5 * ipe)
    np.testing.assert_allclose(lrs, 0.2 * (1 - k / (5 * ipe)))


def test_the_compressed_phase_has_no_warm_up(tmp_path: Path) -> None:
    # A warm-up of the original schedule is held at the peak (a trained model needs none).
    lrs, ipe = _lrs(tmp_path, "lc", *STEPPED, "schedule.warmup_epochs=2")
    k = np.arange(5 * ipe)
    np.testing.assert_allclose(lrs, _stepped_at((2 * k) // ipe))


@pytest.mark.parametrize("method", METHODS)
def test_configured_keeps_the_schedule_as_written_over_the_phase(
    tmp_path: Path, method: str
) -> None:
    lrs, ipe = _lrs(
        tmp_path, method, *STEPPED, "finetune.epochs=1", "method.pretrained_schedule='configured'"
    )
    # Milestones 5 and 8 lie beyond the 5-epoch phase: 0.1 throughout, FT included.
    np.testing.assert_allclose(lrs, 0.1)
    assert len(lrs) == 6 * ipe


def test_from_scratch_runs_keep_the_original_schedule(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, "method.name='gsm'", "budget.epochs=5", *STEPPED)
    trainer = Trainer(cfg, None, None)
    lrs = np.array(record_lrs(trainer))
    epoch = np.arange(len(lrs)) // trainer.ipe
    np.testing.assert_allclose(lrs, _stepped_at(epoch))


STANDARD = (
    "method.parent_weight_decay=1e-4",
    "method.parent_momentum=0.9",
    "method.parent_schedule='stepped'",
    "method.parent_lr=0.1",
    "method.parent_values=[0.01, 0.001]",
)
TUNED = (
    ("optim.momentum=0.95", "optim.weight_decay=5e-4", "schedule.lr=0.05"),
    ("optim.weight_decay=1e-3", "schedule.name='linear'", "schedule.lr=0.2", "budget.epochs=20"),
    ("schedule.values=[0.005, 0.0005]", "schedule.lr=0.05", "budget.epochs=40"),
)


def _parent(method: str, *overrides: str) -> RunConfig:
    cfg = load_config(None, [f"method.name='{method}'", *PHASE, *STEPPED, *overrides])
    parent = get_method(method)(cfg).parent_config()
    assert parent is not None
    return parent


@pytest.mark.parametrize("method", METHODS)
def test_tuned_variants_share_the_standard_dense_parent(method: str) -> None:
    parents = [_parent(m, *tuned, *STANDARD) for tuned in TUNED for m in (method, "gsm")]
    assert len({p.run_id for p in parents}) == 1
    parent = parents[0]
    assert parent.method.name == "dense" and parent.budget.epochs == 10
    assert (parent.optim.weight_decay, parent.optim.momentum) == (1e-4, 0.9)
    assert (parent.schedule.name, parent.schedule.lr) == ("stepped", 0.1)
    assert parent.schedule.values == [0.01, 0.001]
    # Without the parent_* keys each variant's parent copies its own optimizer and schedule.
    assert len({_parent(method, *tuned).run_id for tuned in TUNED}) == len(TUNED)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ("method.pretrained_schedule='bac'", "method.pretrained_schedule"),
        ("method.parent_weight_decay=-1", "method.parent_weight_decay"),
        ("method.parent_momentum=1.0", "method.parent_momentum"),
        ("method.parent_schedule='cyclic'", "method.parent_schedule"),
        ("method.parent_lr=0", "method.parent_lr"),
        ("method.parent_values=[0.01]", "method.parent_values"),
    ],
)
@pytest.mark.parametrize("method", METHODS)
def test_invalid_pretrained_options_name_the_field(method: str, override: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"method.name='{method}'", *PHASE, *STEPPED, override])
    assert err.value.field == field
