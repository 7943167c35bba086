"""OWL's outlier-weighed layer sparsities: the allocation rule on its own, its checks, and every
one-shot method pruning the tiny Llama by it."""

from __future__ import annotations

import math

import pytest
import torch
from test_oneshot import lm_cfg

from benchmark.core.errors import ConfigError
from benchmark.pruning.layerwise import decoder_layers
from benchmark.pruning.owl import (
    OWL_LAMBDA,
    OWL_M,
    outlier_ratio,
    owl_counts,
    owl_sparsities,
)

GOAL, LAM = 0.7, 0.08


def reference(ratios: list[float], goal: float, lam: float) -> list[float]:
    """OWL's reference rule (lib/prune_all.py): ratios scaled to [0, 2 lam], centred on their
    plain mean, subtracted from the goal."""
    low, high = min(ratios), max(ratios)
    scaled = [(r - low) / (high - low) * 2 * lam for r in ratios]
    mean = sum(scaled) / len(scaled)
    return [goal - (x - mean) for x in scaled]


def test_paper_defaults() -> None:
    assert (OWL_M, OWL_LAMBDA) == (5.0, 0.08)


@pytest.mark.parametrize(
    "ratios, sizes",
    [
        # Skewed: one layer with many outliers; the reference would leave goal +- lambda.
        ([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 5.0], [100] * 7),
        ([0.3, 2.0, 1.1, 0.7, 0.1, 1.5], [1000, 700, 1000, 3000, 10, 1000]),
    ],
)
def test_layer_sparsities_average_the_goal_stay_within_lambda_and_rank_by_outliers(
    ratios: list[float], sizes: list[int]
) -> None:
    s = owl_sparsities(ratios, sizes, GOAL, LAM)
    weighted = math.fsum(x * n for x, n in zip(s, sizes, strict=True)) / sum(sizes)
    assert weighted == pytest.approx(GOAL, abs=1e-12)
    assert all(GOAL - LAM - 1e-12 <= x <= GOAL + LAM + 1e-12 for x in s)
    assert max(s) - min(s) > LAM  # not uniform: the allocation did move the layers
    by_outliers = sorted(range(len(ratios)), key=lambda i: ratios[i])
    # More outliers, lower sparsity (ties only where the range clips).
    assert all(s[a] >= s[b] for a, b in zip(by_outliers, by_outliers[1:], strict=False))
    total = round(GOAL * sum(sizes))
    counts = owl_counts(ratios, sizes, GOAL, LAM, total)
    assert sum(counts) == total
    for c, n in zip(counts, sizes, strict=True):
        assert math.floor((GOAL - LAM) * n) <= c <= math.ceil((GOAL + LAM) * n)


def test_the_reference_rule_where_it_stays_in_range_and_the_clip_where_it_does_not() -> None:
    symmetric = [0.2, 0.5, 0.8, 1.1, 1.4]
    assert owl_sparsities(symmetric, [64] * 5, GOAL, LAM) == pytest.approx(
        reference(symmetric, GOAL, LAM), abs=1e-12
    )
    skewed = [0.1] * 6 + [5.0]
    ref = reference(skewed, GOAL, LAM)
    assert min(ref) < GOAL - LAM  # the reference leaves the range the paper states
    ours = owl_sparsities(skewed, [64] * 7, GOAL, LAM)
    assert min(ours) == pytest.approx(GOAL - LAM)
    assert owl_sparsities([0.4] * 3, [5, 6, 7], GOAL, LAM) == [GOAL] * 3  # no outlier spread


def test_outlier_ratio_counts_scores_above_m_times_the_layer_mean() -> None:
    # Mean over both maps together: (1*9 + 100 + 0*10) / 20 = 5.45; above 2x that: 100 only.
    scores = [torch.tensor([1.0] * 9 + [100.0]), torch.zeros(10)]
    assert outlier_ratio(scores, 2.0) == pytest.approx(1 / 20)
    assert outlier_ratio(scores, 0.1) == pytest.approx(10 / 20)


@pytest.mark.parametrize(
    "method, error",
    [
        ({"name": "wanda", "allocation": "owl", "pattern": "2:4"}, "method.allocation"),
        ({"name": "wanda", "allocation": "layerwise"}, "method.allocation"),
        ({"name": "wanda", "owl_m": 7.0}, "method.owl_m"),
        ({"name": "sparsegpt", "allocation": "owl", "owl_lambda": 0.6}, "method.owl_lambda"),
        ({"name": "oneshot_magnitude", "allocation": "owl", "scope": "global"}, "method.scope"),
    ],
)
def test_bad_allocation_settings_are_config_errors(method: dict, error: str) -> None:
    with pytest.raises(ConfigError) as err:
        lm_cfg(**method)
    assert err.value.field == error


@pytest.mark.parametrize("name", ["oneshot_magnitude", "wanda", "sparsegpt"])
def test_every_one_shot_method_prunes_each_decoder_layer_to_its_owl_sparsity(name: str) -> None:
    from benchmark.training.trainer import Trainer

    cfg = lm_cfg(name=name, allocation="owl", owl_lambda=0.2, calibration_samples=8)
    trainer = Trainer(cfg)
    owl = trainer.ctx.record["owl"]
    masks = dict(zip(map(id, trainer.ctx.masks.params), trainer.ctx.masks.masks, strict=True))
    measured = []
    for layer in decoder_layers(trainer.model):
        kept = [masks[id(p)] for p in layer.parameters() if id(p) in masks]
        measured.append(1 - sum(int(m.sum()) for m in kept) / sum(m.numel() for m in kept))
    # Each layer is pruned to OWL's share of it (to a weight), and the whole to the goal.
    assert measured == pytest.approx(owl["layer_sparsity"], abs=1e-4)
    assert trainer.ctx.masks.sparsity() == pytest.approx(0.5, abs=1e-6)
    ratios = owl["outlier_ratios"]
    assert ratios[0] != ratios[1]
    more = 0 if ratios[0] > ratios[1] else 1
    assert measured[more] < 0.5 < measured[1 - more]  # more outliers, more weights kept
