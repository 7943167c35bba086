"""Measured speedup of N:M (2:4) sparse linear layers on GPUs with sparse tensor cores.

PyTorch runs 2:4-sparse weights through ``torch.sparse.to_sparse_semi_structured`` (CUTLASS or
cuSPARSELt kernels) on CUDA devices of compute capability 8.0 or higher, in float16/bfloat16.
Every ``nn.Linear`` whose weight holds the 2:4 pattern (and whose shape the kernels accept) is
converted; the rest stay dense. Dense and sparse models are timed in the same dtype on the same
device (:func:`benchmark.measure.latency.compare`). Anywhere else the result says "not measurable on
this device" with the reason, and carries no number.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from benchmark.measure.latency import DEFAULT_BATCHES, compare, device_info, versions
from benchmark.pruning.nm import is_nm

NOT_MEASURABLE = "not measurable on this device"
MIN_CAPABILITY = (8, 0)


def unsupported_reason(device: torch.device | str) -> str | None:
    """Why 2:4 kernels cannot run on ``device`` (None when they can)."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return f"{NOT_MEASURABLE}: semi-structured sparse kernels need a CUDA GPU ({device})"
    capability = torch.cuda.get_device_capability(device)
    if capability < MIN_CAPABILITY:
        return (
            f"{NOT_MEASURABLE}: compute capability {capability[0]}.{capability[1]} < 8.0 "
            f"({torch.cuda.get_device_name(device)})"
        )
    if not hasattr(torch.sparse, "to_sparse_semi_structured"):
        return f"{NOT_MEASURABLE}: torch {torch.__version__} has no semi-structured sparsity"
    return None


def sparsify_linears(model: nn.Module) -> tuple[nn.Module, list[str], dict[str, str]]:
    """A copy of ``model`` whose 2:4 linear weights are semi-structured sparse tensors.

    Returns (copy, converted layer names, {skipped layer: reason}). ``model`` must already be
    on the CUDA device in float16 or bfloat16.
    """
    from torch.sparse import to_sparse_semi_structured

    sparse = copy.deepcopy(model)
    converted: list[str] = []
    skipped: dict[str, str] = {}
    for name, module in sparse.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        weight = module.weight.detach()
        if not is_nm(weight):
            skipped[name] = "weight is not 2:4"
            continue
        try:
            module.weight = nn.Parameter(to_sparse_semi_structured(weight), requires_grad=False)
        except (RuntimeError, ValueError) as err:  # shapes/dtypes the kernels refuse
            skipped[name] = str(err).splitlines()[0][:200]
            continue
        converted.append(name)
    return sparse, converted, skipped


def measure_nm(
    model: nn.Module,
    input_shape: Sequence[int],
    device: torch.device | str = "cuda",
    *,
    batches: Sequence[int] = DEFAULT_BATCHES,
    warmup: int = 10,
    repeats: int = 50,
    dtype: torch.dtype = torch.float16,
) -> dict[str, Any]:
    """Dense vs 2:4-sparse-linear latency of ``model`` (already 2:4-masked), or why not."""
    device = torch.device(device)
    reason = unsupported_reason(device)
    base = {"kind": "n:m", "measured_speedup": None, **device_info(device), "versions": versions()}
    if reason is not None:
        return base | {"note": reason}
    dense = copy.deepcopy(model).to(device=device, dtype=dtype).eval()
    sparse, converted, skipped = sparsify_linears(dense)
    if not converted:
        return base | {"note": f"{NOT_MEASURABLE}: no linear layer holds a usable 2:4 weight"}
    try:
        result = compare(
            dense,
            sparse,
            input_shape,
            batches=batches,
            device=device,
            warmup=warmup,
            repeats=repeats,
            channels_last=False,
            dtype=dtype,
        )
    except (RuntimeError, NotImplementedError) as err:
        return base | {"note": f"{NOT_MEASURABLE}: the sparse kernels failed ({err})"[:400]}
    return result | {
        "kind": "n:m",
        "converted_linears": len(converted),
        "skipped_linears": len(skipped),
        "note": "2:4 linear layers on semi-structured sparse kernels; other layers dense",
    }
