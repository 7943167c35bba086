"""Dense training: the reference model and the parent of IMP runs."""

from __future__ import annotations

from methods.base import Method, MethodInfo, register_method


@register_method
class Dense(Method):
    """Plain dense training with the original schedule; no pruning."""

    name = "dense"
    graph_safe = True
    info = MethodInfo(
        sparsity_specifiable=False,
        pruning_stable=True,
        sparsity_agnostic=True,
        extra_hyperparameters=0,
        summary="dense training with the original learning-rate schedule (reference)",
    )
