"""Shared machinery of STR, CS and DST: weights reparametrized by extra trainable parameters.

Each prunable weight w of the set P gets a ``torch.nn.utils.parametrize`` parametrization (a
:class:`WeightReparam`) that owns the method's extra parameters and computes the weight the
layer uses, f(w). The original ``nn.Parameter`` object stays the trained tensor (it lives at
``module.parametrizations.weight.original``), so the core's mask store and the optimizer keep
referring to it, and the extra parameters are part of ``model.state_dict()``, so epoch
checkpoints and resume need nothing else: ``setup`` builds the same structure again before the
checkpoint is loaded.

At the end of training :meth:`ReparamMethod.finalize` records the test accuracy of the
reparametrized model, switches every parametrization to its final (hard) form, removes the
parametrizations keeping the final weights (exact zeros where pruned), installs the zero
pattern as the hard mask and records the test accuracy again (the pruning stability).

Inside a model forward, a method that defines :meth:`ReparamMethod.batched_weights` computes all
layers' weights in one pass over the flat vector of P instead (``runtime.reparam = "batched"``,
the default; methods._batched): the same values from a few dozen operations instead of ~20 per
layer, which is what a GPU step of these methods spends its time on.

A checkpoint written after ``finalize`` (during post-training fine-tuning) holds the plain
model. ``setup`` cannot know that yet (the trainer loads the model's state before the method's),
so a load-state-dict pre-hook on the model removes the parametrizations when the incoming state
dict has the plain weight names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize
from torch.utils.hooks import RemovableHandle

from benchmark.measure.metrics import pruning_stability
from benchmark.pruning import PRUNABLE_TYPES, MaskStore
from methods._batched import BatchedWeights, FlatLayout
from methods.base import Method, TrainContext

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig

WEIGHT = "weight"
# ``method.decay`` of CS and DST: the paper code's doubled decay of P, or weight decay once.
DECAY_MODES = ("reference", "once")


class WeightReparam(nn.Module):
    """A parametrization of one prunable weight: ``forward(w)`` is the weight the layer uses.

    Subclasses define :meth:`weight_of`, the layer's own formula. ``final`` switches it to the
    form the pruned model keeps after training. Inside a model forward of a method that batches
    its layers (``runtime.reparam = "batched"``), ``forward`` returns this layer's share of the
    method's one pass over all of P instead (the same values, see methods._batched).
    """

    def __init__(self) -> None:
        super().__init__()
        self.final = False
        self.batch: BatchedWeights | None = None
        self.index = -1

    def forward(self, weight: Tensor) -> Tensor:
        """The weight the layer uses."""
        if self.batch is not None and not self.final:
            shared = self.batch.get(self.index)
            if shared is not None:
                return shared
        return self.weight_of(weight)

    def weight_of(self, weight: Tensor) -> Tensor:
        """This layer's weight computed on its own (also the final form when ``final``)."""
        raise NotImplementedError

    def keep_mask(self, weight: Tensor) -> Tensor:
        """The ``bool`` mask of the entries that would survive if training stopped now."""
        raise NotImplementedError


Reparam = TypeVar("Reparam", bound=WeightReparam)


def validate_decay(cfg: RunConfig) -> None:
    """Check ``method.decay`` of CS or DST (raises ConfigError naming the field)."""
    from benchmark.config.run import check

    value = cfg.method.params.decay
    check(value in DECAY_MODES, "method.decay", value, "one of 'reference', 'once'")


def owner_name(param_name: str) -> str:
    """The module name of the prunable weight called ``param_name`` ('' for the root)."""
    return param_name[: -len(WEIGHT)].rstrip(".")


def _check_untied(model: nn.Module, params: list[nn.Parameter]) -> None:
    """Raise if a prunable weight is shared by several layers (only one would be reparametrized)."""
    ids = {id(p) for p in params}
    owners: dict[int, int] = {}
    for module in model.modules():
        if isinstance(module, PRUNABLE_TYPES) and id(module.weight) in ids:
            owners[id(module.weight)] = owners.get(id(module.weight), 0) + 1
    tied = [k for k, n in owners.items() if n > 1]
    if tied:
        raise ValueError("STR, CS and DST do not support weights shared by several layers")


