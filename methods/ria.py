"""RIA (Zhang et al., ICLR 2024): one-shot pruning of language models by relative importance and
activations, unstructured (compared over the layer or within each output row) or N:M with an
optional channel permutation; the score and the permutations are in :mod:`benchmark.pruning.ria`.
Calibration, the layer-by-layer pass, OWL's allocation and the budgeted retraining are those of
every one-shot method (:mod:`methods._llm`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn

from benchmark.core.errors import check
from benchmark.pruning.oneshot import pattern_keep_mask
from benchmark.pruning.ria import PERMUTATIONS, ria_keep_mask, ria_score
from methods._llm import OneShotLM, OneShotParams, nm_of, one_of, oneshot_info, validate_oneshot
from methods.base import register_method

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig
    from benchmark.pruning.oneshot import InputStats

RIA_SCOPES = ("layer", "row")


@dataclass
class RIAParams(OneShotParams):
    """RIA's hyperparameters; see :class:`methods._llm.OneShotParams` for the shared ones.

    Attributes:
        a: the exponent of the input norm (RIA: 0.5; 0 is relative importance alone, "RI")
        scope: unstructured comparison over the layer (RIA's default) or within each output
            row (its ``--per_outneuron``, Wanda's)
        permutation: N:M only: none, reallocation (the heuristic channel reallocation) or lsa
            (reallocation refined by linear sum assignment, RIA's channel permutation)
    """

    a: float = 0.5
    scope: str = "layer"
    permutation: str = "none"


@register_method
class RIA(OneShotLM):
    """RIA: prune by ``(|W|/column sum + |W|/row sum) * ||X_j||^a`` after one calibration pass."""

    name = "ria"
    Params: ClassVar[type] = RIAParams
    info = oneshot_info(
        "language models: RIA, relative importance x input norm^0.5 from 128 calibration "
        "windows; unstructured or N:M with channel permutation, optional budgeted retraining"
    )

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        validate_oneshot(cfg)
        p = cfg.method.params
        check(p.a >= 0, "method.a", p.a, "a number >= 0 (the exponent of the input norm)")
        check(p.scope in RIA_SCOPES, "method.scope", p.scope, one_of(RIA_SCOPES))
        check(p.permutation in PERMUTATIONS, "method.permutation", p.permutation,
              one_of(PERMUTATIONS))  # fmt: skip
        check(
            p.permutation == "none" or p.pattern != "unstructured",
            "method.permutation",
            p.permutation,
            "'none' with method.pattern = 'unstructured' (channels are permuted for N:M)",
        )

    def prune_linear(self, name: str, linear: nn.Linear, stats: InputStats | None) -> torch.Tensor:
        assert stats is not None
        p = self.params
        score = ria_score(linear.weight, stats.column_sq_norms(), p.a)
        nm = nm_of(p.pattern)
        if nm is not None:
            return ria_keep_mask(score, nm, p.permutation)
        return pattern_keep_mask(score, self.sparsity_of(linear.weight), None, p.scope)
