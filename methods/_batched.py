"""Every layer's reparametrized weight in one pass over all of P (STR, CS, DST).

Reparametrizing layer by layer costs ~20 small kernels per layer and iteration (forward and
backward): for ResNet-56's 57 layers over a thousand launches, which on a GPU cost more time
than the convolutions' work. Here the weights of P are laid end to end in one flat vector
(:class:`FlatLayout`), the method's formula runs once over it, and each layer's weight is a view
of the result. Per-layer and per-channel parameters reach the elements through an index
(:func:`expand`), whose backward is a segmented sum (deterministic, no atomics).

The flat vector follows each weight's memory order (NHWC for channels_last convolutions), so the
views handed to the layers keep their memory format and no layout conversion is added.

:class:`BatchedWeights` computes the batch once per training forward: a forward pre-hook on the
model opens it, a forward hook closes it. A weight read outside one (evaluation, finalizing,
masks, a submodule called alone) takes the per-layer path, so correctness never depends on the
hooks.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any

import torch
from torch import Tensor


def memory_order(t: Tensor) -> tuple[int, ...]:
    """The permutation of ``t``'s dimensions that walks its memory from outermost to innermost.

    The identity unless ``t`` is dense in another order (NHWC for a channels_last 4-D tensor).
    The output dimension stays outermost in every order returned, which per-channel spans need.
    """
    order = tuple(sorted(range(t.dim()), key=lambda d: -t.stride(d)))
    if order and order[0] == 0 and t.permute(order).is_contiguous():
        return order
    return tuple(range(t.dim()))


class FlatLayout:
    """The weights of P laid end to end: each layer's span, and its output channels' spans."""

    def __init__(self, weights: Sequence[Tensor]) -> None:
        self.device = weights[0].device
        self.shapes = [tuple(w.shape) for w in weights]
        self.orders = [memory_order(w) for w in weights]
        self.strides = [w.stride() for w in weights]
        self.numels = [w.numel() for w in weights]
        self.channels = [s[0] if s else 1 for s in self.shapes]
        # Each layer's view of the flat vector: its shape in memory order, then the permutation
        # back to the weight's own dimension order.
        self.views = [
            (tuple(shape[d] for d in order), tuple(order.index(d) for d in range(len(order))))
            for shape, order in zip(self.shapes, self.orders, strict=True)
        ]

    def matches(self, weights: Sequence[Tensor]) -> bool:
        """Whether ``weights`` still have this layout's device, shapes and memory layouts."""
        return (
            len(weights) == len(self.shapes)
            and all(w.device == self.device for w in weights)
            and [tuple(w.shape) for w in weights] == self.shapes
            and [w.stride() for w in weights] == self.strides
        )

    def flatten(self, tensors: Sequence[Tensor]) -> Tensor:
        """One flat vector of ``tensors`` (shaped like the weights), each in its memory order."""
        return torch.cat(
            [t.permute(o).reshape(-1) for t, o in zip(tensors, self.orders, strict=True)]
        )

    def unflatten(self, flat: Tensor) -> list[Tensor]:
        """Views of ``flat``, one per layer, with the weights' shapes and memory layouts."""
        # split, not narrow: its backward is one cat of the layers' gradients, where each
        # narrow's would be a zero-filled vector of all of P.
        parts = flat.split(self.numels)
        return [
            part.view(permuted).permute(inverse)
            for part, (permuted, inverse) in zip(parts, self.views, strict=True)
        ]

    def _index(self, lengths: list[int]) -> Tensor:
        ids = torch.arange(len(lengths), dtype=torch.int32)
        return torch.repeat_interleave(ids, torch.tensor(lengths)).to(self.device)

    @cached_property
    def layer_lengths(self) -> Tensor:
        """The number of entries of each layer (the flat vector's layer spans)."""
        return torch.tensor(self.numels, device=self.device)

    @cached_property
    def layer_of_entry(self) -> Tensor:
        """For each flat entry, its layer's number."""
        return self._index(self.numels)

    @cached_property
    def channel_lengths(self) -> Tensor:
        """The number of entries of each output channel of each layer, in flat order."""
        sizes = [n // c for n, c in zip(self.numels, self.channels, strict=True)]
        per_channel = [size for size, c in zip(sizes, self.channels, strict=True) for _ in range(c)]
        return torch.tensor(per_channel, device=self.device)

    @cached_property
    def channel_of_entry(self) -> Tensor:
        """For each flat entry, its output channel's number (counted over all layers)."""
        return self._index(self.channel_lengths.tolist())

    @cached_property
    def channels_per_layer(self) -> Tensor:
        """The number of output channels of each layer (the channel spans' layer spans)."""
        return torch.tensor(self.channels, device=self.device)

    @cached_property
    def layer_of_channel(self) -> Tensor:
        """For each output channel (counted over all layers), its layer's number."""
        return self._index(self.channels)


class _Expand(torch.autograd.Function):
    """values[index] forward; the segmented sum of the gradient backward (no atomics)."""

    @staticmethod
    def forward(ctx: Any, values: Tensor, index: Tensor, lengths: Tensor) -> Tensor:
        ctx.save_for_backward(lengths)
        return values.index_select(0, index)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (lengths,) = ctx.saved_tensors
        return segment_sum(grad, lengths), None, None


def expand(values: Tensor, index: Tensor, lengths: Tensor) -> Tensor:
    """One value per segment repeated over its entries; ``index`` and ``lengths`` describe the
    segments (e.g. ``layout.layer_of_entry`` and ``layout.layer_lengths``)."""
    return _Expand.apply(values, index, lengths)


def segment_sum(flat: Tensor, lengths: Tensor) -> Tensor:
    """The sum of each consecutive segment of ``flat`` (segment i has ``lengths[i]`` entries)."""
    # unsafe: skips the argument checks, which read the lengths back to the host (a sync, and
    # illegal inside a CUDA graph capture); the layout built the lengths, so they are right.
    return torch.segment_reduce(flat, "sum", lengths=lengths, unsafe=True)


class BatchedWeights:
    """Every layer's weight from one call of ``compute``, made at most once per training forward.

    Only forwards with gradients batch: an evaluation or generation forward may use a part of
    the model (a decoder step), and computing all of P for it would be waste. A training forward
    must read every layer's weight: a layer it skipped would get a zero gradient here (weight
    decay and momentum would move it) where the per-layer path leaves it without one. The first
    forward that skips one therefore switches this model to the per-layer path, with a warning.
    """

    def __init__(self, compute: Callable[[], list[Tensor]], what: str = "") -> None:
        self.compute = compute
        self.what = what
        self.active = False
        self.disabled = False
        self.weights: list[Tensor] | None = None
        self.read: set[int] = set()

    def open(self, *_: Any) -> None:
        """Model forward pre-hook: in a training forward the next weight read computes them all."""
        self.active = torch.is_grad_enabled() and not self.disabled
        self.weights = None
        self.read = set()

    def close(self, module: Any = None, args: Any = None, output: Any = None) -> None:
        """Model forward hook: weights read from now on take the per-layer path."""
        finished = output is not None  # None: the forward raised (the hook always runs)
        if finished and self.weights is not None and len(self.read) < len(self.weights):
            self.disabled = True
            warnings.warn(
                f"{self.what}: a training forward used {len(self.read)} of the "
                f"{len(self.weights)} prunable layers; reparametrizing layer by layer from now "
                "on (set runtime.reparam = 'per-layer' to start that way)",
                stacklevel=2,
            )
        self.active = False
        self.weights = None

    def get(self, index: int) -> Tensor | None:
        """Layer ``index``'s weight inside a training forward; None outside one."""
        if not self.active:
            return None
        if self.weights is None:
            self.weights = self.compute()
        self.read.add(index)
        return self.weights[index]

    def __deepcopy__(self, memo: dict[int, Any]) -> BatchedWeights:
        # A copied model reparametrizes layer by layer: the batch computes the method's layers,
        # which are the original model's, not the copy's.
        copied = BatchedWeights(_no_batch, self.what)
        copied.disabled = True
        return copied


def _no_batch() -> list[Tensor]:
    raise RuntimeError("a disabled batch computes nothing")
