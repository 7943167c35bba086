"""Pruning counts as the paper's code counted them (issue 25.6), ``method.counting = "reference"``
by default, the exact count of the core as the named option ``"exact"``.

The paper's code (ZIB-IOL/BIMP): DNW prunes int(s N) weights and every weight tied with the
threshold (|w| > kthvalue(|w|, int(s N))); GSM and LC keep int((1 - s) N); hard GMP prunes
round(q n) of the n weights still alive, q = 1 - (1 - s_t) / (1 - s_prev) from the schedule's
targets. cnn_small has N = 6,032 prunable weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.core.errors import ConfigError
from benchmark.pruning import MaskStore
from benchmark.pruning.flat import keep_count, reference_prune_count, threshold_mask_
from benchmark.training.trainer import Trainer

N = 6032


def _pruned(trainer: Trainer) -> int:
    return sum(int((m == 0).sum()) for m in trainer.ctx.masks.masks)


def _store(n: int) -> MaskStore:
    return MaskStore([("w", torch.nn.Parameter(torch.zeros(n)))])


def test_counts_use_the_paper_codes_float_expressions() -> None:
    big = _store(850_000)
    # int((1 - 0.9) * 850000) is 84999 in floating point, one fewer than the exact 85000.
    assert keep_count(big, 0.9, "reference") == 84_999
    assert keep_count(big, 0.9, "exact") == keep_count(big, 0.9) == 85_000
    small = _store(N)
    assert reference_prune_count(small, 0.9) == 5428  # int(5428.8)
    assert keep_count(small, 0.95, "reference") == 301  # int(301.6)
    assert keep_count(small, 0.95, "exact") == 302  # 6032 - round(5730.4)


def test_the_reference_threshold_prunes_every_tie() -> None:
    scores = torch.tensor([3.0, 1.0, 2.0, 2.0, 5.0, 2.0])
    out = threshold_mask_(scores, 2, torch.empty(6))
    # The 2nd smallest score is 2.0: it and both of its ties go, 4 pruned instead of 2.
    assert out.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert threshold_mask_(scores, 0, torch.empty(6)).tolist() == [1.0] * 6
    assert threshold_mask_(scores, 6, torch.empty(6)).tolist() == [0.0] * 6


@pytest.mark.parametrize(("counting", "pruned"), [("reference", 5428), ("exact", 5429)])
def test_dnw_prunes_int_s_n_as_the_reference(tmp_path: Path, counting: str, pruned: int) -> None:
    cfg = tiny_config(
        tmp_path, "method.name='dnw'", "method.sparsity=0.9", f"method.counting={counting!r}"
    )
    trainer = Trainer(cfg)
    assert trainer.ctx.masks.num_prunable() == N
    assert _pruned(trainer) == pruned  # the mask the first forward pass uses
    assert trainer.fit(stop_after=1) is None
    assert _pruned(trainer) == pruned  # no magnitude ties in trained float weights


@pytest.mark.parametrize("method", ["gsm", "lc"])
@pytest.mark.parametrize(("counting", "keep"), [("reference", 301), ("exact", 302)])
def test_gsm_and_lc_keep_int_one_minus_s_n(
    tmp_path: Path, method: str, counting: str, keep: int
) -> None:
    cfg = tiny_config(
        tmp_path, f"method.name={method!r}", "method.sparsity=0.95", f"method.counting={counting!r}"
    )
    assert Trainer(cfg).method.keep == keep


@pytest.mark.parametrize(
    ("counting", "steps"),
    [
        # Each step prunes round(q n) of what is alive: one more than exact from the 4th step.
        ("reference", [2010, 3450, 4416, 5002, 5303, 5414, 5430]),
        ("exact", [2010, 3450, 4416, 5001, 5302, 5413, 5429]),
    ],
)
def test_hard_gmp_prunes_a_fraction_of_what_is_alive(
    tmp_path: Path, counting: str, steps: list[int]
) -> None:
    cfg = tiny_config(
        tmp_path,
        "method.name='gmp'",
        "method.variant='hard'",
        "budget.epochs=16",
        "method.interval=2",
        "method.sparsity=0.9",
        f"method.counting={counting!r}",
    )
    trainer = Trainer(cfg)
    method = trainer.method
    counts = []
    for epoch in method.schedule.epochs:  # type: ignore[attr-defined]
        method.prune_step(epoch)  # type: ignore[attr-defined]
        counts.append(_pruned(trainer))
    assert counts == steps


def test_soft_gmp_counts_round_s_n_either_way(tmp_path: Path) -> None:
    masks = []
    for counting in ("reference", "exact"):
        cfg = tiny_config(
            tmp_path / counting,
            "method.name='gmp'",
            "budget.epochs=16",
            "method.interval=2",
            "method.sparsity=0.9",
            f"method.counting={counting!r}",
        )
        trainer = Trainer(cfg)
        trainer.method.prune_step(trainer.method.schedule.final_epoch)  # type: ignore[attr-defined]
        masks.append(_pruned(trainer))
    assert masks == [5429, 5429]


@pytest.mark.parametrize("method", ["dnw", "gsm", "lc", "gmp"])
def test_an_unknown_counting_is_refused(tmp_path: Path, method: str) -> None:
    with pytest.raises(ConfigError) as err:
        tiny_config(tmp_path, f"method.name={method!r}", "method.counting='round'")
    assert err.value.field == "method.counting"
