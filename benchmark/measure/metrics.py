"""Evaluation and sparsity metrics: accuracy, loss, sparsity, theoretical speedup, stability.

Theoretical speedup (Blalock et al. 2020, ShrinkBench; used by the paper)
--------------------------------------------------------------------------
Only ``nn.Conv2d`` and ``nn.Linear`` layers are counted, in multiply-accumulates (MACs) per
example; ShrinkBench calls these counts "FLOPs", and so do the ``flops_*`` keys here.

* ShrinkBench rule (``dense_macs_shrinkbench``, the paper's number):
  conv   = C_in * C_out * k_h * k_w * ceil(H_in / s_h) * ceil(W_in / s_w)
  linear = in_features * out_features
  i.e. "same" padding is assumed whatever the real padding, and groups and dilation are ignored.
* Corrected count (``dense_macs_corrected``): honours groups and the real output size seen in the
  forward pass (real padding, dilation and, for linears, any extra leading dimensions):
  conv   = (C_in / groups) * k_h * k_w * (C_out * H_out * W_out)
  linear = in_features * (number of output elements per example)

Each layer's dense count is scaled by its weight density (fraction of nonzero entries of the
weight tensor) to get its sparse count; ``speedup = sum(dense) / sum(sparse)``. The counts come
from one forward pass over an example batch and are divided per example (they do not depend on
the batch size). A layer called several times in one forward pass is counted once per call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.core.precision import half_autocast

TOP5_MIN_CLASSES = 100


# --------------------------------------------------------------------------- helpers


@contextmanager
def eval_mode(model: nn.Module, training: bool = False) -> Iterator[nn.Module]:
    """Put every submodule in eval mode (train mode with ``training``) and restore each one's own
    train/eval flag on exit."""
    # Per-module flags (not just model.training) so deliberately frozen submodules stay frozen.
    modes = [(m, m.training) for m in model.modules()]
    model.train(training)
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training


def model_device(model: nn.Module) -> torch.device:
    """Return the device of the model's first parameter or buffer (CPU when it has none)."""
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return torch.device("cpu")


# --------------------------------------------------------------------------- accuracy and loss


def topk_correct(logits: Tensor, targets: Tensor, ks: Sequence[int] = (1,)) -> Tensor:
    """Count the examples whose target is among the top-k logits, for each k in ``ks``.

    Returns an int64 tensor of shape ``(len(ks),)`` on the logits' device (no host sync). A k
    larger than the number of classes counts every example as correct.
    """
    if any(k < 1 for k in ks):
        raise ValueError(f"every k must be >= 1, got {list(ks)}")
    if not ks:
        return torch.zeros(0, dtype=torch.long, device=logits.device)
    max_k = min(max(ks), logits.shape[-1])
    top = logits.topk(max_k, dim=-1).indices
    # hits[i, j] is True when the target of example i is the j-th best class.
    hits = top.eq(targets.unsqueeze(-1))
    cumulative = hits.cumsum(dim=-1).sum(dim=0)
    return torch.stack([cumulative[min(k, max_k) - 1] for k in ks]).long()


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: Iterable[tuple[Tensor, Tensor]],
    num_classes: int,
    *,
    half: torch.dtype | None = None,
) -> dict[str, float]:
    """Return micro-averaged "top1" (and "top5" for >= 100 classes) accuracy, mean "loss" and
    the number of examples "n" (one example is 1/n of the accuracy: what a difference means).

    Runs in eval mode and restores every submodule's previous train/eval mode afterwards.
    Accuracies are fractions in [0, 1]; the loss is the mean cross-entropy per example. With
    ``half`` (torch.bfloat16 or torch.float16) the forward pass runs under that autocast (the
    loss is computed in float32).
    """
    device = model_device(model)
    ks = (1, 5) if num_classes >= TOP5_MIN_CLASSES else (1,)
    correct = torch.zeros(len(ks), dtype=torch.long, device=device)
    # float64 keeps the loss sum exact enough over big test sets; MPS has no float64.
    acc_dtype = torch.float32 if device.type == "mps" else torch.float64
    loss_sum = torch.zeros((), dtype=acc_dtype, device=device)
    count = 0
    with eval_mode(model):
        for inputs, targets in batches:
            inputs = inputs.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            with half_autocast(device, half):
                logits = model(inputs)
            logits = logits.float()
            # Sums (not batch means) so that unequal batch sizes are weighted per example.
            loss_sum += F.cross_entropy(logits, targets, reduction="sum").to(acc_dtype)
            correct += topk_correct(logits, targets, ks)
            count += targets.shape[0]
    if count == 0:
        raise ValueError("evaluate() got no examples")
    # Single host sync at the end instead of one per batch.
    hits = correct.tolist()
    result = {f"top{k}": hits[i] / count for i, k in enumerate(ks)}
    result["loss"] = loss_sum.item() / count
    result["n"] = count
    return result


