"""LC: learning-compression pruning (Carreira-Perpinan and Idelbayev 2018).

Two variants (``method.variant``):

- ``decay`` (default; the form the paper uses): every iteration the K = int((1 - s) N_P) ranked
  entries of largest magnitude are not decayed at all while all other ranked entries are decayed
  with the coefficient wd_t = ``optim.weight_decay`` * f(t), pushing the entries that would be
  pruned to zero. The decay is added to the gradient in ``before_step``
  (grad += wd_t w (1 - topK)); the ranked parameters get no optimizer weight decay, every other
  parameter keeps the run's. f is ``wd_schedule``:

  - ``constant`` (default): f = 1. This is the paper's code (ZIB-IOL/BIMP, latest
    ``LC.during_training``: the optimizer's ordinary weight decay, cancelled on the top K), and
    the paper: "LC: We only tune the weight decay", no extra hyperparameter.
  - ``geometric``: per iteration from ``wd_start_factor`` at the first to ``wd_end_factor`` at
    the last iteration of the run (a constant ratio per iteration); found in no version of the
    reference, kept as an option,
  - ``epoch``: ``wd_start_factor`` * ``decay_growth`` ** epoch (multiplied every epoch).

  Which entries are ranked (``method.rank_over``): ``all`` (default, the reference) ranks |w|
  over every parameter with a gradient, BatchNorm weights and biases included, with K counting
  only P, so at high sparsity BN parameters take kept slots and unselected ones are decayed;
  ``prunable`` ranks only the weights of P (a correction of that accident: K is meant as the
  number of weights of P that survive the final prune).

- ``lc``: the original learning-compression algorithm. The L step trains on
  loss + mu/2 ||w - theta||^2 over P (the penalty's gradient mu (w - theta) is added directly to
  the gradient; all parameters keep the run's weight decay); the C step sets theta to the
  projection of w onto its K largest magnitudes (global over P). The first C step is at the
  first iteration (theta = the direct compression of the initial weights), then one every
  ``c_step_every`` iterations (0: at the start of every epoch); mu is ``mu_0`` * ``mu_growth`` ** j
  after the j-th C step (j = 0 for the first one).

Both variants end with global magnitude pruning of P to exactly s (in the ``lc`` variant that is
the final C step), recompute BatchNorm's running statistics with one train-mode pass over the
training split (``recompute_bn``, default true: the reference ran the final prune as an IMP step
whose ``after_pruning_callback`` does that pass) and record the pruning stability. Like GSM, LC
can start from scratch or from a trained dense model (``from_pretrained``, ``parent_epochs``,
``pretrained_schedule`` and the ``parent_*`` keys of :class:`methods.base.PretrainedParams`; the
parent is shared as IMP's).

Implementation: the magnitudes, the top-K mask and the decay term live in flat buffers over P;
per iteration there are two fused copies/adds, one ``torch.topk`` and no host synchronisation.
The coefficients wd_t and mu are Python functions of the iteration, so resuming needs only theta
(checkpointed in the ``lc`` variant).

Differences from Carreira-Perpinan and Idelbayev (the task description is followed): their L
step runs SGD to (approximate) convergence between C steps with a per-step learning-rate
schedule; here the L step is the run's ordinary training, with the run's learning-rate schedule,
interleaved with C steps on a fixed period.
"""

from __future__ import annotations

from collections.abc import Hashable
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
from methods.gsm import grads_of, ranked_parameters, validate_rank_over

VARIANTS = ("decay", "lc")
WD_SCHEDULES = ("constant", "geometric", "epoch")


@dataclass
class LCParams(PretrainedParams):
    """Hyperparameters of LC.

    ``decay`` variant: ``wd_schedule`` ``constant`` (the reference), or ``geometric`` with
    ``wd_start_factor``/``wd_end_factor``, or ``epoch`` with ``wd_start_factor``/``decay_growth``;
    ``rank_over`` ``all`` (the reference) or ``prunable``. ``lc`` variant: ``mu_0``,
    ``mu_growth`` and ``c_step_every`` (iterations; 0 = every epoch). ``from_pretrained``,
    ``recompute_bn`` and the from-pretrained keys as GSM.

    Attributes:
        variant: decay (decay the would-be-pruned weights; the paper's form) or lc (the
            original learning-compression L and C steps)
        wd_schedule: decay variant: constant (optim.weight_decay, the reference), geometric
            (per iteration from wd_start_factor to wd_end_factor times it) or epoch (times
            decay_growth every epoch)
        wd_start_factor: decay variant, geometric/epoch: factor of optim.weight_decay at the
            first iteration
        wd_end_factor: decay variant, geometric: factor of optim.weight_decay at the last
            iteration
        decay_growth: decay variant, epoch: the factor multiplies by this every epoch
        mu_0: lc variant: penalty weight mu of the first C step
        mu_growth: lc variant: mu multiplies by this after every C step
        c_step_every: lc variant: iterations between C steps; 0: one at the start of every epoch
        rank_over: all (every parameter with a gradient competes for the top-K slots, as the
            reference) or prunable (only the weights of P)
        recompute_bn: refresh the BatchNorm statistics (one train-mode pass over the training
            split) after the final prune
        counting: reference (K = int((1 - s) N_P), as the paper's code) or exact
            (K = N_P - round(s N_P)); the final prune keeps N_P - round(s N_P) either way
    """

    variant: str = "decay"
    wd_schedule: str = "constant"
    wd_start_factor: float = 1.0
    wd_end_factor: float = 100.0
    decay_growth: float = 1.1
    mu_0: float = 1e-4
    mu_growth: float = 1.1
    c_step_every: int = 0
    rank_over: str = "all"
    recompute_bn: bool = True
    counting: str = "reference"