class ReparamMethod(Method):
    """Base of the methods whose extra parameters reparametrize every prunable weight.

    Subclasses define :meth:`make_reparam` and whether weight decay applies to the extra
    parameters (``decay_extra``); the weights, biases and batch-norm parameters get the run's
    weight decay once. A method whose params have ``decay = "reference"`` (CS, DST) decays as
    the paper's code did instead: its loss adds 1/2 wd ||w||^2 over P on top of SGD's weight
    decay on every parameter, so the weights of P are decayed twice and the extra parameters
    once (here as an SGD group with 2 wd for P: the same gradient, without a loss term). The
    logged training loss still includes that term (:meth:`logged_loss_extra`), as the paper's
    code logged it.
    """

    decay_extra: ClassVar[bool] = True

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.reparams: list[WeightReparam] = []
        self.owners: list[nn.Module] = []
        self._hook: RemovableHandle | None = None
        self._batch_hooks: list[RemovableHandle] = []
        self._layout: FlatLayout | None = None

    # ---------------------------------------------------------------- what subclasses define
    def make_reparam(self, weight: nn.Parameter) -> WeightReparam:
        """The parametrization of ``weight`` with freshly initialised extra parameters."""
        raise NotImplementedError

    def before_final(self) -> None:
        """Called right before the final pruning step (e.g. to set the final temperature)."""

    def batched_weights(self, layout: FlatLayout, weights: list[Tensor]) -> list[Tensor]:
        """Every layer's weight from one pass over all of P (``weights``: the trained tensors).

        Optional: a method that does not override it reparametrizes layer by layer. Build it
        from ``layout.flatten`` / ``layout.unflatten`` and methods._batched.expand; the values
        must be those of each layer's ``weight_of``.
        """
        raise NotImplementedError

    # ---------------------------------------------------------------- setup
    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        _check_untied(ctx.model, ctx.masks.params)
        for name, param in ctx.prunable:
            module = ctx.model.get_submodule(owner_name(name))
            reparam = self.make_reparam(param)
            parametrize.register_parametrization(module, WEIGHT, reparam)
            # The trained tensor must stay the object the mask store and optimizer refer to.
            if module.parametrizations.weight.original is not param:
                raise RuntimeError(f"parametrizing {name} replaced its parameter object")
            self.reparams.append(reparam)
            self.owners.append(module)
        self._hook = ctx.model.register_load_state_dict_pre_hook(_OwnModelOnly(self._on_load))
        # CPU and CUDA only: the segmented sum of the batched backward has no kernel elsewhere.
        batchable = ctx.device.type in ("cpu", "cuda")
        if self.cfg.runtime.reparam == "batched" and self.reparams and batchable:
            self._batch_layers(ctx.model)

    def _batch_layers(self, model: nn.Module) -> None:
        """Compute every layer's weight in one pass per model forward, if the method can."""
        if type(self).batched_weights is ReparamMethod.batched_weights:
            return  # no batched form: layer by layer
        batch = BatchedWeights(self._compute_batched, f"{self.name} ({self.cfg.run_id})")
        for index, reparam in enumerate(self.reparams):
            reparam.batch, reparam.index = batch, index
        self._batch_hooks = [
            model.register_forward_pre_hook(batch.open),
            model.register_forward_hook(batch.close, always_call=True),
        ]

    def _layout_of(self, weights: list[Tensor]) -> FlatLayout:
        # Rebuilt if the weights moved or changed memory layout since it was made.
        if self._layout is None or not self._layout.matches(weights):
            self._layout = FlatLayout(weights)
        return self._layout

    def _compute_batched(self) -> list[Tensor]:
        assert self.ctx is not None
        weights = list(self.ctx.masks.params)
        return self.batched_weights(self._layout_of(weights), weights)

    def reparams_of(self, kind: type[Reparam]) -> list[Reparam]:
        """The layers' parametrizations (all of type ``kind``), in the order of P."""
        return [r for r in self.reparams if isinstance(r, kind)]

    def extra_parameters(self) -> list[nn.Parameter]:
        """The method's extra parameters, in a fixed order."""
        return [p for r in self.reparams for p in r.parameters()]

    def param_groups(self) -> list[dict[str, Any]]:
        assert self.ctx is not None
        extra = self.extra_parameters()
        extra_ids = {id(p) for p in extra}
        base = [p for p in self.ctx.model.parameters() if id(p) not in extra_ids]
        if not extra:  # an empty prunable set: nothing to add
            return [{"params": base}]
        if getattr(self.params, "decay", "once") == "reference":
            prunable = {id(p) for p in self.ctx.masks.params}
            twice = 2.0 * self.cfg.optim.weight_decay
            groups = [
                {"params": [p for p in base if id(p) in prunable], "weight_decay": twice},
                {"params": [p for p in base if id(p) not in prunable]},
                {"params": extra},
            ]
            return [g for g in groups if g["params"]]
        group: dict[str, Any] = {"params": extra}
        if not self.decay_extra:
            group["weight_decay"] = 0.0
        return [{"params": base}, group]

    # ---------------------------------------------------------------- hooks
    def logged_loss_extra(self, step: int) -> Tensor | None:
        """1/2 wd ||w||^2 over P with ``decay = "reference"``: the paper's code adds it to the
        loss it backpropagates and logs; here its gradient is the optimizer group's doubled decay
        (:meth:`param_groups`), so only the logged loss adds it."""
        wd = self.cfg.optim.weight_decay
        if getattr(self.params, "decay", "once") != "reference" or wd == 0 or not self.reparams:
            return None
        assert self.ctx is not None
        with torch.no_grad():
            norms = torch._foreach_norm(list(self.ctx.masks.params))
            return 0.5 * wd * torch.stack(norms).float().square().sum()

    def on_epoch_end(self, epoch: int) -> bool:
        assert self.ctx is not None
        # The zero pattern emerges from training; the core's masks stay all-ones until the end.
        self.ctx.record.setdefault("emergent_sparsity", []).append(self.emergent_sparsity())
        return False

    def current_sparsity(self) -> float:
        """The sparsity over P the model would have if training stopped now (one host sync)."""
        return self.emergent_sparsity()

    def emergent_sparsity(self) -> float:
        """The sparsity over P the model would have if training stopped now (one host sync)."""
        assert self.ctx is not None
        total = self.ctx.masks.num_prunable()
        if not self.reparams or total == 0:
            return self.ctx.masks.sparsity()
        with torch.no_grad():
            kept = torch.stack(
                [
                    r.keep_mask(p).sum()
                    for r, p in zip(self.reparams, self.ctx.masks.params, strict=True)
                ]
            ).sum()
        return 1.0 - int(kept) / total

    def finalize(self) -> None:
        """Record accuracy, make the final weights plain with exact zeros, record it again."""
        ctx = self.ctx
        assert ctx is not None
        self.before_final()
        before = ctx.evaluate("test")["top1"]
        self.remove_parametrizations(leave_parametrized=True)
        masks = [p.detach() != 0 for p in ctx.masks.params]
        self.hard_prune(masks)
        after = ctx.evaluate("test")["top1"]
        ctx.record["stability"] = {
            "acc_before": before,
            "acc_after": after,
            "pruning_stability": pruning_stability(before, after),
        }

    # ---------------------------------------------------------------- removing
    def remove_parametrizations(self, leave_parametrized: bool) -> None:
        """Make the model plain again; with ``leave_parametrized`` keep the final weights."""
        ctx = self.ctx
        assert ctx is not None
        for reparam in self.reparams:
            reparam.final = True
            reparam.batch = None
        for handle in self._batch_hooks:
            handle.remove()
        self._batch_hooks = []
        for module in self.owners:
            parametrize.remove_parametrizations(module, WEIGHT, leave_parametrized)
        self.reparams, self.owners = [], []
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        _point_masks_at_weights(ctx)

    def _on_load(
        self, module: nn.Module, state_dict: dict[str, Tensor], prefix: str, *_: Any
    ) -> None:
        """Load-state-dict pre-hook: a plain (finalized) checkpoint removes the parametrizations."""
        assert self.ctx is not None
        if self.reparams and prefix + self.ctx.masks.names[0] in state_dict:
            self.remove_parametrizations(leave_parametrized=False)


