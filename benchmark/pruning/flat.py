"""Global operations over the prunable set as single kernels on one flat buffer.

Methods that select a global top-k of P every iteration (DNW, GSM, LC) use these instead of a
per-parameter loop or :func:`benchmark.pruning.magnitude_topk_masks`, which reads a count back
to the host; and how they count their k (``method.counting``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from benchmark.core.errors import check
from benchmark.pruning import MaskStore


class FlatBuffer:
    """One contiguous 1-d tensor with a view shaped like each tensor of ``like``.

    Writing the views (e.g. ``torch._foreach_copy_(buffer.views, params)``) fills the flat
    tensor, so a global operation over all of P (abs, top-k) is one kernel instead of one per
    parameter.
    """

    def __init__(self, like: Sequence[Tensor], dtype: torch.dtype | None = None) -> None:
        if not like:
            raise ValueError("the prunable set is empty")
        sizes = [t.numel() for t in like]
        first = like[0]
        self.flat = torch.zeros(sum(sizes), dtype=dtype or first.dtype, device=first.device)
        offsets = [sum(sizes[:i]) for i in range(len(sizes))]
        # narrow() gives independent views (not one multi-output split), so they can be written
        # in place in any grad mode.
        self.views = [
            self.flat.narrow(0, start, t.numel()).view(t.shape)
            for start, t in zip(offsets, like, strict=True)
        ]


def topk_mask_(scores: Tensor, keep: int, out: Tensor) -> Tensor:
    """Write 1 into ``out`` at the ``keep`` largest entries of 1-d ``scores``, 0 elsewhere.

    The count is exact (ties are split by ``torch.topk``) and nothing is read back to the host.
    The smaller of the two sides is selected, so the top-k runs over min(k, N - k) entries.
    """
    total = scores.numel()
    if keep >= total:
        return out.fill_(1)
    if keep <= 0:
        return out.zero_()
    if keep <= total - keep:
        out.zero_()
        out.index_fill_(0, torch.topk(scores, keep, sorted=False).indices, 1)
    else:
        out.fill_(1)
        drop = torch.topk(scores, total - keep, largest=False, sorted=False).indices
        out.index_fill_(0, drop, 0)
    return out


# How a method that selects a global top-k every iteration counts its k (``method.counting``):
# "reference" as the paper's code did (ZIB-IOL/BIMP), "exact" as the core's compute_masks does
# (keep N_P - round(s N_P), Python's round).
COUNTINGS: tuple[str, ...] = ("reference", "exact")


def validate_counting(value: str) -> None:
    """Raise ConfigError("method.counting", ...) unless ``value`` is one of :data:`COUNTINGS`."""
    check(value in COUNTINGS, "method.counting", value, "one of 'reference', 'exact'")


def keep_count(masks: MaskStore, sparsity: float, counting: str = "exact") -> int:
    """How many weights of P a sparsity ``sparsity`` keeps.

    "exact": N_P - round(s N_P) (as the core). "reference": int((1 - s) N_P), the paper's code's
    count for GSM and LC (``n_remaining_params``), the same float expression, so
    int((1 - 0.9) * 850000) is 84999, one fewer than exact.
    """
    total = masks.num_prunable()
    if counting == "reference":
        return int((1 - sparsity) * total)
    return total - round(sparsity * total)


def reference_prune_count(masks: MaskStore, sparsity: float) -> int:
    """int(s N_P): how many weights the paper's code's DNW prunes at least (``n_prune_global``)."""
    return int(sparsity * masks.num_prunable())


def threshold_mask_(scores: Tensor, prune: int, out: Tensor) -> Tensor:
    """Write 1 into ``out`` where 1-d ``scores`` exceed their ``prune``-th smallest value, 0
    elsewhere (all 1 when ``prune`` <= 0).

    This is the paper's code's DNW mask, |w| > kthvalue(|w|, k): it prunes ``prune`` entries
    plus every other one tied with the threshold. The threshold stays on the device (one top-k
    over the smaller side, as :func:`topk_mask_`); nothing is read back to the host.
    """
    total = scores.numel()
    if prune <= 0:
        return out.fill_(1)
    if prune >= total:
        return out.zero_()  # the threshold is the largest score: nothing exceeds it
    if prune <= total - prune + 1:
        threshold = torch.topk(scores, prune, largest=False, sorted=False).values.max()
    else:
        threshold = torch.topk(scores, total - prune + 1, sorted=False).values.min()
    return out.copy_(scores > threshold)
