"""MaskStore: one explicit mask per prunable parameter, applied in one fused call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.pruning.prunable import prunable_parameters


def _binary_like(
    mask: Tensor, param: Tensor, name: str, dtype: torch.dtype | None = None
) -> Tensor:
    """``mask`` as 0/1 values on the device of ``param``, with its dtype or ``dtype`` (shape
    checked)."""
    if tuple(mask.shape) != tuple(param.shape):
        raise ValueError(
            f"mask for {name!r} has shape {tuple(mask.shape)}, parameter has {tuple(param.shape)}"
        )
    if dtype is torch.bool and mask.dtype is torch.bool and mask.device == param.device:
        return mask.detach()  # already 0/1: no second copy of a large model's masks
    return (mask.detach() != 0).to(device=param.device, dtype=dtype or param.dtype)


def _zero_fraction(masks: Sequence[Tensor]) -> float:
    """Fraction of zero entries over all ``masks`` (0.0 when they are empty)."""
    total = sum(m.numel() for m in masks)
    zeros = sum(m.numel() - int(m.count_nonzero()) for m in masks)
    return zeros / total if total else 0.0


class MaskStore:
    """One explicit mask per prunable parameter, applied after every optimizer step.

    ``names``/``params``/``masks`` describe the prunable set P only. Structured pruning can add
    masks for non-prunable parameters (biases and batch-norm channels of pruned filters) with
    :meth:`set_extra`; those are applied in the same fused call but never count towards the
    sparsity over P.

    Masks over P have their parameter's dtype (one fused multiply), or ``mask_dtype`` when
    given: ``torch.bool`` keeps a byte per weight, where a large language model cannot afford a
    second copy of its weights.
    """

    def __init__(
        self, params: list[tuple[str, nn.Parameter]], mask_dtype: torch.dtype | None = None
    ) -> None:
        names = [name for name, _ in params]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names}")
        self.names: list[str] = names
        self.params: list[nn.Parameter] = [p for _, p in params]
        self.mask_dtype = mask_dtype
        self.masks: list[Tensor] = [self._all_ones(p) for p in self.params]
        self.extra_names: list[str] = []
        self.extra_params: list[nn.Parameter] = []
        self.extra_masks: list[Tensor] = []

    def _all_ones(self, param: Tensor) -> Tensor:
        """The mask of a parameter nothing has pruned yet: bool masks as a stride-0 view of
        one True (no memory until the first :meth:`update` replaces it; nothing writes into a
        bool store's masks in place), others a tensor of ones."""
        if self.mask_dtype is torch.bool:
            return torch.ones((), dtype=torch.bool, device=param.device).expand_as(param)
        return torch.ones_like(param, dtype=self.mask_dtype)

    @classmethod
    def from_named_masks(
        cls,
        model: nn.Module,
        masks: Mapping[str, Tensor],
        exclude: Sequence[str] = (),
    ) -> MaskStore:
        """Build a store over ``prunable_parameters(model, exclude)`` holding the named ``masks``.

        Masks for prunable weights replace their all-ones default; masks for any other parameter
        of ``model`` (e.g. from :func:`filter_masks`) become extra masks.
        """
        store = cls(prunable_parameters(model, exclude))
        store.update([masks.get(n, m) for n, m in zip(store.names, store.masks, strict=True)])
        store.set_extra(model, masks)
        return store

    # ------------------------------------------------------------------ applying
    def apply(self) -> None:
        """Multiply every masked parameter by its mask in place, in one fused call."""
        params = self.params + self.extra_params if self.extra_params else self.params
        masks = self.masks + self.extra_masks if self.extra_masks else self.masks
        if not params:
            return
        with torch.no_grad():
            torch._foreach_mul_(params, masks)

    def sync(self) -> None:
        """Re-cast the masks to their parameters' current device/dtype (after ``model.to``)."""
        self.masks = [
            m.to(device=p.device, dtype=self.mask_dtype or p.dtype)
            for p, m in zip(self.params, self.masks, strict=True)
        ]
        self.extra_masks = [
            m.to(device=p.device, dtype=p.dtype)
            for p, m in zip(self.extra_params, self.extra_masks, strict=True)
        ]

    # ------------------------------------------------------------------ changing the masks
    def update(
        self, new_masks: Sequence[Tensor], optimizer: torch.optim.Optimizer | None = None
    ) -> None:
        """Replace the masks over P, zero the momentum of every masked entry, and apply.

        ``new_masks`` has one mask per prunable parameter (any dtype; nonzero = kept). The SGD
        momentum buffer is multiplied by the new mask, so entries the new mask removes restart
        from zero momentum (their parameter is zero from now on) while kept entries keep theirs.
        """
        if len(new_masks) != len(self.params):
            raise ValueError(f"expected {len(self.params)} masks, got {len(new_masks)}")
        self.masks = [
            _binary_like(m, p, name, self.mask_dtype)
            for name, p, m in zip(self.names, self.params, new_masks, strict=True)
        ]
        if optimizer is not None:
            _zero_momentum(optimizer, self.params, self.masks)
        self.apply()

    def assign(self, new_masks: Sequence[Tensor]) -> None:
        """Write ``new_masks`` into the held masks over P in place, and apply.

        Unlike :meth:`update` the mask tensors stay the same objects (a captured CUDA graph that
        reads them sees the new values) and the momentum is left alone.
        """
        if len(new_masks) != len(self.params):
            raise ValueError(f"expected {len(self.params)} masks, got {len(new_masks)}")
        with torch.no_grad():
            for name, p, held, m in zip(
                self.names, self.params, self.masks, new_masks, strict=True
            ):
                held.copy_(_binary_like(m, p, name, self.mask_dtype))
        self.apply()

    def set_extra(
        self,
        model: nn.Module,
        named: Mapping[str, Tensor],
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        """Mask the non-prunable parameters of ``model`` named in ``named``, and apply.

        Entries of ``named`` for prunable weights are ignored (use :meth:`update` for those);
        masks already held for other extra parameters are kept. Momentum buffers are zeroed
        where the new extra masks are zero.
        """
        by_name = dict(model.named_parameters())
        unknown = [name for name in named if name not in by_name]
        if unknown:
            raise ValueError(f"masks name parameters that the model does not have: {unknown}")
        prunable = set(self.names)
        changed: list[tuple[nn.Parameter, Tensor]] = []
        for name, mask in named.items():
            if name in prunable:
                continue
            param = by_name[name]
            binary = _binary_like(mask, param, name)
            if name in self.extra_names:
                self.extra_masks[self.extra_names.index(name)] = binary
            else:
                self.extra_names.append(name)
                self.extra_params.append(param)
                self.extra_masks.append(binary)
            changed.append((param, binary))
        if optimizer is not None and changed:
            _zero_momentum(optimizer, [p for p, _ in changed], [m for _, m in changed])
        self.apply()

    # ------------------------------------------------------------------ reporting
    def num_prunable(self) -> int:
        """The number of prunable entries N_P (all entries of all prunable weights)."""
        return sum(p.numel() for p in self.params)

    def num_pruned(self) -> int:
        """The number of prunable entries whose mask is zero."""
        return sum(m.numel() - int(m.count_nonzero()) for m in self.masks)

    def sparsity(self) -> float:
        """The fraction of zeros over all entries of the masks over P."""
        return _zero_fraction(self.masks)

    def layer_sparsities(self, include_extra: bool = False) -> dict[str, float]:
        """The fraction of zeros of every mask over P (and of the extra masks if asked), by name."""
        sparsities = {n: _zero_fraction([m]) for n, m in zip(self.names, self.masks, strict=True)}
        if include_extra:
            sparsities.update(
                {
                    n: _zero_fraction([m])
                    for n, m in zip(self.extra_names, self.extra_masks, strict=True)
                }
            )
        return sparsities

    def named_masks(self) -> dict[str, Tensor]:
        """All masks (P first, then extras) keyed by parameter name."""
        named = dict(zip(self.names, self.masks, strict=True))
        named.update(zip(self.extra_names, self.extra_masks, strict=True))
        return named

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The masks as CPU ``bool`` tensors (compact) with the names they belong to."""
        return {
            "names": list(self.names),
            "masks": [m.detach().to("cpu", torch.bool) for m in self.masks],
            "extra_names": list(self.extra_names),
            "extra_masks": [m.detach().to("cpu", torch.bool) for m in self.extra_masks],
        }

    def load_state_dict(self, state: Mapping[str, Any], model: nn.Module | None = None) -> None:
        """Restore masks saved by :meth:`state_dict` and apply them.

        Extra masks need their parameters: they are found in ``model`` when given, otherwise
        only extra parameters this store already holds can be restored.
        """
        if list(state["names"]) != self.names:
            raise ValueError(
                f"checkpoint masks are for {list(state['names'])}, this store is for {self.names}"
            )
        extra = dict(zip(state.get("extra_names", []), state.get("extra_masks", []), strict=True))
        missing = [name for name in extra if name not in self.extra_names]
        if missing and model is None:
            raise ValueError(
                f"checkpoint holds masks for non-prunable parameters {missing}; "
                "pass model= to load_state_dict so they can be found"
            )
        self.masks = [
            _binary_like(m, p, n, self.mask_dtype)
            for n, p, m in zip(self.names, self.params, state["masks"], strict=True)
        ]
        if model is not None:
            self.set_extra(model, extra)
        else:
            for name, mask in extra.items():
                i = self.extra_names.index(name)
                self.extra_masks[i] = _binary_like(mask, self.extra_params[i], name)
        self.apply()


def _zero_momentum(
    optimizer: torch.optim.Optimizer, params: Sequence[Tensor], masks: Sequence[Tensor]
) -> None:
    """Multiply each parameter's SGD momentum buffer by its mask, in one fused call."""
    buffers: list[Tensor] = []
    buffer_masks: list[Tensor] = []
    for param, mask in zip(params, masks, strict=True):
        # .get on the state defaultdict so that parameters without state stay without state.
        buffer = optimizer.state.get(param, {}).get("momentum_buffer")
        if buffer is not None:
            buffers.append(buffer)
            buffer_masks.append(mask.to(dtype=buffer.dtype, device=buffer.device))
    if buffers:
        with torch.no_grad():
            torch._foreach_mul_(buffers, buffer_masks)