# --------------------------------------------------------------------------- MACs and speedup


@dataclass
class LayerMacs:
    """Per-example multiply-accumulate counts of one Conv2d/Linear layer and its weight density."""

    name: str
    kind: str  # "conv" or "linear"
    dense_macs_shrinkbench: int
    dense_macs_corrected: int
    density: float  # fraction of nonzero entries of the weight tensor

    @property
    def sparse_macs_shrinkbench(self) -> float:
        """ShrinkBench count scaled by the weight density."""
        return self.dense_macs_shrinkbench * self.density

    @property
    def sparse_macs_corrected(self) -> float:
        """Corrected count scaled by the weight density."""
        return self.dense_macs_corrected * self.density


def weight_density(weight: Tensor) -> float:
    """Return the fraction of nonzero entries of ``weight`` (1.0 for an empty tensor)."""
    numel = weight.numel()
    return 1.0 if numel == 0 else int(torch.count_nonzero(weight)) / numel


def conv_macs_shrinkbench(conv: nn.Conv2d, input_hw: Sequence[int]) -> int:
    """ShrinkBench's per-example conv count: full C_in, output size ceil(H_in / stride)."""
    k_h, k_w = conv.kernel_size
    s_h, s_w = conv.stride
    out_hw = math.ceil(input_hw[0] / s_h) * math.ceil(input_hw[1] / s_w)
    return conv.in_channels * conv.out_channels * k_h * k_w * out_hw


