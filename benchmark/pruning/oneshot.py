"""One-shot pruning criteria of the language-model papers, on one weight matrix ``[out, in]``.

* magnitude (SparseGPT's ``--gmp``, Wanda's ``magnitude``): the smallest ``|W|`` of the layer,
  of each output row, or (:func:`global_keep_masks`) of the whole prunable set;
* Wanda (Sun et al. 2024): the score ``|W_ij| * ||X_j||_2`` compared within each output row;
* SparseGPT (Frantar & Alistarh 2023): blocks of 128 input columns; in each block the mask
  keeps the weights of largest ``w^2 / [H^-1]_jj^2`` and every pruned weight's error is spread
  over the columns after it through the inverse Hessian ``H = 2 X X^T / n`` of the calibration
  inputs (dampened by 1% of its mean diagonal), as ``fasterprune`` of the reference code does.

Every function returns ``bool`` masks, True = kept. Unstructured sparsity ``s`` prunes exactly
``round(s * count)`` entries of each layer or block (per row: that total spread over the rows,
each pruning ``floor`` or ``ceil`` of ``s * in``), so that the harness's exact goal sparsity
holds on small layers too; the reference code prunes ``int(s * in)`` per row, or thresholds with
``<=`` (one more per group): on the papers' widths (>= 2048) the counts differ by less than one
weight per row. An N:M pattern keeps the N best of every M consecutive inputs
(:mod:`benchmark.pruning.nm`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from benchmark.pruning.allocation import largest_remainder
from benchmark.pruning.nm import nm_mask

# Calibration inputs are converted to float64 in pieces of at most this many values (a piece
# of a small model's chunk is the whole chunk: its sums are those of one piece).
STAGING_VALUES = 2**24


def row_keep_mask(score: Tensor, sparsity: float) -> Tensor:
    """Prune the lowest scores of every row (Wanda's per-output comparison): ``round(s * numel)``
    in all, ``floor`` or ``ceil`` of ``s * in`` per row (the first rows take the extra ones)."""
    rows, cols = score.shape
    base, extra = divmod(round(score.numel() * sparsity), rows)
    counts = base + (torch.arange(rows, device=score.device) < extra).long()
    order = torch.sort(score, dim=-1, stable=True).indices
    pruned_rank = torch.arange(cols, device=score.device).view(1, -1) < counts.view(-1, 1)
    return torch.ones_like(score, dtype=torch.bool).scatter_(1, order, ~pruned_rank)


def layer_keep_mask(score: Tensor, sparsity: float) -> Tensor:
    """Keep all but the ``round(s * numel)`` lowest scores of the whole layer."""
    return keep_all_but(score, round(score.numel() * sparsity))


def keep_all_but(score: Tensor, prune: int) -> Tensor:
    """Keep all but the ``prune`` lowest scores (ties: the earlier position is pruned)."""
    keep = torch.ones(score.numel(), dtype=torch.bool, device=score.device)
    if prune:
        keep[torch.sort(score.flatten(), stable=True).indices[:prune]] = False
    return keep.view_as(score)


def global_keep_masks(scores: list[Tensor], sparsity: float) -> list[Tensor]:
    """Keep all but the ``int(s * N)`` lowest scores over every layer together."""
    flat = torch.cat([s.flatten().float() for s in scores])
    keep = layer_keep_mask(flat.view(1, -1), sparsity).flatten()
    return [
        part.view_as(s)
        for part, s in zip(keep.split([s.numel() for s in scores]), scores, strict=True)
    ]


def pattern_keep_mask(
    score: Tensor, sparsity: float, nm: tuple[int, int] | None, scope: str
) -> Tensor:
    """The mask of one layer: N:M when ``nm`` is given, else per ``scope`` ("row"/"layer")."""
    if nm is not None:
        return nm_mask(score, torch.ones_like(score, dtype=torch.bool), *nm)
    return row_keep_mask(score, sparsity) if scope == "row" else layer_keep_mask(score, sparsity)


def wanda_score(weight: Tensor, input_sq_norms: Tensor) -> Tensor:
    """Wanda's score ``|W_ij| * ||X_j||_2`` (``input_sq_norms``: the squared norms, (in,))."""
    return weight.abs().float() * input_sq_norms.float().sqrt().view(1, -1)


class InputStats:
    """Running statistics of a linear layer's inputs over the calibration windows: the Hessian
    ``2 X X^T / n`` (SparseGPT) and the squared column norms ``||X_j||^2 / n`` (Wanda), with n
    the number of windows, as the reference code's ``add_batch``."""

    def __init__(self, columns: int, device: torch.device, hessian: bool) -> None:
        self.samples = 0
        self.sq_norms = torch.zeros(columns, dtype=torch.float64, device=device)
        self.xxt = (
            torch.zeros((columns, columns), dtype=torch.float64, device=device) if hessian else None
        )

    def add(self, inputs: Tensor) -> None:
        """Add a batch of inputs (windows, ..., in), staged in float64 at most
        :data:`STAGING_VALUES` values at a time (a chunk of a 70B model's windows would
        otherwise take gigabytes in float64)."""
        windows = inputs.shape[0] if inputs.dim() > 2 else 1
        rows = inputs.reshape(-1, inputs.shape[-1])
        step = max(1, STAGING_VALUES // rows.shape[1])
        self.samples += windows
        for start in range(0, rows.shape[0], step):
            x = rows[start : start + step].double()
            self.sq_norms += (x * x).sum(dim=0)
            if self.xxt is not None:
                self.xxt += x.T @ x

    def column_sq_norms(self) -> Tensor:
        """``||X_j||^2 / n`` per input column."""
        return (self.sq_norms / max(self.samples, 1)).float()

    def hessian(self) -> Tensor:
        """``2 X X^T / n``."""
        assert self.xxt is not None, "InputStats(hessian=True) collects the Hessian"
        return (2 * self.xxt / max(self.samples, 1)).float()


@torch.no_grad()
def sparsegpt_prune(
    weight: Tensor,
    hessian: Tensor,
    sparsity: float,
    nm: tuple[int, int] | None = None,
    blocksize: int = 128,
    percdamp: float = 0.01,
) -> tuple[Tensor, Tensor]:
    """SparseGPT's ``fasterprune``: the pruned and updated weight and its keep mask."""
    W = weight.detach().clone().float()
    H = hessian.detach().clone().float()
    rows, cols = W.shape
    dead = torch.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    damp = percdamp * torch.mean(torch.diag(H))
    H += damp * torch.eye(cols, device=H.device)
    Hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    keep = torch.ones_like(W, dtype=torch.bool)
    # Unstructured: round(s * numel) pruned in the layer, split over the blocks exactly.
    starts = range(0, cols, blocksize)
    widths = [min(blocksize, cols - i) for i in starts]
    counts = largest_remainder([sparsity * rows * w for w in widths], round(sparsity * W.numel()))
    for i1, block_prune in zip(starts, counts, strict=True):
        i2 = min(i1 + blocksize, cols)
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        Err1 = torch.zeros_like(W1)
        Hinv1 = Hinv[i1:i2, i1:i2]
        diag = torch.diag(Hinv1).reshape(1, -1)
        if nm is None:
            # Pruned in this block: its share of the smallest w^2 / d^2 (ties: by position).
            pruned = ~keep_all_but(W1**2 / diag**2, block_prune)
        else:
            pruned = torch.zeros_like(W1, dtype=torch.bool)
        n, m = nm if nm is not None else (0, 0)
        for i in range(i2 - i1):
            w = W1[:, i]
            d = Hinv1[i, i]
            if nm is not None and i % m == 0:
                score = W1[:, i : i + m] ** 2 / diag[:, i : i + m] ** 2
                lowest = torch.topk(score, m - n, dim=1, largest=False).indices
                pruned[:, i : i + m].scatter_(1, lowest, True)
            q = w.clone()
            q[pruned[:, i]] = 0
            Q1[:, i] = q
            err = (w - q) / d
            W1[:, i:] -= err.unsqueeze(1).matmul(Hinv1[i, i:].unsqueeze(0))
            Err1[:, i] = err
        W[:, i1:i2] = Q1
        keep[:, i1:i2] = ~pruned
        W[:, i2:] -= Err1.matmul(Hinv[i1:i2, i2:])
    return W.to(weight.dtype), keep
