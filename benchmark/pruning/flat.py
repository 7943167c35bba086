"""Global operations over the prunable set as single kernels on one flat buffer.

Methods that select a global top-k of P every iteration (DNW, GSM, LC) use these instead of a
per-parameter loop or :func:`benchmark.pruning.magnitude_topk_masks`, which reads a count back
to the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

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


def keep_count(masks: MaskStore, sparsity: float) -> int:
    """How many weights of P a sparsity ``sparsity`` keeps: N_P - round(s N_P) (as the core)."""
    total = masks.num_prunable()
    return total - round(sparsity * total)
