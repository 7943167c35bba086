"""The K runs' parameters and buffers stacked along a leading run dimension, and their forward."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

# How the array's forward runs the K models: "vmap" (torch.func; convolutions with batched
# weights become one grouped convolution) or "loop" (K functional calls in one autograd graph).
LAYOUTS = ("vmap", "loop")


def default_layout(device_type: str) -> str:
    """The layout an array uses unless told: "loop" on the CPU, where one conv layer's forward
    and backward measured fastest as K separate convolutions (README, Runs of a grid as one
    array model), "vmap" elsewhere until a GPU measures otherwise (benchmark.bench.array)."""
    return "loop" if device_type == "cpu" else "vmap"


class StackedModels:
    """K models of one architecture whose tensors are views into stacked storage.

    Parameters: one tensor ``flat`` of shape ``[K, D]`` (D = the parameters of one model) and its
    gradient ``grad``, so that the optimizer steps all of them in a few whole-tensor kernels.
    The array's leaves ``leaves[name]`` are ``[K, *shape]`` views of it (each with its gradient a
    view of ``grad``, which backward accumulates into in place), and every run's own
    ``nn.Parameter`` is re-pointed (``.data``) at its row, so whatever a run does to its own
    parameters in place (masks, loading a checkpoint) the array sees, and the other way round.
    Buffers (BatchNorm running statistics, batch counters) are ``[K, *shape]`` tensors with each
    run's buffer a view of its slice.
    """

    def __init__(self, models: Sequence[nn.Module], layout: str = "vmap") -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout {layout!r}: expected one of {LAYOUTS}")
        self.layout = layout
        self.template = models[0]
        self.k = len(models)
        names = [n for n, _ in self.template.named_parameters()]
        per_model = [dict(m.named_parameters()) for m in models]
        for i, got in enumerate(per_model):
            shapes = [tuple(got[n].shape) for n in names] if set(got) == set(names) else None
            if shapes != [tuple(per_model[0][n].shape) for n in names]:
                raise ValueError(f"model {i} of the array differs in its parameters from model 0")
        first = per_model[0]
        self.names = names
        self.shapes = [tuple(first[n].shape) for n in names]
        sizes = [first[n].numel() for n in names]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        ref = first[names[0]]
        flat = torch.empty(self.k, self.offsets[-1], dtype=ref.dtype, device=ref.device)
        for k, got in enumerate(per_model):
            for i, n in enumerate(names):
                flat[k, self.offsets[i] : self.offsets[i + 1]] = got[n].detach().reshape(-1)
        self.flat = flat
        self.grad = torch.zeros_like(flat)
        # Separate leaves, not slices of one leaf: the backward of a slice would write a whole
        # [K, D] gradient per parameter.
        self.leaves: dict[str, Tensor] = {}
        for i, n in enumerate(names):
            leaf = self.view(i, flat).detach().requires_grad_()
            leaf.grad = self.view(i, self.grad)
            self.leaves[n] = leaf
        self.members: list[list[nn.Parameter]] = [[got[n] for n in names] for got in per_model]
        self.buffer_names = [n for n, _ in self.template.named_buffers()]
        self.buffers: dict[str, Tensor] = {}
        # Per buffer, per run: the module holding it and the buffer's name there.
        self.owners = {n: [_buffer_owner(m, n) for m in models] for n in self.buffer_names}
        for n, owned in self.owners.items():
            self.buffers[n] = torch.stack([getattr(mod, leaf) for mod, leaf in owned])
        self.relink()

    def view(self, i: int, source: Tensor) -> Tensor:
        """Parameter ``i`` of every run, ``[K, *shape]``, as a view of ``source`` (``[K, D]``)."""
        return source[:, self.offsets[i] : self.offsets[i + 1]].view(self.k, *self.shapes[i])

    def row(self, k: int, i: int, source: Tensor | None = None) -> Tensor:
        """Run ``k``'s parameter ``i`` as a view of ``source`` (default: the flat parameters)."""
        source = self.flat if source is None else source
        return source[k, self.offsets[i] : self.offsets[i + 1]].view(self.shapes[i])

    def relink(self) -> None:
        """Point every run's parameter at its row again (after something replaced ``.data``)."""
        for k, params in enumerate(self.members):
            for i, p in enumerate(params):
                view = self.row(k, i)
                if p.data_ptr() != view.data_ptr() or p.shape != view.shape:
                    with torch.no_grad():
                        view.copy_(p.detach())
                    p.data = view
        for n, owned in self.owners.items():
            for k, (mod, leaf) in enumerate(owned):
                view = self.buffers[n][k]
                held = mod._buffers[leaf]
                if held is None or held.data_ptr() != view.data_ptr():
                    if held is not None:
                        view.copy_(held)
                    mod._buffers[leaf] = view

    def linked(self) -> bool:
        """Whether every run's parameters and buffers still are views of the stacked ones."""
        params = all(
            p.data_ptr() == self.row(k, i).data_ptr()
            for k, params in enumerate(self.members)
            for i, p in enumerate(params)
        )
        return params and all(
            mod._buffers[leaf] is not None
            and mod._buffers[leaf].data_ptr() == self.buffers[n][k].data_ptr()
            for n, owned in self.owners.items()
            for k, (mod, leaf) in enumerate(owned)
        )

    def zero_grad(self) -> None:
        """Zero the gradients in place (the leaves' gradients stay views of ``grad``)."""
        self.grad.zero_()

    def forward(self, x: Tensor) -> Tensor:
        """The K models' outputs ``[K, N, ...]`` of their inputs ``x`` (``[K, N, ...]``)."""
        params = self.leaves
        if self.layout == "vmap":
            return vmap(self._one)(params, self.buffers, x)
        outs = [
            self._one(
                {n: p[k] for n, p in params.items()},
                {n: b[k] for n, b in self.buffers.items()},
                x[k],
            )
            for k in range(self.k)
        ]
        return torch.stack(outs)

    def _one(self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor) -> Tensor:
        return functional_call(self.template, (params, buffers), (x,))


def _buffer_owner(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    """The module holding buffer ``name`` (dotted) of ``model``, and the buffer's own name."""
    path, _, leaf = name.rpartition(".")
    return (model.get_submodule(path) if path else model), leaf
