"""The prunable set, explicit weight masks and the pruning selection criteria.

Conventions:

- The prunable set P holds the weights of every Conv1d/2d/3d and Linear layer; biases and
  batch-norm parameters are never pruned (paper, Appendix A).
- :func:`compute_masks`, :func:`magnitude_topk_masks` and :func:`filter_masks` return ``bool``
  masks (True = kept). :class:`MaskStore` converts them to the dtype/device of each parameter so
  that applying all masks is a single fused ``torch._foreach_mul_`` call.
- Pruning is hard: an entry that is zero in the ``current`` mask stays pruned. Already pruned
  entries get the lowest possible score, so any selection picks them first.
- Counts are exact: a target sparsity s over N entries prunes ``round(s * N)`` of them (Python's
  ``round``, i.e. halves go to the even integer).

Layer-wise criteria (uniform, uniform+, ERK) first decide how many entries every layer keeps and
then keep the largest magnitudes inside each layer. The per-layer keep counts come from one
water-filling rule, ``kept_l = clip(c * w_l, lo_l, hi_l)`` with the scale c chosen so that the
counts sum to the global keep count, followed by largest-remainder rounding:

- uniform: ``w_l = n_l`` (every layer keeps the same fraction),
- uniform+: the same, but the first convolution keeps all of its entries and the last linear
  layer keeps at least ``n_l - floor(0.8 n_l)`` (is pruned at most 80%),
- ERK: ``w_l = sum(shape_l)``, i.e. density proportional to sum(shape) / numel, capped at 1. This
  is exactly the result of the loop of Evci et al. that marks layers whose density would exceed
  1 as dense and rescales the others, solved in closed form,

and in all three ``hi_l`` is the number of entries of layer l that are still unpruned.

Modules: :mod:`~benchmark.pruning.prunable` (the set P), :mod:`~benchmark.pruning.masks`
(:class:`MaskStore`), :mod:`~benchmark.pruning.criteria` (selection and :func:`compute_masks`),
:mod:`~benchmark.pruning.allocation` (per-layer keep counts) and
:mod:`~benchmark.pruning.filters` (structured filter pruning).

May import: core, config.
"""

from benchmark.pruning.allocation import allocate_counts
from benchmark.pruning.criteria import (
    CRITERIA,
    CRITERION_FIELD,
    SPARSITY_ALLOWED,
    SPARSITY_FIELD,
    Criterion,
    Selection,
    compute_masks,
    lamp_scores,
    magnitude_topk_masks,
)
from benchmark.pruning.filters import filter_masks, structured_sparsity
from benchmark.pruning.masks import MaskStore
from benchmark.pruning.prunable import PRUNABLE_TYPES, prunable_parameters

__all__ = [
    "CRITERIA",
    "CRITERION_FIELD",
    "PRUNABLE_TYPES",
    "SPARSITY_ALLOWED",
    "SPARSITY_FIELD",
    "Criterion",
    "MaskStore",
    "Selection",
    "allocate_counts",
    "compute_masks",
    "filter_masks",
    "lamp_scores",
    "magnitude_topk_masks",
    "prunable_parameters",
    "structured_sparsity",
]
