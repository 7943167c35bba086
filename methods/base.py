"""The Method interface: the hooks the trainer calls.

A method sees the run through a :class:`TrainContext` and acts only through these hooks, so a new
method never touches the trainer. The default hooks train densely with the run's original
learning-rate schedule and keep any hard mask applied after every optimizer step."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn

from benchmark.config.method_registry import METHODS, register_method  # noqa: F401 (re-exported for plugins)

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig
    from benchmark.data.base import DataSource
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
    # Whether training steps are captured as CUDA graphs (benchmark.training.fast_step): a
    # per-iteration value then comes from a device tensor, not a Python number.
    captured_steps: bool = False

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
    # The [method] keys deciding param_groups' groups: runs that differ in them share no array.
    grouped_by: ClassVar[tuple[str, ...]] = ()
    # Whether the per-iteration hooks (CAPTURED_HOOKS) may be captured in a CUDA graph and
    # replayed (benchmark.training.fast_step): they do device work only, without host
    # synchronisation (no .item(), no int(tensor)), without Python state that changes between
    # iterations, and they read every value that varies between the iterations of one capture_key
    # from device tensors (written in on_iteration_start). None (undeclared): captured only if the
    # class overrides none of those hooks; False: every iteration eager, with a one-line warning.
    graph_safe: ClassVar[bool | None] = None
    # The tasks this method can train (None: every task), and the ``--set`` overrides that put
    # the method contract (``prunebench check-method``) on a tiny problem of one of them.
    tasks: ClassVar[tuple[str, ...] | None] = None
    contract_settings: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.params = cfg.method.params
        self.ctx: TrainContext | None = None
        # Whether the mask store holds a hard mask that every optimizer step must respect.
        self.masks_active = False

    @classmethod
    def ignored_fields(cls) -> frozenset[str]:
        """The ``[method]`` keys this method does not read; they are not part of its run id.
        By default ``sparsity`` when the goal sparsity is not specifiable (it emerges from the
        method's own hyperparameters), so sweeping it does not train the same run twice."""
        return frozenset() if cls.info.sparsity_specifiable else frozenset({"sparsity"})

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

    def schedule_lrs(self, iters_per_epoch: int) -> np.ndarray:
        """The per-iteration learning rates of the method's training (``ctx.original_lrs``):
        by default the run's schedule over :meth:`original_epochs`. Post-training FT runs at
        their smallest post-warm-up value."""
        from benchmark.schedules.original import original_lrs

        return original_lrs(self.cfg.schedule, self.original_epochs(), iters_per_epoch)

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

    def clipped_parameters(self) -> list[nn.Parameter]:
        """The parameters whose gradient norm ``optim.grad_clip`` bounds (the model's)."""
        return list(self.ctx.model.parameters())  # type: ignore[union-attr]

    # ----------------------------------------------------------------- per-iteration hooks
    def lr(self, step: int) -> float:
        """Learning rate of global iteration ``step`` (0-based)."""
        assert self.ctx is not None
        return float(self.ctx.original_lrs[step])

    def on_epoch_start(self, epoch: int) -> None:
        """Called before the first iteration of ``epoch`` (pruning points go here)."""

    def on_iteration_start(self, step: int) -> None:
        """Called before every iteration, always eagerly (never inside a captured graph).

        The place for host-side logic between epochs' boundaries (a mask refresh, a counter) and
        for per-iteration values, written in place into device tensors that the captured hooks
        read. It may change the contents of tensors, not which tensors the hooks use.
        """

    def capture_key(self, step: int) -> Hashable | None:
        """Which captured CUDA graph iteration ``step`` replays, or None to run it eagerly.

        Iterations with equal keys replay one graph, so the key must tell apart the iterations
        whose captured hooks differ (a Python branch, a Python number baked into the graph). The
        trainer captures again after every epoch boundary and every eager iteration, so a key
        only needs to hold within one epoch. Read only when the hooks are graph-safe.
        """
        return ()

    def before_forward(self, step: int) -> None:
        """Called before the forward pass (e.g. to swap in masked weights)."""

    def extra_loss(self, step: int) -> torch.Tensor | None:
        """A term added to the loss, or None."""
        return None

    def logged_loss_extra(self, step: int) -> torch.Tensor | None:
        """A term the logged training loss (``train_loss``) adds to the backpropagated loss, or
        None: a part of the paper's code's loss whose gradient this method applies another way
        (e.g. as weight decay in the optimizer), so that the logged loss is the quantity the
        paper's code logged. Computed before the optimizer step, detached, on the device."""
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
        """Install ``masks`` over P (and ``extra`` masks of other parameters) as the hard mask;
        the momentum of newly pruned entries is zeroed."""
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
        from benchmark.measure.metrics import pruning_stability

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


# The code a captured training step runs inside its CUDA graph (see Method.graph_safe): the
# per-iteration hooks, and the parametrization a reparametrizing method puts into the forward.
CAPTURED_HOOKS = (
    "before_forward",
    "extra_loss",
    "logged_loss_extra",
    "before_step",
    "after_step",
    "make_reparam",
    "batched_weights",
)


def hooks_graph_safe(cls: type[Method]) -> bool:
    """Whether ``cls``'s captured code may be captured.

    The nearest ``graph_safe`` declaration in the class hierarchy vouches for the class that
    makes it and what that class inherits, not for hooks a subclass overrides below it: a
    subclass that overrides a hook of a declared method must declare again. Undeclared, only
    the base class's hooks are safe.
    """
    mro = [k for k in cls.__mro__ if k is not Method and issubclass(k, Method)]
    declared = next((i for i, k in enumerate(mro) if "graph_safe" in k.__dict__), None)
    if declared is not None and mro[declared].__dict__["graph_safe"] is not True:
        return False
    limit = len(mro) if declared is None else declared
    # Any captured hook defined below the declaring class (or anywhere, undeclared) is unsafe.
    return not any(hook in k.__dict__ for k in mro[:limit] for hook in CAPTURED_HOOKS)


def dense_parent(
    cfg: RunConfig,
    epochs: int,
    weight_decay: float | None = None,
    *,
    optim: dict[str, Any] | None = None,
    schedule: dict[str, Any] | None = None,
) -> RunConfig:
    """The dense run a child starts from: same data, model, optimizer and seed as ``cfg``.

    It is an ordinary ``dense`` run (so it is trained once and shared by every child with the
    same parent config); ``weight_decay`` overrides the optimizer's when given, and the entries
    of ``optim`` and ``schedule`` that are not None override those sections' fields.
    """
    from benchmark.config.parse import replace_section
    from benchmark.config.run import BudgetConfig, FinetuneConfig, MethodConfig

    optim_changes = {k: v for k, v in (optim or {}).items() if v is not None}
    if weight_decay is not None:
        optim_changes["weight_decay"] = weight_decay
    return replace_section(
        cfg,
        optim=replace(cfg.optim, **optim_changes),
        schedule=overridden(cfg.schedule, schedule),
        budget=BudgetConfig(epochs=epochs),
        method=MethodConfig(name="dense", params=NoParams()),
        finetune=FinetuneConfig(),
    )


def overridden(section: Any, changes: dict[str, Any] | None) -> Any:
    """A copy of config ``section`` with the entries of ``changes`` that are not None set."""
    return replace(section, **{k: v for k, v in (changes or {}).items() if v is not None})


# --------------------------------------------------------------------------- from a trained model


# How the phase from a trained model sets its learning rates (``method.pretrained_schedule``).
PRETRAINED_SCHEDULES = ("compressed", "configured")


@dataclass
class PretrainedParams:
    """The from-a-trained-dense-model options of GSM and LC (the paper reports the better of
    from scratch and from the trained model; Appendix B: "we apply the methods for 10, 20 or 40
    epochs").

    ``from_pretrained``: start from the dense parent of ``parent_epochs`` epochs and train
    ``budget.epochs`` epochs (all other fields are ignored when false).

    ``pretrained_schedule``: the learning rates of those epochs. Neither the paper nor its code
    settles them (the reference code starts only IMP from a trained model; its ``main.py``: "IMP
    is the only strategy that requires a pretrained model"). ``compressed`` (default, our
    reading of "the learning rate schedule of tab:problem_config" for a shorter phase): the run's
    schedule (``schedule.*`` at its tuned initial lr) defined over ``parent_epochs`` and squeezed
    into ``budget.epochs`` by budget-aware conversion, as the reference's ``stepped`` retraining
    schedule converts the original one (its warm-up replaced by the peak lr: no warm-up from a
    trained model). CIFAR-10's 0.1/0.01/0.001 at epochs 90/180 of 200 becomes 0.1, 0.01, 0.001
    from epochs 4.5 and 9 of 10; a linear schedule decays to zero over the phase; the smallest
    level is post-training FT's lr. ``configured``: the schedule as configured over
    ``budget.epochs`` (a stepped schedule whose milestones lie beyond the phase never decays).

    The dense parent copies the run's data, model, seed and optimizer; ``parent_weight_decay``,
    ``parent_momentum``, ``parent_schedule`` (name), ``parent_lr`` and ``parent_values`` (the
    stepped levels) replace the run's values when set, so every tuned variant of a seed can
    start from one standard dense model (as IMP's ``parent_weight_decay``).

    Attributes:
        from_pretrained: start from a trained dense parent and train budget.epochs epochs
            instead of training from scratch (the other keys below are ignored when false)
        parent_epochs: epochs of the dense parent (used only with from_pretrained)
        pretrained_schedule: learning rates from the parent: compressed (the run's schedule
            over parent_epochs squeezed into budget.epochs) or configured (as configured over
            budget.epochs)
        parent_weight_decay: the dense parent's weight decay; unset: the run's
        parent_momentum: the dense parent's momentum; unset: the run's
        parent_schedule: the dense parent's schedule name; unset: the run's
        parent_lr: the dense parent's initial learning rate; unset: the run's
        parent_values: the dense parent's stepped learning-rate levels; unset: the run's
    """

    from_pretrained: bool = False
    parent_epochs: int = 10
    pretrained_schedule: str = "compressed"
    parent_weight_decay: float | None = None
    parent_momentum: float | None = None
    parent_schedule: str | None = None
    parent_lr: float | None = None
    parent_values: list[float] | None = None


def pretrained_parent(cfg: RunConfig) -> RunConfig | None:
    """The dense parent of a GSM/LC run with ``from_pretrained``, else None."""
    p = cfg.method.params
    if not p.from_pretrained:
        return None
    optim, schedule = {"momentum": p.parent_momentum}, _parent_schedule(p)
    return dense_parent(cfg, p.parent_epochs, p.parent_weight_decay, optim=optim, schedule=schedule)


def _parent_schedule(p: PretrainedParams) -> dict[str, Any]:
    """The dense parent's schedule fields that ``p`` sets (None: the run's)."""
    return {"name": p.parent_schedule, "lr": p.parent_lr, "values": p.parent_values}


# The parent's schedule fields and the method keys that set them (for error messages).
_PARENT_FIELDS = {
    "schedule.name": "method.parent_schedule",
    "schedule.lr": "method.parent_lr",
    "schedule.values": "method.parent_values",
}


def validate_pretrained(cfg: RunConfig) -> None:
    """Check the from-pretrained options (raises ConfigError naming the ``method.*`` field)."""
    from benchmark.config.run import MAX_EPOCHS, check
    from benchmark.core.errors import ConfigError
    from benchmark.schedules.original import validate_schedule

    p = cfg.method.params
    check(
        0 < p.parent_epochs <= MAX_EPOCHS,
        "method.parent_epochs",
        p.parent_epochs,
        f"an integer > 0 and <= {MAX_EPOCHS}",
    )
    check(
        p.pretrained_schedule in PRETRAINED_SCHEDULES,
        "method.pretrained_schedule",
        p.pretrained_schedule,
        "one of 'compressed', 'configured'",
    )
    wd, momentum = p.parent_weight_decay, p.parent_momentum
    check(wd is None or wd >= 0, "method.parent_weight_decay", wd, "a number >= 0, or unset")
    check(
        momentum is None or 0 <= momentum < 1,
        "method.parent_momentum",
        momentum,
        "a number in [0, 1), or unset",
    )
    if not p.from_pretrained:
        return
    try:  # the parent's schedule alone: a whole parent config costs ~20x more
        validate_schedule(overridden(cfg.schedule, _parent_schedule(p)), p.parent_epochs)
    except ConfigError as err:
        field = _PARENT_FIELDS.get(err.field, err.field)
        raise ConfigError(field, err.value, err.allowed, suggest=err.suggest) from None


def pretrained_presets(scratch: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """The ImageNet grid from a trained dense model: the method runs 10, 20 or 40 epochs, every
    variant from the standard ResNet-50 (stepped schedule, weight decay 1e-4, momentum 0.9)."""
    return {
        **scratch,
        "from_pretrained": [True],
        "parent_epochs": [90],
        "budget.epochs": [10, 20, 40],
        "parent_weight_decay": [1e-4],
        "parent_momentum": [0.9],
        "parent_schedule": ["stepped"],
    }


class PretrainedMethod(Method):
    """A method that also starts from a trained dense model (``Params`` extend
    :class:`PretrainedParams`): its parent, and the learning rates of its shorter phase."""

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        validate_pretrained(cfg)

    def parent_config(self) -> RunConfig | None:
        return pretrained_parent(self.cfg)

    def compresses(self) -> bool:
        """Whether this run squeezes its schedule over ``parent_epochs`` into its budget."""
        return self.params.from_pretrained and self.params.pretrained_schedule == "compressed"

    def original_epochs(self) -> int:
        return self.params.parent_epochs if self.compresses() else self.cfg.budget.epochs

    def schedule_lrs(self, iters_per_epoch: int) -> np.ndarray:
        full = super().schedule_lrs(iters_per_epoch)
        if not self.compresses():
            return full
        return compressed_lrs(self.cfg, full, iters_per_epoch, self.total_epochs())


def compressed_lrs(
    cfg: RunConfig, full: np.ndarray, iters_per_epoch: int, epochs: int
) -> np.ndarray:
    """``full`` (the run's schedule over its original epochs) squeezed into ``epochs`` epochs by
    budget-aware conversion: lr(k) = full[floor(k * len(full) / n)], with the warm-up of
    ``full`` at the peak lr (as the reference's ``stepped`` retraining schedule)."""
    from benchmark.schedules.original import original_warmup_iters
    from benchmark.schedules.retraining import retrain_lrs

    warmup = original_warmup_iters(cfg.schedule, iters_per_epoch)
    # "tuned-stepped" at the schedule's own peak is exactly that conversion, without warm-up.
    peak = float(full.max())
    return retrain_lrs(
        "tuned-stepped", epochs * iters_per_epoch, full, original_warmup=warmup, initial_lr=peak
    )