def conv_macs_corrected(conv: nn.Conv2d, output_per_example: int) -> int:
    """Per-example conv count with groups and the real number of output elements."""
    k_h, k_w = conv.kernel_size
    return (conv.in_channels // conv.groups) * k_h * k_w * output_per_example


def _layer_entry(name: str, module: nn.Module, inp: Tensor, out: Tensor) -> LayerMacs:
    """Count one call of ``module`` given its (batched) input and output tensors."""
    batch = inp.shape[0]
    out_per_example = out.numel() // batch if batch else 0
    density = weight_density(module.weight.detach())
    if isinstance(module, nn.Conv2d):
        dense_sb = conv_macs_shrinkbench(module, inp.shape[-2:])
        dense_corr = conv_macs_corrected(module, out_per_example)
        return LayerMacs(name, "conv", dense_sb, dense_corr, density)
    assert isinstance(module, nn.Linear)
    dense_sb = module.in_features * module.out_features
    return LayerMacs(name, "linear", dense_sb, module.in_features * out_per_example, density)


def layer_macs(
    model: nn.Module,
    example_input: Tensor | Mapping[str, Tensor],
    run: Callable[[], object] | None = None,
) -> list[LayerMacs]:
    """Return per-example MACs and weight density of every Conv2d and Linear layer.

    Runs one forward pass of ``example_input`` (a batch; a mapping is passed as keyword
    arguments, e.g. a translation model's token ids) in eval mode without gradients, so
    batch-norm statistics are untouched; layers appear in call order, repeated calls summed.
    ``run``: another way to run that forward pass (a language model offloaded layer by layer).
    """
    entries: dict[str, LayerMacs] = {}
    handles = []

    def make_hook(name: str) -> Callable[[nn.Module, tuple[Tensor, ...], Tensor], None]:
        def hook(module: nn.Module, inputs: tuple[Tensor, ...], output: Tensor) -> None:
            entry = _layer_entry(name, module, inputs[0], output)
            if name in entries:
                prev = entries[name]
                entry.dense_macs_shrinkbench += prev.dense_macs_shrinkbench
                entry.dense_macs_corrected += prev.dense_macs_corrected
            entries[name] = entry

        return hook

    for name, module in model.named_modules():
        # isinstance (unlike ShrinkBench's exact class check) also counts masked subclasses.
        if isinstance(module, nn.Conv2d | nn.Linear):
            handles.append(module.register_forward_hook(make_hook(name)))
    try:
        device = model_device(model)
        with torch.no_grad(), eval_mode(model):
            if run is not None:
                run()
            elif isinstance(example_input, Mapping):
                model(**{k: v.to(device) for k, v in example_input.items()})
            else:
                model(example_input.to(device))
    finally:
        for handle in handles:
            handle.remove()
    return list(entries.values())


def theoretical_speedup(
    model: nn.Module,
    example_input: Tensor | Mapping[str, Tensor],
    run: Callable[[], object] | None = None,
) -> dict[str, float]:
    """Return dense/sparse per-example MAC totals and their ratio, ShrinkBench and corrected.

    Keys: "speedup", "flops_dense", "flops_sparse" (ShrinkBench rule, as reported in the paper)
    and "speedup_corrected", "flops_dense_corrected", "flops_sparse_corrected". A model whose
    counted weights are all zero has infinite speedup. ``run``: see :func:`layer_macs`.
    """
    layers = layer_macs(model, example_input, run)
    dense = float(sum(layer.dense_macs_shrinkbench for layer in layers))
    sparse = sum(layer.sparse_macs_shrinkbench for layer in layers)
    dense_c = float(sum(layer.dense_macs_corrected for layer in layers))
    sparse_c = sum(layer.sparse_macs_corrected for layer in layers)
    return {
        "speedup": _ratio(dense, sparse),
        "speedup_corrected": _ratio(dense_c, sparse_c),
        "flops_dense": dense,
        "flops_sparse": sparse,
        "flops_dense_corrected": dense_c,
        "flops_sparse_corrected": sparse_c,
    }


def _ratio(dense: float, sparse: float) -> float:
    """Return dense / sparse; inf when only the sparse count is zero, 1.0 when both are."""
    if sparse == 0:
        return 1.0 if dense == 0 else math.inf
    return dense / sparse


# --------------------------------------------------------------------------- sparsity


def sparsity_stats(
    model: nn.Module, prunable: Sequence[tuple[str, nn.Parameter | Tensor]]
) -> dict[str, float]:
    """Return the fraction of exact zeros among the prunable weights and among all parameters.

    Keys: "sparsity" (zeros / num_prunable), "sparsity_total" (zeros / num_params over all of
    ``model.parameters()``), "nonzero_prunable", "num_prunable" and "num_params" (counts).
    """
    num_prunable = sum(t.numel() for _, t in prunable)
    nonzero_prunable = sum(int(torch.count_nonzero(t.detach())) for _, t in prunable)
    params = list(model.parameters())
    num_params = sum(p.numel() for p in params)
    nonzero_total = sum(int(torch.count_nonzero(p.detach())) for p in params)
    return {
        "sparsity": _zero_fraction(nonzero_prunable, num_prunable),
        "sparsity_total": _zero_fraction(nonzero_total, num_params),
        "nonzero_prunable": nonzero_prunable,
        "num_prunable": num_prunable,
        "num_params": num_params,
    }


def _zero_fraction(nonzero: int, total: int) -> float:
    """Return 1 - nonzero / total, or 0.0 for an empty set."""
    return 0.0 if total == 0 else 1.0 - nonzero / total


# --------------------------------------------------------------------------- stability


def pruning_stability(acc_before: float, acc_after: float) -> float:
    """Return 1 - (before - after) / before (Bartoldson et al.; the paper's definition).

    Equals 1.0 when pruning does not hurt accuracy and when ``acc_before`` is 0; it is not
    clipped, so it exceeds 1 if pruning happens to improve accuracy.
    """
    if acc_before == 0:
        return 1.0
    return 1.0 - (acc_before - acc_after) / acc_before


def relative_norm_drop(params: Sequence[Tensor], pruned: Sequence[Tensor]) -> float:
    """Return ||theta - theta_pruned|| / ||theta|| over paired tensors (0.0 when ||theta|| = 0)."""
    if len(params) != len(pruned):
        raise ValueError(f"got {len(params)} parameters but {len(pruned)} pruned tensors")
    diff_sq = 0.0
    norm_sq = 0.0
    for before, after in zip(params, pruned, strict=True):
        before = before.detach().double()
        diff_sq += float((before - after.detach().double()).pow(2).sum())
        norm_sq += float(before.pow(2).sum())
    return 0.0 if norm_sq == 0 else math.sqrt(diff_sq / norm_sq)
