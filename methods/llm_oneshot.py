"""One-shot pruning of language models: magnitude, Wanda and SparseGPT, each unstructured or N:M,
each optionally retrained under a budget (full, or PERP's parameter-efficient set with LoRA,
MaskLoRA or ScaleLoRA). The shared parameters and retraining are in :mod:`methods._llm`, the
criteria in :mod:`benchmark.pruning.oneshot`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from benchmark.core.errors import check
from benchmark.pruning.oneshot import (
    global_keep_masks,
    pattern_keep_mask,
    sparsegpt_prune,
    wanda_score,
)
from methods._llm import OneShotLM, OneShotParams, nm_of, one_of, oneshot_info, validate_oneshot
from methods.base import register_method

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig
    from benchmark.pruning.oneshot import InputStats
    from methods.base import TrainContext

MAGNITUDE_SCOPES = ("layer", "row", "global")


@dataclass
class MagnitudeParams(OneShotParams):
    """One-shot magnitude pruning; see :class:`methods._llm.OneShotParams`.

    Attributes:
        scope: where the smallest |W| are compared: layer (each linear map, the papers'
            baseline), row (each output row) or global (the whole prunable set)
    """

    scope: str = "layer"


@register_method
class OneShotMagnitude(OneShotLM):
    """Prune the smallest magnitudes once (no calibration), then retrain under the budget."""

    name = "oneshot_magnitude"
    Params: ClassVar[type] = MagnitudeParams
    calibrates = False
    info = oneshot_info(
        "language models: one-shot magnitude pruning (layer, row or global), "
        "unstructured or N:M, optional budgeted retraining"
    )

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        validate_oneshot(cfg)
        p = cfg.method.params
        check(p.scope in MAGNITUDE_SCOPES, "method.scope", p.scope, one_of(MAGNITUDE_SCOPES))
        check(
            p.scope != "global" or p.pattern == "unstructured",
            "method.scope",
            p.scope,
            "'layer' or 'row' with an N:M pattern (N:M is per group of inputs)",
        )
        check(
            p.scope != "global" or p.allocation == "uniform",
            "method.scope",
            p.scope,
            "'layer' or 'row' with method.allocation = 'owl' (OWL splits the goal over layers)",
        )

    def one_shot_masks(self, ctx: TrainContext) -> list[torch.Tensor]:
        weights = [w.detach().abs() for w in ctx.masks.params]
        p = self.params
        if p.scope == "global":
            return global_keep_masks(weights, self.cfg.method.sparsity)
        return [
            pattern_keep_mask(w, s, nm_of(p.pattern), p.scope)
            for w, s in zip(weights, self.split_sparsity(ctx), strict=True)
        ]


@register_method
class Wanda(OneShotLM):
    """Wanda (Sun et al. 2024): prune by |W| times the input norm within each output row."""

    name = "wanda"
    info = oneshot_info(
        "language models: Wanda, |W| x input norm per output row, from 128 "
        "calibration windows; unstructured or N:M, optional budgeted retraining"
    )

    def prune_linear(self, name: str, linear: nn.Linear, stats: InputStats | None) -> torch.Tensor:
        assert stats is not None
        score = wanda_score(linear.weight.detach(), stats.column_sq_norms())
        return pattern_keep_mask(
            score, self.sparsity_of(linear.weight), nm_of(self.params.pattern), "row"
        )


@register_method
class SparseGPT(OneShotLM):
    """SparseGPT (Frantar & Alistarh 2023): mask and weight update from calibration Hessians."""

    name = "sparsegpt"
    hessian = True
    info = oneshot_info(
        "language models: SparseGPT, blockwise second-order mask and weight update "
        "from 128 calibration windows; unstructured or N:M, optional budgeted retraining"
    )

    def prune_linear(self, name: str, linear: nn.Linear, stats: InputStats | None) -> torch.Tensor:
        assert stats is not None
        weight, keep = sparsegpt_prune(
            linear.weight,
            stats.hessian(),
            self.sparsity_of(linear.weight),
            nm_of(self.params.pattern),
        )
        linear.weight.copy_(weight)
        return keep
