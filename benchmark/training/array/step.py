"""The array's training iteration: the K runs' batches in, one forward/backward/SGD step out.

Every run keeps its own epoch loop (:class:`~benchmark.training.loop.EpochLoop`): it draws its
own batch (its seed, order and augmentation, exactly as alone), sets its own learning rate and
hands the batch to its :class:`MemberRunner` instead of stepping. When every live run has handed
in its batch, :class:`ArrayStep` trains all of them at once: the K models' forward on the
stacked batches, the sum of the K mean losses (so that each run's gradient is its own), one
backward, one :class:`~benchmark.training.array.optim.ArraySGD` step, then each run's own
per-step hook (its hard mask) and its own loss sum.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.training.array.optim import ArraySGD
from benchmark.training.array.stack import StackedModels
from benchmark.training.fast_step import StepPlan, StepStats
from methods.base import Method

# Per-iteration hooks an array cannot run for each run on its own slice (they change the
# forward, the loss or the gradients of one model); a method overriding one trains packed.
UNFUSED_HOOKS = (
    "before_forward",
    "extra_loss",
    "logged_loss_extra",
    "before_step",
    "on_iteration_start",
    "make_reparam",
    "batched_weights",
)


def method_fuses(cls: type[Method]) -> str:
    """Why runs of method ``cls`` cannot share an array ("" when they can)."""
    for hook in UNFUSED_HOOKS:
        if getattr(cls, hook, None) is not getattr(Method, hook, None):
            return f"method {cls.name!r} has its own per-iteration hook {hook}"
    return ""


def model_fuses(model: nn.Module) -> str:
    """Why copies of ``model`` cannot share an array ("" when they can)."""
    for module in model.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            return f"the model draws random numbers in its forward ({type(module).__name__})"
    return ""


class MemberRunner:
    """Stands in for a run's :class:`~benchmark.training.fast_step.StepRunner`: hands each
    iteration to the array rather than stepping alone."""

    def __init__(self, array: ArrayStep, index: int, alone: StepPlan) -> None:
        self.array = array
        self.index = index
        # ``alone``: the run's plan had it trained alone; the array's step is eager for now.
        why = "trained in an array, whose step is not captured" if alone.capture else ""
        self.plan = StepPlan(channels_last=alone.channels_last, why_eager=why)
        self.stats = StepStats()

    def invalidate(self) -> None:
        """Nothing is captured (the runner's interface)."""

    def run(self, x: Tensor, y: Tensor, step: int) -> float:
        """Hand in iteration ``step``'s batch; the array steps once every live run has."""
        self.stats.eager += 1
        self.array.deposit(self.index, x, y, step)
        return 0.0


class ArrayStep:
    """The K trainers of an array, their stacked models and optimizer, and their batches."""

    def __init__(self, trainers: list[Any], layout: str) -> None:
        self.trainers = trainers
        self.k = len(trainers)
        for trainer in trainers:
            # Learning rates as Python floats (read into the [K] tables, no device sync).
            trainer.device_lrs = None
            for group in trainer.optimizer.param_groups:
                lr = group["lr"]
                group["lr"] = float(lr.item() if isinstance(lr, Tensor) else lr)
                group["fused"] = None
        with warnings.catch_warnings():
            # The leaves' gradients are views of one [K, D] tensor, by design.
            warnings.filterwarnings("ignore", "grad and param do not obey")
            self.stacked = StackedModels([t.model for t in trainers], layout)
        self.sgd = ArraySGD(self.stacked, [t.optimizer for t in trainers])
        self.live = set(range(self.k))
        self.pending: dict[int, tuple[Tensor, Tensor, int]] = {}
        self.steps = 0
        for k, trainer in enumerate(trainers):
            trainer.runner = MemberRunner(self, k, trainer.runner.plan)
            trainer.stream_only = True  # the array's memory peak is no run's own

    def record(self) -> dict[str, Any]:
        """What a run's record says of the array it trained in."""
        return {
            "size": self.k,
            "runs": [t.cfg.run_id for t in self.trainers],
            "layout": self.stacked.layout,
        }

    def retire(self, k: int) -> None:
        """Run ``k`` ended (finished, failed or diverged): the others go on without it."""
        if k not in self.live:
            return
        self.live.discard(k)
        self.sgd.freeze(k)
        self.pending.pop(k, None)
        if self.live and set(self.pending) == self.live:
            self._step()

    def deposit(self, k: int, x: Tensor, y: Tensor, step: int) -> None:
        """Run ``k``'s batch of iteration ``step``; steps the array once every live run's is in."""
        self.pending[k] = (x, y, step)
        if set(self.pending) == self.live:
            self._step()

    def _step(self) -> None:
        batches, self.pending = self.pending, {}
        ref = next(iter(batches.values()))[0]
        xs = [batches[k][0] if k in batches else torch.zeros_like(ref) for k in range(self.k)]
        stacked = self.stacked
        if any(step % self.trainers[k].ipe == 0 for k, (_, _, step) in batches.items()):
            # An epoch's first iteration follows the runs' epoch-boundary hooks, which may have
            # replaced a run's parameter tensors (their values are kept) or cleared its
            # optimizer's state (BIMP's fresh optimizer: its momentum restarts from zero).
            if not stacked.linked():
                stacked.relink()
            for k in batches:
                self.sgd.adopt(k)
        # The template's mode is the array's: every live run trains (run 0 may have ended in
        # the middle of its evaluation, leaving its model in eval mode).
        stacked.template.train()
        with self.trainers[0]._autocast:
            out = stacked.forward(torch.stack(xs))
            losses = {
                k: self.trainers[k].task.loss(_Fixed(out[k]), x, y)
                for k, (x, y, _) in batches.items()
            }
            total = torch.stack(list(losses.values())).sum()
        stacked.zero_grad()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "grad and param do not obey")
            total.backward()
        self.sgd.step()
        for k, (x, _, step) in batches.items():
            trainer = self.trainers[k]
            if trainer.in_method:
                trainer.method.after_step(step)
            elif trainer.ctx.masks is not None:
                trainer.ctx.masks.apply()
            trainer.loss_sum += losses[k].detach() * x.shape[0]
        self.steps += 1


class _Fixed:
    """A "model" returning precomputed outputs, so a run's task computes its own loss."""

    def __init__(self, out: Tensor) -> None:
        self.out = out

    def __call__(self, _inputs: Tensor) -> Tensor:
        return self.out