# Grids of the paper, Appendix B.3: LC tunes only the weight decay (and, as every method, the
# learning rate and, on CIFAR-100 and ImageNet, the stepped or linear schedule). On ImageNet it
# runs from scratch or from the trained dense model; the paper reports the better of the two.
_IMAGENET = {"optim.weight_decay": [1e-4, 1e-5], "schedule.name": ["stepped", "linear"]}
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
    "imagenet": _IMAGENET,
    "imagenet-pretrained": pretrained_presets(_IMAGENET),
}


@register_method
class LC(PretrainedMethod):
    """Decay of the weights outside the top-K (or the original L/C steps); then prune."""

    name = "lc"
    graph_safe = True
    Params = LCParams
    info = MethodInfo(
        sparsity_specifiable=True,
        pruning_stable=True,
        sparsity_agnostic=False,
        extra_hyperparameters=0,
        summary="learning-compression: decay of all but the top-K weights, then prune",
    )
    presets = _PRESETS
    # The decay variant keeps the ranked parameters (all, or P less method.exclude) in a group.
    grouped_by = ("variant", "rank_over")

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.work: FlatBuffer | None = None
        self.top: FlatBuffer | None = None
        self.magnitude: torch.Tensor | None = None
        self.theta: FlatBuffer | None = None
        self.ranked: list[torch.nn.Parameter] = []
        self.keep = 0
        # The C steps done so far (lc variant); the last one's mu is mu_0 * mu_growth ** (n - 1).
        self.c_steps = 0
        self.decay_now: torch.Tensor | None = None

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        p = cfg.method.params
        check(p.variant in VARIANTS, "method.variant", p.variant, "one of 'decay', 'lc'")
        check(
            p.wd_schedule in WD_SCHEDULES,
            "method.wd_schedule",
            p.wd_schedule,
            "one of 'constant', 'geometric', 'epoch'",
        )
        check(p.wd_start_factor > 0, "method.wd_start_factor", p.wd_start_factor, "a number > 0")
        check(
            p.wd_end_factor >= p.wd_start_factor,
            "method.wd_end_factor",
            p.wd_end_factor,
            f"a number >= method.wd_start_factor = {p.wd_start_factor} (the decay grows)",
        )
        check(p.decay_growth >= 1, "method.decay_growth", p.decay_growth, "a number >= 1")
        check(p.mu_0 > 0, "method.mu_0", p.mu_0, "a number > 0")
        check(p.mu_growth >= 1, "method.mu_growth", p.mu_growth, "a number >= 1")
        check(p.c_step_every >= 0, "method.c_step_every", p.c_step_every, "an integer >= 0")
        if p.variant == "decay":
            wd = cfg.optim.weight_decay
            check(wd > 0, "optim.weight_decay", wd, "a number > 0 (LC's decay variant scales it)")
        super().validate(cfg)
        validate_rank_over(cfg)
        validate_counting(p.counting)

    # ---------------------------------------------------------------- schedules
    def decay_coefficient(self, step: int) -> float:
        """wd_t: the decay of the non-top-K weights of P at global iteration ``step``."""
        assert self.ctx is not None
        p = self.params
        if p.wd_schedule == "constant":
            return self.cfg.optim.weight_decay
        if p.wd_schedule == "epoch":
            factor = p.wd_start_factor * p.decay_growth ** (step // self.ctx.iters_per_epoch)
        else:
            last = max(self.total_epochs() * self.ctx.iters_per_epoch - 1, 1)
            ratio = p.wd_end_factor / p.wd_start_factor
            factor = p.wd_start_factor * ratio ** (step / last)
        return self.cfg.optim.weight_decay * factor

    def c_step_period(self) -> int:
        """Iterations between two C steps (lc variant)."""
        assert self.ctx is not None
        return self.params.c_step_every or self.ctx.iters_per_epoch

    def mu(self, step: int) -> float:
        """The penalty coefficient mu of the L step at global iteration ``step`` (lc variant)."""
        return self.params.mu_0 * self.params.mu_growth ** (step // self.c_step_period())

    # ---------------------------------------------------------------- hooks
    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        params = ctx.masks.params
        self.keep = keep_count(ctx.masks, self.cfg.method.sparsity, self.params.counting)
        if self.params.variant == "lc":
            self.ranked = list(params)
            self.theta = FlatBuffer(params)
        else:
            self.ranked = ranked_parameters(ctx, self.params.rank_over)
            self.theta = None
        self.work = FlatBuffer(self.ranked)
        # |work|, written in place every decay step instead of a new tensor per step.
        self.magnitude = torch.empty_like(self.work.flat)
        self.top = FlatBuffer(self.ranked, dtype=torch.bool)
        self.c_steps = 0
        # The geometric decay changes every iteration: captured, it is a device scalar (a Python
        # number would be baked into the graph); eager, the exact one-kernel add as before.
        geometric = self.params.variant == "decay" and self.params.wd_schedule == "geometric"
        self.decay_now = (
            torch.zeros((), device=ctx.device) if geometric and ctx.captured_steps else None
        )

    def param_groups(self) -> list[dict[str, Any]]:
        if self.params.variant == "lc":
            return super().param_groups()
        ctx = self.ctx
        assert ctx is not None
        # The ranked parameters are decayed by before_step only (and not at all in their top K).
        ranked = {id(p) for p in self.ranked}
        others = [p for p in ctx.model.parameters() if id(p) not in ranked]
        groups: list[dict[str, Any]] = [{"params": list(self.ranked), "weight_decay": 0.0}]
        if others:
            groups.append({"params": others})
        return groups

    def on_iteration_start(self, step: int) -> None:
        # Eager, outside the captured step: host-side counting and per-iteration values.
        if self.params.variant == "lc":
            if step % self.c_step_period() == 0:
                self.c_step()
        elif self.decay_now is not None:
            self.decay_now.fill_(self.decay_coefficient(step))

    def capture_key(self, step: int) -> Hashable | None:
        # mu is a Python number of the captured penalty step: one graph per value.
        return ("mu", self.mu(step)) if self.params.variant == "lc" else ()

    def before_step(self, step: int) -> None:
        if self.params.variant == "decay":
            self.decay_step(step)
        else:
            self.penalty_step(step)

    def finalize(self) -> None:
        ctx = self.ctx
        assert ctx is not None
        masks = compute_masks("global", ctx.prunable, self.cfg.method.sparsity)
        self.final_prune_with_stability(masks, recompute_bn=self.params.recompute_bn)
        if self.params.variant == "decay":
            last = self.total_epochs() * ctx.iters_per_epoch - 1
            ctx.record["lc"] = {"final_decay": self.decay_coefficient(last)}
        else:
            mu = self.params.mu_0 * self.params.mu_growth ** max(self.c_steps - 1, 0)
            ctx.record["lc"] = {"c_steps": self.c_steps, "final_mu": mu}

    # ---------------------------------------------------------------- the steps
    def decay_step(self, step: int) -> None:
        """grad += wd_t w over the ranked entries outside the K largest magnitudes."""
        assert self.work is not None and self.top is not None
        params = self.ranked
        with torch.no_grad():
            torch._foreach_copy_(self.work.views, params)
            magnitude = torch.abs(self.work.flat, out=self.magnitude)
            topk_mask_(magnitude, self.keep, self.top.flat)
            self.work.flat.masked_fill_(self.top.flat, 0.0)
            grads = grads_of(params)
            if self.decay_now is not None:
                self.work.flat.mul_(self.decay_now)
                torch._foreach_add_(grads, self.work.views)
            else:
                torch._foreach_add_(grads, self.work.views, alpha=self.decay_coefficient(step))

    def c_step(self) -> None:
        """theta = the projection of w onto its K largest magnitudes over P."""
        ctx = self.ctx
        assert ctx is not None and self.theta is not None and self.top is not None
        with torch.no_grad():
            torch._foreach_copy_(self.theta.views, ctx.masks.params)
            topk_mask_(self.theta.flat.abs(), self.keep, self.top.flat)
            self.theta.flat.masked_fill_(~self.top.flat, 0.0)
        self.c_steps += 1

    def penalty_step(self, step: int) -> None:
        """grad += mu (w - theta): the gradient of mu/2 ||w - theta||^2 over P."""
        ctx = self.ctx
        assert ctx is not None and self.theta is not None
        mu = self.mu(step)
        params = ctx.masks.params
        grads = [p.grad for p in params]
        with torch.no_grad():
            torch._foreach_add_(grads, params, alpha=mu)
            torch._foreach_add_(grads, self.theta.views, alpha=-mu)

    # ---------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        theta = self.theta.flat.detach().clone() if self.theta is not None else None
        state.update({"theta": theta, "c_steps": self.c_steps})
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.c_steps = int(state["c_steps"])
        if self.theta is not None:
            self.theta.flat.copy_(state["theta"])