class _OwnModelOnly:
    """A hook of the method's own model that a copy of the model does not carry along.

    A deep copy of the model (an evaluation copy, a checkpoint's) would otherwise copy the bound
    method's object and through its context the whole trainer (on CUDA it fails there: a CUDA
    stream cannot be copied); and the copied hook would act on the original model's layers."""

    def __init__(self, hook: Callable[..., None] | None) -> None:
        # Not named "hook": torch's hook wrapper copies this object's attributes onto itself
        # (functools.update_wrapper), and its own "hook" attribute would become the bound method.
        self.own_model_hook = hook

    def __call__(self, *args: Any) -> None:
        if self.own_model_hook is not None:
            self.own_model_hook(*args)

    def __deepcopy__(self, memo: dict[int, Any]) -> _OwnModelOnly:
        return _OwnModelOnly(None)


def _point_masks_at_weights(ctx: TrainContext) -> None:
    """Make sure the mask store holds the modules' final weight parameters.

    ``remove_parametrizations`` restores the original parameter objects, so this is a check; if
    a torch version ever swapped them, the store is rebuilt over the new parameters.
    """
    current = [ctx.model.get_submodule(owner_name(n)).weight for n in ctx.masks.names]
    if all(a is b for a, b in zip(current, ctx.masks.params, strict=True)):
        return
    store = MaskStore(list(zip(ctx.masks.names, current, strict=True)))
    store.update(ctx.masks.masks)
    ctx.masks = store
