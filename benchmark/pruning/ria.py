"""RIA, relative importance and activations (Zhang et al., ICLR 2024), on one weight ``[out, in]``.

The score of a weight is its relative importance, its share of the absolute weights of its
input channel (column) plus its share of those of its output channel (row), times its input
channel's activation norm to the power ``a`` (the authors' default 0.5; ``a = 0`` is their "RI"
without calibration data):

    ``(|W_ij| / sum_k |W_kj| + |W_ij| / sum_k |W_ik|) * ||X_j||_2 ** a``

Unstructured masks compare the scores over the whole layer (the reference code's default) or
within each output row (its ``--per_outneuron``). An N:M mask may first permute the input
channels (channel permutation) so that each group of M holds a mix of important and unimportant
channels:

* ``reallocation`` (the reference's heuristic channel reallocation): the channels sorted by their
  summed score are cut into M equal runs, and group g takes the g-th channel of every run, the
  runs read alternately forwards and backwards;
* ``lsa``: then, for each position in a group in turn, the channels at that position are
  reassigned to the groups by a linear sum assignment (:func:`scipy.optimize.linear_sum_assignment`)
  that maximises the summed score the N:M mask keeps (the reference's ``--lsa``, exact version,
  not its ``--fast`` blocks).

The mask is returned in the layer's own channel order: it is N:M along the permuted inputs, so a
2:4 kernel needs the permutation applied to the layer's inputs (the reference code leaves that
acceleration "under testing").
"""

from __future__ import annotations

import torch
from torch import Tensor

from benchmark.pruning.nm import nm_mask

PERMUTATIONS = ("none", "reallocation", "lsa")
# Elements of one candidate tensor of the assignment scores (bounds its memory).
_LSA_CHUNK = 1 << 24


def ria_score(weight: Tensor, input_sq_norms: Tensor, a: float) -> Tensor:
    """RIA's score (see the module docstring); ``input_sq_norms``: ``||X_j||^2 / n`` per input."""
    w = weight.detach().abs().float()
    relative = w / w.sum(dim=0, keepdim=True) + w / w.sum(dim=1, keepdim=True)
    return relative * input_sq_norms.float().sqrt().pow(a).view(1, -1)


def kept_value(score: Tensor, n: int, m: int) -> Tensor:
    """The summed score an N:M mask keeps: the N largest of every group of M consecutive inputs."""
    groups = score.reshape(*score.shape[:-1], -1, m)
    return groups.topk(n, dim=-1).values.sum()


def reallocation_order(score: Tensor, m: int) -> Tensor:
    """The reference's heuristic channel reallocation: the input order (slot -> channel)."""
    cols = score.shape[1]
    ranked = torch.sort(score.sum(dim=0), stable=True).indices
    order = torch.empty_like(ranked)
    for run in range(m):
        part = ranked[cols * run // m : cols * (run + 1) // m]
        order[run::m] = part if run % 2 == 0 else part.flip(0)
    return order


def lsa_refine(score: Tensor, order: Tensor, n: int, m: int) -> Tensor:
    """``order`` improved position by position with a linear sum assignment (see module)."""
    from scipy.optimize import linear_sum_assignment

    rows, cols = score.shape
    groups = cols // m
    order = order.clone()
    for position in range(m):
        permuted = score[:, order].view(rows, groups, m)
        candidates = permuted[:, :, position]  # (rows, groups): the channel at this position
        others = torch.cat([permuted[:, :, :position], permuted[:, :, position + 1 :]], dim=2)
        # value[g, r]: what group g keeps with candidate r's channel at this position.
        value = torch.empty((groups, groups), dtype=torch.float64)
        step = max(1, _LSA_CHUNK // max(1, rows * groups * m))
        for g0 in range(0, groups, step):
            g1 = min(groups, g0 + step)
            block = torch.cat(
                [
                    candidates.unsqueeze(1).expand(rows, g1 - g0, groups).unsqueeze(-1),
                    others[:, g0:g1].unsqueeze(2).expand(rows, g1 - g0, groups, m - 1),
                ],
                dim=-1,
            )
            value[g0:g1] = block.topk(n, dim=-1).values.sum(dim=(0, 3)).double().cpu()
        _, chosen = linear_sum_assignment(value.numpy(), maximize=True)
        slots = torch.arange(groups) * m + position
        order[slots] = order[torch.as_tensor(chosen) * m + position]
    return order


def ria_keep_mask(score: Tensor, nm: tuple[int, int], permutation: str) -> Tensor:
    """The N:M keep mask of ``score``, after the channel ``permutation`` (in the original order)."""
    n, m = nm
    alive = torch.ones_like(score, dtype=torch.bool)
    if permutation == "none":
        return nm_mask(score, alive, n, m)
    order = reallocation_order(score, m)
    if permutation == "lsa":
        order = lsa_refine(score, order, n, m)
    keep = torch.empty_like(alive)
    keep[:, order] = nm_mask(score[:, order], alive, n, m)
    return keep
