"""The Method interface: the hooks the trainer calls, and the method registry.

A method sees the run through a :class:`TrainContext` and acts only through these hooks, so a new
method never touches the trainer. The default hooks train densely with the run's original
learning-rate schedule and keep any hard mask applied after every optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn

from benchmark.registry import Registry

if TYPE_CHECKING:
    from benchmark.config import RunConfig
    from benchmark.data import DataSource
    from benchmark.pruning import MaskStore


@dataclass(frozen=True)
class MethodInfo:
    """What the paper's "Overview of sparsification methods" table says about a method."""

    sparsity_specifiable: bool
    pruning_stable: bool
    sparsity_agnostic: bool
    extra_hyperparameters: int
    summary: str


@dataclass
class NoParams:
    """A method without hyperparameters of its own."""


@dataclass
class TrainContext:
    """What the trainer shares with a method: model, data, masks, optimizer and evaluation."""

    cfg: RunConfig
    model: nn.Module
    data: DataSource
    device: torch.device
    masks: MaskStore
    iters_per_epoch: int
    evaluate: Callable[[str], dict[str, float]]
    original_lrs: np.ndarray
    optimizer: torch.optim.Optimizer | None = None
    # Metrics a method reports into the result (e.g. pruning stability, per-cycle records).
    record: dict[str, Any] = field(default_factory=dict)
    # Recomputes BatchNorm running statistics of the current network (set by the trainer).
    recompute_batchnorm: Callable[[], None] | None = None

    @property
    def prunable(self) -> list[tuple[str, nn.Parameter]]:
        """The prunable set P as (name, parameter) pairs."""
        return list(zip(self.masks.names, self.masks.params, strict=True))


class Method:
    """Base class of every pruning method; subclasses override the hooks they need."""

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams
    info: ClassVar[MethodInfo]
    # The budget fields this method reads; the others are ignored and not part of the run id.
    budget_fields: ClassVar[frozenset[str]] = frozenset({"epochs"})
    # Named hyperparameter presets (e.g. the paper's grids), used by grid files.
    presets: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.params = cfg.method.params
        self.ctx: TrainContext | None = None
        # Whether the mask store holds a hard mask that every optimizer step must respect.
        self.masks_active = False

    # ----------------------------------------------------------------- planning (no compute)
    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        """Cross-field checks of this method's hyperparameters; raise ConfigError."""

    def total_epochs(self) -> int:
        """Epochs this method trains (its share of the budget)."""
        return self.cfg.budget.epochs

    def original_epochs(self) -> int:
        """Epochs of the original schedule this method's learning rates derive from."""
        return self.cfg.budget.epochs

    def parent_config(self) -> RunConfig | None:
        """The config of a trained dense parent this run starts from, or None."""
        return None

    # ----------------------------------------------------------------- setup
    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        """Prepare the model (load the parent, add parameters); called before the optimizer."""
        self.ctx = ctx
        if parent_state is not None:
            ctx.model.load_state_dict(parent_state)

    def param_groups(self) -> list[dict[str, Any]]:
        """Optimizer parameter groups; by default every model parameter with weight decay."""
        assert self.ctx is not None
        return [{"params": list(self.ctx.model.parameters())}]

    # ----------------------------------------------------------------- per-iteration hooks
    def lr(self, step: int) -> float:
        """Learning rate of global iteration ``step`` (0-based)."""
        assert self.ctx is not None
        return float(self.ctx.original_lrs[step])

    def on_epoch_start(self, epoch: int) -> None:
        """Called before the first iteration of ``epoch`` (pruning points go here)."""

    def before_forward(self, step: int) -> None:
        """Called before the forward pass (e.g. to swap in masked weights)."""

    def extra_loss(self, step: int) -> torch.Tensor | None:
        """A term added to the loss, or None."""
        return None

    def before_step(self, step: int) -> None:
        """Called after backward, before the optimizer step (gradient surgery)."""

    def after_step(self, step: int) -> None:
        """Called after the optimizer step; by default re-applies an active hard mask."""
        if self.masks_active:
            assert self.ctx is not None
            self.ctx.masks.apply()

    def on_epoch_end(self, epoch: int) -> bool:
        """Called after the last iteration of ``epoch``; True when a prune-retrain cycle ended."""
        return False

    def current_sparsity(self) -> float:
        """Sparsity over P of the network as trained right now (for the per-epoch history)."""
        assert self.ctx is not None
        return self.ctx.masks.sparsity()

    def finalize(self) -> None:
        """The final hard prune (and its pruning-stability measurement), after training."""

    # ----------------------------------------------------------------- helpers for subclasses
    def hard_prune(
        self, masks: list[torch.Tensor], extra: dict[str, torch.Tensor] | None = None
    ) -> None:
        """Install ``masks`` over P (and ``extra`` masks of other parameters) as the hard mask.

        The momentum of newly pruned entries is zeroed.
        """
        assert self.ctx is not None
        self.ctx.masks.update(masks, self.ctx.optimizer)
        if extra:
            self.ctx.masks.set_extra(self.ctx.model, extra, self.ctx.optimizer)
        self.masks_active = True

    def recompute_batchnorm(self) -> None:
        """Recompute BatchNorm running statistics on the network as it is now.

        The paper's code evaluates the training split in train mode right after its final prune
        (``after_pruning_callback``), which refreshes the statistics of the pruned network before
        the test evaluation; the trainer does the same pass (no gradients, no optimizer step).
        """
        assert self.ctx is not None
        if self.ctx.recompute_batchnorm is not None:
            self.ctx.recompute_batchnorm()

    def final_prune_with_stability(
        self,
        masks: list[torch.Tensor],
        extra: dict[str, torch.Tensor] | None = None,
        recompute_bn: bool = False,
    ) -> None:
        """Hard-prune to ``masks`` and record test accuracy before/after and the stability.

        With ``recompute_bn`` the BatchNorm statistics are recomputed right after pruning
        (:meth:`recompute_batchnorm`), before the accuracy after pruning is measured.
        """
        from benchmark.metrics import pruning_stability

        assert self.ctx is not None
        before = self.ctx.evaluate("test")["top1"]
        self.hard_prune(masks, extra)
        if recompute_bn:
            self.recompute_batchnorm()
        after = self.ctx.evaluate("test")["top1"]
        self.ctx.record["stability"] = {
            "acc_before": before,
            "acc_after": after,
            "pruning_stability": pruning_stability(before, after),
        }

    # ----------------------------------------------------------------- checkpointing
    def state_dict(self) -> dict[str, Any]:
        """Method state to checkpoint (masks are checkpointed by the trainer)."""
        return {"masks_active": self.masks_active}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.masks_active = bool(state.get("masks_active", False))


