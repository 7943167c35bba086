"""Global Sparse Momentum SGD (GSM; Ding et al. 2019).

After every backward pass only the Q = int((1 - s) N_P) entries with the largest |w * dL/dw| (the
first-order Taylor estimate of their importance) keep their gradient; the gradient of every
other ranked entry is set to zero, so it moves only by the weight decay, accumulated in the
momentum buffer, and shrinks towards zero. After training the model is pruned by global
magnitude over P to exactly s, BatchNorm statistics are recomputed (``recompute_bn``) and the
pruning stability is recorded. The paper's tuned hyperparameter is the momentum
(``optim.momentum``, in the presets).

Which entries compete for the Q slots (``method.rank_over``):

- ``all`` (default; the paper's code, ZIB-IOL/BIMP ``GSM.during_training``): every parameter
  with a gradient, BatchNorm weights and biases included, while Q counts only P. At high
  sparsity BN parameters take a large share of the slots (ResNet-56 at 99%: about 2,000 of
  8,500), and unselected BN parameters and biases get no gradient.
- ``prunable``: only the weights of P (parameters outside P train normally). A correction of
  that accident: Q is meant as the number of weights of P that survive the final prune.

``recompute_bn`` (default true, as the reference): after the final prune one pass over the
training split in train mode refreshes BatchNorm's running statistics before the accuracy after
pruning is measured (the paper's code ran the final prune as an IMP step whose callback does
that pass, ``baseRunner.after_pruning_callback``).

GSM can start from scratch or from a trained dense model (the paper reports the better of the
two): with ``from_pretrained = true`` the run starts from the dense parent of ``parent_epochs``
epochs, trained once and shared exactly like IMP's (:func:`methods.base.dense_parent`; the
``parent_*`` keys make it the problem's standard dense model for every tuned variant), and then
trains ``budget.epochs`` epochs with its schedule compressed into them
(``pretrained_schedule``; see :class:`methods.base.PretrainedParams`).

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

from benchmark.config.run import RunConfig, check
from benchmark.pruning import compute_masks
from benchmark.pruning.flat import FlatBuffer, keep_count, topk_mask_, validate_counting
from methods.base import (
    MethodInfo,
    PretrainedMethod,
    PretrainedParams,
    TrainContext,
    pretrained_presets,
    register_method,
)


@dataclass
class GSMParams(PretrainedParams):
    """Hyperparameters of GSM.

    The from-pretrained keys (``from_pretrained``, ``parent_epochs``, ``pretrained_schedule``,
    ``parent_*``) are those of :class:`methods.base.PretrainedParams`. ``rank_over``: ``all``
    parameters with a gradient (the reference) or only the ``prunable`` weights;
    ``recompute_bn``: refresh BatchNorm statistics after the final prune.

    Attributes:
        rank_over: all (every parameter with a gradient competes for the top-Q slots, as the
            reference) or prunable (only the weights of P)
        recompute_bn: refresh the BatchNorm statistics (one train-mode pass over the training
            split) after the final prune
        counting: reference (Q = int((1 - s) N_P) slots, as the paper's code) or exact
            (Q = N_P - round(s N_P)); the final prune keeps N_P - round(s N_P) either way
    """

    rank_over: str = "all"
    recompute_bn: bool = True
    counting: str = "reference"


RANK_OVER = ("all", "prunable")


def ranked_parameters(ctx: TrainContext, rank_over: str) -> list[torch.nn.Parameter]:
    """The parameters whose entries compete for the kept slots (GSM, LC): all or only P."""
    if rank_over == "all":
        return [p for p in ctx.model.parameters() if p.requires_grad]
    return list(ctx.masks.params)


def grads_of(params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """The gradients of ``params``; zeros (not stored) for a parameter the loss did not reach."""
    return [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]


def validate_rank_over(cfg: RunConfig) -> None:
    """Check ``method.rank_over`` (raises ConfigError naming the field)."""
    value = cfg.method.params.rank_over
    check(value in RANK_OVER, "method.rank_over", value, "one of 'all', 'prunable'")


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
class GSM(PretrainedMethod):
    """Only the top-Q |w * grad| weights of P get their gradient; then global magnitude prune."""

    name = "gsm"
    graph_safe = True
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
        self.ranked: list[torch.nn.Parameter] = []
        self.keep = 0

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        super().validate(cfg)
        validate_rank_over(cfg)
        validate_counting(cfg.method.params.counting)

    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        self.ranked = ranked_parameters(ctx, self.params.rank_over)
        self.score = FlatBuffer(self.ranked)
        self.mask = FlatBuffer(self.ranked)
        # Q counts the weights of P that survive, whatever competes for the slots.
        self.keep = keep_count(ctx.masks, self.cfg.method.sparsity, self.params.counting)

    def before_step(self, step: int) -> None:
        assert self.score is not None and self.mask is not None
        params = self.ranked
        grads = grads_of(params)
        with torch.no_grad():
            torch._foreach_copy_(self.score.views, grads)
            torch._foreach_mul_(self.score.views, params)
            topk_mask_(self.score.flat.abs_(), self.keep, self.mask.flat)
            torch._foreach_mul_(grads, self.mask.views)

    def finalize(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        masks = compute_masks("global", ctx.prunable, self.cfg.method.sparsity)
        self.final_prune_with_stability(masks, recompute_bn=self.params.recompute_bn)
