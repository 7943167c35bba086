"""Global Sparse Momentum SGD (GSM; Ding et al. 2019).

After every backward pass, among the weights of the prunable set P only the Q = (1 - s) N_P
weights with the largest |w * dL/dw| (the first-order Taylor estimate of their importance) keep
their gradient; the gradient of every other weight of P is set to zero, so those weights move
only by the weight decay, accumulated in the momentum buffer, and shrink towards zero. Weights
outside P train normally. After training the model is pruned by global magnitude to exactly s
and the pruning stability is recorded. The paper's tuned hyperparameter is the momentum
(``optim.momentum``, in the presets).

GSM can start from scratch or from a trained dense model (the paper reports the better of the
two): with ``from_pretrained = true`` the run starts from the dense parent of ``parent_epochs``
epochs, trained once and shared exactly like IMP's (:func:`methods.bimp.dense_parent`), and
then trains ``budget.epochs`` epochs with the run's original schedule.

Implementation: |w * g| is formed in one flat buffer over P with fused ops, the top-Q mask is one
``torch.topk`` and the gradients are masked by one fused multiply; nothing syncs with the host.

This is Ding et al.'s update rule z <- beta z + eta w + B(w) * dL/dw, w <- w - alpha z (B the
top-Q indicator): torch SGD with momentum beta and weight decay eta adds eta w to the masked
gradient.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from benchmark.config import RunConfig
from benchmark.flat import FlatBuffer, keep_count, topk_mask_
from benchmark.pruning import compute_masks
from methods.base import (
    Method,
    MethodInfo,
    TrainContext,
    pretrained_parent,
    pretrained_presets,
    register_method,
    validate_pretrained,
)


@dataclass
class GSMParams:
    """Hyperparameters of GSM.

    ``from_pretrained`` starts from a dense parent trained for ``parent_epochs`` epochs (ignored
    when false).

    Attributes:
        from_pretrained: start from a trained dense parent instead of from scratch
        parent_epochs: epochs of the dense parent (used only with from_pretrained)
    """

    from_pretrained: bool = False
    parent_epochs: int = 10


# Grids of the paper, Appendix B.3: GSM tunes the momentum (and, as every method, the weight
# decay, the learning rate and, on CIFAR-100 and ImageNet, the stepped or linear schedule).
# On ImageNet it runs from scratch ("imagenet") or from the trained dense model
# ("imagenet-pretrained"); the paper reports the better of the two.
_IMAGENET = {
    "optim.momentum": [0.9, 0.95],
    "optim.weight_decay": [1e-4, 1e-5],
    "schedule.name": ["stepped", "linear"],
}
_PRESETS: dict[str, dict[str, list[Any]]] = {
    "cifar10": {
        "optim.momentum": [0.9, 0.95, 0.99],
        "optim.weight_decay": [1e-4, 5e-4, 1e-3, 5e-3],
        "schedule.lr": [0.05, 0.1, 0.15, 0.2],
    },
    "cifar100": {
        "optim.momentum": [0.9, 0.95, 0.99],
        "optim.weight_decay": [1e-4, 2e-4, 5e-4],
        "schedule.lr": [0.05, 0.1, 0.15],
        "schedule.name": ["stepped", "linear"],
    },
    "imagenet": _IMAGENET,
    "imagenet-pretrained": pretrained_presets(_IMAGENET),
}


@register_method
class GSM(Method):
    """Only the top-Q |w * grad| weights of P get their gradient; then global magnitude prune."""

    name = "gsm"
    Params = GSMParams
    info = MethodInfo(
        sparsity_specifiable=True,
        pruning_stable=True,
        sparsity_agnostic=False,
        extra_hyperparameters=0,
        summary="global sparse momentum: only the top-Q |w * grad| weights get gradients",
    )
    presets = _PRESETS

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.score: FlatBuffer | None = None
        self.mask: FlatBuffer | None = None
        self.keep = 0

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        validate_pretrained(cfg)

    def parent_config(self) -> RunConfig | None:
        return pretrained_parent(self.cfg)

    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        self.score = FlatBuffer(ctx.masks.params)
        self.mask = FlatBuffer(ctx.masks.params)
        self.keep = keep_count(ctx.masks, self.cfg.method.sparsity)

    def before_step(self, step: int) -> None:
        ctx = self.ctx
        assert ctx is not None and self.score is not None and self.mask is not None
        params = ctx.masks.params
        grads = [p.grad for p in params]
        with torch.no_grad():
            torch._foreach_copy_(self.score.views, grads)
            torch._foreach_mul_(self.score.views, params)
            topk_mask_(self.score.flat.abs_(), self.keep, self.mask.flat)
            torch._foreach_mul_(grads, self.mask.views)

    def finalize(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        masks = compute_masks("global", ctx.prunable, self.cfg.method.sparsity)
        self.final_prune_with_stability(masks)