METHODS: Registry[type[Method]] = Registry("method")


def register_method(cls: type[Method]) -> type[Method]:
    """Class decorator: register a Method subclass under its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    METHODS.add(cls.name, cls)
    return cls


def dense_parent(cfg: RunConfig, epochs: int, weight_decay: float | None = None) -> RunConfig:
    """The dense run a child starts from: same data, model, optimizer and seed as ``cfg``.

    It is an ordinary ``dense`` run (so it is trained once and shared by every child with the
    same parent config); ``weight_decay`` overrides the optimizer's when given.
    """
    import dataclasses

    from benchmark.config import BudgetConfig, FinetuneConfig, MethodConfig, replace_section

    optim = cfg.optim
    if weight_decay is not None:
        optim = dataclasses.replace(optim, weight_decay=weight_decay)
    return replace_section(
        cfg,
        optim=optim,
        budget=BudgetConfig(epochs=epochs),
        method=MethodConfig(name="dense", params=NoParams()),
        finetune=FinetuneConfig(),
    )


# --------------------------------------------------------------------------- from a trained model


def pretrained_parent(cfg: RunConfig) -> RunConfig | None:
    """The dense parent of a GSM/LC run with ``from_pretrained``, else None."""
    p = cfg.method.params
    return dense_parent(cfg, p.parent_epochs) if p.from_pretrained else None


def validate_pretrained(cfg: RunConfig) -> None:
    """Check ``parent_epochs`` (raises ConfigError naming ``method.parent_epochs``)."""
    from benchmark.config import check

    p = cfg.method.params
    check(p.parent_epochs > 0, "method.parent_epochs", p.parent_epochs, "an integer > 0")


def pretrained_presets(scratch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The ImageNet grid from a trained dense model: the method runs 10, 20 or 40 epochs."""
    return {
        **scratch,
        "from_pretrained": [True],
        "parent_epochs": [90],
        "budget.epochs": [10, 20, 40],
    }
