"""Discovering Neural Wirings (DNW; Wortsman et al. 2019).

Every forward pass uses only the largest-magnitude weights of the prunable set P (one global
threshold over P): as the paper's code (``method.counting = "reference"``), those above the
int(s N_P)-th smallest magnitude, i.e. int(s N_P) weights are pruned plus every other one tied
with it; with ``"exact"``, exactly N_P - round(s N_P) are kept. The backward pass is straight-
through: the gradient taken at the masked point reaches every weight of P, so the dense weights
keep training and the top-k set can change at any iteration. After training the last top-k mask
is applied for good; the model already holds exactly those weights, so the pruning stability is
1.

Implementation: between iterations the model holds the masked weights (so validation, test and
checkpoints see the sparse network DNW's forward uses) and :attr:`DNW.dense` the dense ones, in
one flat buffer. ``before_step`` copies the dense weights back for the optimizer step (the
straight-through update); ``after_step`` saves the updated dense weights, computes their global
top-k mask and masks the model, which is exactly the mask the next forward pass needs. So the
per-iteration cost is two fused copies, one top-k over the flat |w| and one fused multiply,
without host synchronisation. The mask is shared with the core's mask store (not marked active),
so the per-epoch sparsity is reported and the mask is checkpointed.

When the mask is computed: DNW (Wortsman et al., 2019) takes the top-k of the dense weights at
the start of each forward pass. Here it is taken right after each optimizer step (and in
``setup``), from the same dense weights the next forward pass would use, so the training is
identical; this way the model between iterations (evaluated, checkpointed, measured for
sparsity) is the sparse one.

The helpers of :mod:`benchmark.pruning.flat` (:class:`FlatBuffer`, :func:`topk_mask_`,
:func:`keep_count`) are shared with GSM and LC (:mod:`methods.gsm`, :mod:`methods.lc`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from benchmark.config.run import RunConfig
from benchmark.pruning.flat import (
    FlatBuffer,
    keep_count,
    reference_prune_count,
    threshold_mask_,
    topk_mask_,
    validate_counting,
)
from methods.base import Method, MethodInfo, TrainContext, register_method


# --------------------------------------------------------------------------- DNW
@dataclass
class DNWParams:
    """DNW has no hyperparameters of its own (the paper tunes only the weight decay).

    Attributes:
        counting: reference (prune int(s N_P) weights and every weight tied with the
            threshold, |w| > kthvalue(|w|, int(s N_P)), as the paper's code) or exact (keep
            exactly N_P - round(s N_P), ties split)
    """

    counting: str = "reference"


# Grids of the paper, Appendix B.3: DNW tunes only the weight decay (and, as every method, the
# learning rate and, on CIFAR-100 and ImageNet, the stepped or linear schedule).
_PRESETS: dict[str, dict[str, list[Any]]] = {
    "cifar10": {
        "optim.weight_decay": [1e-4, 5e-4, 1e-3, 5e-3],
        "schedule.lr": [0.05, 0.1, 0.15, 0.2],
    },
    "cifar100": {
        "optim.weight_decay": [1e-4, 2e-4, 5e-4],
        "schedule.lr": [0.05, 0.1, 0.15],
        "schedule.name": ["stepped", "linear"],
    },
    "imagenet": {
        "optim.weight_decay": [1e-4, 1e-5],
        "schedule.name": ["stepped", "linear"],
    },
}


@register_method
class DNW(Method):
    """Top-k magnitude forward pass with a straight-through dense gradient; stability 1."""

    name = "dnw"
    graph_safe = True
    Params = DNWParams
    info = MethodInfo(
        sparsity_specifiable=True,
        pruning_stable=True,
        sparsity_agnostic=False,
        extra_hyperparameters=0,
        summary="discovering neural wirings: top-k forward pass, dense straight-through update",
    )
    presets = _PRESETS

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        validate_counting(cfg.method.params.counting)

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.dense: FlatBuffer | None = None
        self.mask: FlatBuffer | None = None
        self.keep = 0
        # "reference" counting: the weights pruned at least, int(s N_P) (ties add to them).
        self.prune = 0
        # True while the dense weights live in self.dense (training); False after finalize.
        self.holding = False

    # ---------------------------------------------------------------- hooks
    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        params = ctx.masks.params
        self.dense = FlatBuffer(params)
        self.mask = FlatBuffer(params)
        self.keep = keep_count(ctx.masks, self.cfg.method.sparsity)
        self.prune = reference_prune_count(ctx.masks, self.cfg.method.sparsity)
        self.holding = True
        self.remask()
        # The store shares the mask views: it reports and checkpoints the current mask.
        ctx.masks.masks = self.mask.views

    def before_step(self, step: int) -> None:
        if self.holding:
            assert self.ctx is not None and self.dense is not None
            # Straight-through: the gradient taken at the masked weights updates the dense ones.
            with torch.no_grad():
                torch._foreach_copy_(self.ctx.masks.params, self.dense.views)

    def after_step(self, step: int) -> None:
        if self.holding:
            self.remask()

    def finalize(self) -> None:
        assert self.ctx is not None and self.mask is not None
        # The model already holds exactly the top-k weights: this prune changes nothing.
        self.final_prune_with_stability(self.mask.views)
        self.holding = False
        self.dense = None

    # ---------------------------------------------------------------- the mask
    def remask(self) -> None:
        """Save the dense weights, compute their global top-k mask and mask the model."""
        assert self.ctx is not None and self.dense is not None and self.mask is not None
        params = self.ctx.masks.params
        with torch.no_grad():
            torch._foreach_copy_(self.dense.views, params)
            if self.params.counting == "reference":
                threshold_mask_(self.dense.flat.abs(), self.prune, self.mask.flat)
            else:
                topk_mask_(self.dense.flat.abs(), self.keep, self.mask.flat)
            torch._foreach_mul_(params, self.mask.views)

    # ---------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        dense = self.dense.flat.detach().clone() if self.holding and self.dense else None
        state["dense"] = dense
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        ctx = self.ctx
        assert ctx is not None
        if state["dense"] is None:
            self.holding = False
            self.dense = None
            return
        assert self.dense is not None and self.mask is not None
        self.holding = True
        with torch.no_grad():
            self.dense.flat.copy_(state["dense"])
            # The trainer restored the checkpointed mask into new tensors: share it again.
            torch._foreach_copy_(self.mask.views, ctx.masks.masks)
        ctx.masks.masks = self.mask.views
