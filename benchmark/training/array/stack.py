"""The K runs' parameters and buffers stacked along a leading run dimension, and their forward."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from benchmark.training.array import LAYOUTS
from benchmark.training.array.grouped import GroupedModel, grouped_unsupported

# LAYOUTS, how the array's forward runs the K models: "vmap" (torch.func; convolutions with
# batched weights become one grouped convolution), "loop" (K functional calls in one autograd
# graph) or "grouped" (one wide model whose activations are [N, K*C, H, W] throughout: grouped
# convolutions, BatchNorm over K*C channels, batched linear layers; benchmark.training.array.
# grouped, for the models it knows).

# Each parameter's row segment starts at a multiple of this many elements (64 bytes in fp32):
# cuDNN and cuBLAS kernels read vectors and fail ("misaligned address") on a weight that starts
# between vector boundaries.
ALIGN = 16


def default_layout(device_type: str, model: nn.Module | None = None) -> str:
    """The layout an array uses unless told: "loop" on the CPU, where one conv layer's forward
    and backward measured fastest as K separate convolutions; elsewhere "grouped" for the
    models it knows (ResNet-56 on an H200: twice vmap's images/s in bf16 at K = 16 and 32;
    the rates table of benchmark/bench/README.md), else "vmap"."""
    if device_type == "cpu":
        return "loop"
    if model is not None and not grouped_unsupported(model):
        return "grouped"
    return "vmap"


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
        self.sizes = [first[n].numel() for n in names]
        # offsets[i]: where parameter i starts in a row (aligned); offsets[-1]: the row's length.
        self.offsets = [0]
        for size in self.sizes:
            self.offsets.append(self.offsets[-1] + -(-size // ALIGN) * ALIGN)
        ref = first[names[0]]
        # Zeros: the gaps between parameters stay zero (gradient and momentum 0 there too).
        flat = torch.zeros(self.k, self.offsets[-1], dtype=ref.dtype, device=ref.device)
        for k, got in enumerate(per_model):
            for i, n in enumerate(names):
                flat[k, self._span(i)] = got[n].detach().reshape(-1)
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
        self._vmapping = False
        self._batchnorm_dtype: torch.dtype | None = None
        # The grouped layout's wide model reads the leaves and buffers above by name.
        self.wide = GroupedModel(self) if layout == "grouped" else None

    def _span(self, i: int) -> slice:
        return slice(self.offsets[i], self.offsets[i] + self.sizes[i])

    def view(self, i: int, source: Tensor) -> Tensor:
        """Parameter ``i`` of every run, ``[K, *shape]``, as a view of ``source`` (``[K, D]``)."""
        return source[:, self._span(i)].view(self.k, *self.shapes[i])

    def row(self, k: int, i: int, source: Tensor | None = None) -> Tensor:
        """Run ``k``'s parameter ``i`` as a view of ``source`` (default: the flat parameters)."""
        source = self.flat if source is None else source
        return source[k, self._span(i)].view(self.shapes[i])

    def relink(self) -> None:
        """Point every run's parameter at its row again (after something replaced ``.data``),
        and its gradient at its row of ``grad``: a method's hook between backward and the
        step (GSM, LC, DPF, DNW) reads and changes the run's gradients in place."""
        for k, params in enumerate(self.members):
            for i, p in enumerate(params):
                view = self.row(k, i)
                if p.data_ptr() != view.data_ptr() or p.shape != view.shape:
                    with torch.no_grad():
                        view.copy_(p.detach())
                    p.data = view
                grad = self.row(k, i, self.grad)
                if p.grad is None or p.grad.data_ptr() != grad.data_ptr():
                    p.grad = grad
        for n, owned in self.owners.items():
            for k, (mod, leaf) in enumerate(owned):
                view = self.buffers[n][k]
                held = mod._buffers[leaf]
                if held is None or held.data_ptr() != view.data_ptr():
                    if held is not None:
                        view.copy_(held)
                    mod._buffers[leaf] = view

    def parameters_of(self, model: nn.Module) -> list[nn.Parameter]:
        """``model``'s parameters in the array's order; ValueError when its parameters or
        buffers differ from the array's (names, shapes)."""
        got = dict(model.named_parameters())
        shapes = [tuple(got[n].shape) for n in self.names] if set(got) == set(self.names) else None
        buffers = dict(model.named_buffers())
        same = set(buffers) == set(self.buffer_names) and all(
            buffers[n].shape == self.buffers[n].shape[1:] for n in self.buffer_names
        )
        if shapes != self.shapes or not same:
            raise ValueError("a model differs in its tensors from the array's")
        return [got[n] for n in self.names]

    def place(self, k: int, model: nn.Module) -> None:
        """Make ``model`` (of the array's architecture) the run in slot ``k``: its parameters
        and buffers are written into the slot's row and slices, and become views of them. The
        stacked tensors stay where they are (a captured graph keeps reading them)."""
        self.members[k] = self.parameters_of(model)
        for n in self.buffer_names:
            self.owners[n][k] = _buffer_owner(model, n)
        self.relink()

    def linked(self) -> bool:
        """Whether every run's parameters and buffers still are views of the stacked ones."""
        params = all(
            p.data_ptr() == self.row(k, i).data_ptr()
            and p.grad is not None
            and p.grad.data_ptr() == self.row(k, i, self.grad).data_ptr()
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
        if self.wide is not None:
            return self.wide.forward_array(x)
        if self.layout == "vmap":
            # Under vmap, CUDA's BatchNorm refuses bf16 activations with fp32 running statistics
            # ("Expected running_mean to have type BFloat16", measured on an H200) although it
            # takes them unbatched: during the array's forward (only) its input is cast to their
            # dtype and its output back. Hooks live as long as the forward, so the run's own
            # model keeps no reference to the array.
            handles = []
            for module in self.template.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    handles.append(module.register_forward_pre_hook(self._batchnorm_input))
                    handles.append(module.register_forward_hook(self._batchnorm_output))
            self._vmapping = True
            try:
                return vmap(self._one)(params, self.buffers, x)
            finally:
                self._vmapping = False
                for handle in handles:
                    handle.remove()
        outs = [
            self._one(
                {n: p[k] for n, p in params.items()},
                {n: b[k] for n, b in self.buffers.items()},
                x[k],
            )
            for k in range(self.k)
        ]
        return torch.stack(outs)

    def _batchnorm_input(self, module: nn.Module, args: tuple[Tensor, ...]) -> Any:
        stats = getattr(module, "running_mean", None)
        self._batchnorm_dtype = None
        if self._vmapping and stats is not None and args[0].dtype != stats.dtype:
            self._batchnorm_dtype = args[0].dtype
            return (args[0].to(stats.dtype), *args[1:])
        return None

    def _batchnorm_output(self, module: nn.Module, args: Any, out: Tensor) -> Any:
        dtype, self._batchnorm_dtype = self._batchnorm_dtype, None
        return None if dtype is None else out.to(dtype)

    def _one(self, params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor) -> Tensor:
        return functional_call(self.template, (params, buffers), (x,))


def _buffer_owner(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    """The module holding buffer ``name`` (dotted) of ``model``, and the buffer's own name."""
    path, _, leaf = name.rpartition(".")
    return (model.get_submodule(path) if path else model), leaf
