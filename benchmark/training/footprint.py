"""How many bytes a run's final weights will take, before it runs (for dry runs).

The model is built on torch's ``meta`` device (no memory, no compute) to list its state dict
and its prunable set; the class count and input shape are those its dataset reports, without
reading the dataset. A pruned run is counted at its goal sparsity ``method.sparsity``. Methods
whose sparsity emerges from their hyperparameters (CS, STR, DST: ``sparsity_specifiable`` is
False) may end at any sparsity (a ResNet-56 of a 90% cell ended at 50%), so they are counted at
their worst case, stored dense: a packed file is never larger than the dense one, so the
estimate stays an upper bound. Dense runs are counted dense.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from benchmark.config.run import RunConfig
from benchmark.store.footprint import DiskEstimate, TensorSize, run_bytes

# What each registered dataset reports as (num_classes, input_shape) without reading it.
# Segmentation: 21 VOC classes on COCO, 19 on CityScapes (a conv net's size ignores the crop);
# translation: T5's embedding count for its 32,000-piece SentencePiece model, padded.
DATASET_SHAPES: dict[str, tuple[int, tuple[int, int, int]]] = {
    "digits": (10, (1, 8, 8)),
    "cifar10": (10, (3, 32, 32)),
    "cifar100": (100, (3, 32, 32)),
    "imagenet": (1000, (3, 224, 224)),
    "coco": (21, (3, 64, 64)),
    "cityscapes": (19, (3, 64, 64)),
    "wmt16": (32128, (1, 1, 128)),
}
# The task each dataset is trained with, where not classification (its exclusions leave layers
# out of the prunable set; an array trains classification only).
DATASET_TASKS = {
    "coco": "segmentation",
    "cityscapes": "segmentation",
    "wmt16": "translation",
    "wikitext2": "causal_lm",
    "pydoc": "causal_lm",
}


@functools.cache
def model_tensors(model: str, data: str, exclude: tuple[str, ...]) -> tuple[TensorSize, ...] | None:
    """The state dict of ``model`` on ``data`` as sizes (prunable ones marked); None when the
    model cannot be built without its files (e.g. a local pretrained checkpoint)."""
    import torch

    from benchmark.models.registry import build_model
    from benchmark.pruning import prunable_parameters
    from benchmark.tasks import TASKS

    if data not in DATASET_SHAPES:
        return None
    classes, shape = DATASET_SHAPES[data]
    task_exclude = TASKS.get(DATASET_TASKS.get(data, "classification"), "task").default_exclude
    try:
        with torch.device("meta"):
            net = build_model(model, classes, shape)
    except Exception:  # a builder that needs real memory or files: not sized
        return None
    prunable = {name for name, _ in prunable_parameters(net, [*task_exclude, *exclude])}
    return tuple(
        TensorSize(t.numel(), t.element_size(), name in prunable)
        for name, t in net.state_dict(keep_vars=False).items()
    )


def config_bytes(cfg: RunConfig) -> tuple[int, int] | None:
    """(dense, packed) bytes of ``cfg``'s final weights file; None when it cannot be sized."""
    from benchmark.models.causal_lm import LM_MODELS

    if cfg.model.name in LM_MODELS:
        return _lm_sized(cfg.model.name, cfg.model.pretrained, cfg.model.dtype, worst_density(cfg))
    exclude = tuple(cfg.method.exclude)
    return _sized(cfg.model.name, cfg.data.name, exclude, worst_density(cfg))


@functools.cache
def _lm_sized(model: str, pretrained: str, dtype: str, density: float) -> tuple[int, int] | None:
    """A language model's weights from its sizes (the papers' Hub models, a folder's
    ``config.json``, the tiny models' configuration) in ``model.dtype``: the decoder layers'
    weights prunable, the embeddings and head not (a Hub model not in the local cache and not
    in the table of the papers' models: None)."""
    from benchmark.models.causal_lm import lm_shape

    shape = lm_shape(model, pretrained)
    if shape is None:
        return None
    itemsize = 4 if dtype == "float32" else 2
    tensors = (
        TensorSize(int(shape.layer * shape.layers), itemsize, True),
        TensorSize(int(shape.outside), itemsize, False),
    )
    return run_bytes(tensors, density)


@functools.cache
def _sized(
    model: str, data: str, exclude: tuple[str, ...], density: float
) -> tuple[int, int] | None:
    # A paper-scale plan sizes thousands of runs of a few models at a few densities: each
    # (model, data, exclusions, density) is counted once.
    tensors = model_tensors(model, data, exclude)
    return None if tensors is None else run_bytes(tensors, density)


def worst_density(cfg: RunConfig) -> float:
    """The largest density ``cfg``'s final weights can have: its goal's, or 1 for a dense run
    and for a method whose sparsity emerges rather than being set."""
    from methods import get_method

    if cfg.method.name == "dense" or not get_method(cfg.method.name).info.sparsity_specifiable:
        return 1.0
    return 1.0 - float(cfg.method.sparsity)


def estimate(configs: Iterable[RunConfig]) -> DiskEstimate:
    """The bytes of the final weights of ``configs`` (each run once)."""
    return estimate_runs((cfg.run_id, cfg) for cfg in configs)


def estimate_runs(runs: Iterable[tuple[str, RunConfig]]) -> DiskEstimate:
    """:func:`estimate` of (run id, config) pairs, for callers that have the ids already."""
    out = DiskEstimate()
    seen: set[str] = set()
    for run_id, cfg in runs:
        if run_id not in seen:
            seen.add(run_id)
            out.add(config_bytes(cfg), cfg.model.name)
    return out
