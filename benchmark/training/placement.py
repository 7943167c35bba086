"""Where a run keeps a language model (``runtime.offload``): whole on the device, or in host
memory with one decoder layer at a time moved to the device (:mod:`benchmark.pruning.offload`).

"auto" offloads when the run's estimated one-shot peak without offloading (the method's
``memory``, :mod:`methods._llm_memory`; else the weights alone) exceeds
:data:`FIT_FRACTION` of the device's free memory; on a CPU there is nothing to offload to. "on"
runs the offloaded path on any device (on a CPU the moves are no-ops, the layer-by-layer code
runs all the same), "off" never.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from benchmark.config.run import RunConfig, check
from benchmark.models.causal_lm import LM_MODELS
from benchmark.pruning.offload import Placement, module_bytes, set_placement
from benchmark.training.lm_checks import check_vocab_fits
from methods import get_method

# The share of the device's free memory a run may plan to fill (the rest: allocator slack,
# kernels' workspaces, what the estimate leaves out).
FIT_FRACTION = 0.9


def place_model(
    cfg: RunConfig,
    model: nn.Module,
    tokens: int,
    device: torch.device,
    processes: int,
    given: Placement | None = None,
) -> Placement | None:
    """Move a freshly built model where the run keeps it: a language model (whose ``tokens``
    ids must fit its vocabulary) as its placement says (``given``, else
    :func:`choose_placement`), any other model to ``device``. Returns the placement."""
    if cfg.model.name not in LM_MODELS:
        model.to(device)
        return None
    check_vocab_fits(cfg, model, tokens)
    placement = given or choose_placement(cfg, model, device, processes)
    assert placement is not None
    set_placement(model, placement)
    return placement


def lm_metrics(
    setup_seconds: float, placement: Placement | None, windows: int, tokens_per_s: float
) -> dict[str, Any]:
    """A language-model run's extra metrics: the seconds before training (loading, the one-shot
    prune and its evaluation), this process's peak host memory, whether the decoder layers
    were offloaded, an epoch's training windows (``windows``) and the training tokens/s."""
    import resource

    # ru_maxrss is in KiB on Linux (the platforms the harness runs on).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "setup_seconds": setup_seconds,
        "peak_host_memory_bytes": int(rss),
        "offloaded": bool(placement is not None and placement.offload_used),
        "train_images_per_epoch": windows,
        "tokens_per_s": tokens_per_s or None,  # None: nothing trained (one-shot)
    }


def choose_placement(
    cfg: RunConfig, model: nn.Module, device: torch.device, processes: int
) -> Placement | None:
    """The placement of a language-model run's ``model`` (None for other tasks: they move
    the model to the device as usual)."""
    if cfg.model.name not in LM_MODELS:
        return None
    setting = cfg.runtime.offload
    check(
        setting != "on" or processes == 1,
        "runtime.offload",
        setting,
        f"'off' or 'auto' with {processes} data-parallel processes (offloading is per process)",
    )
    if setting == "auto":
        offload = processes == 1 and device.type == "cuda" and not _fits(cfg, model, device)
    else:
        offload = setting == "on"
    return Placement(device, offload)


def _fits(cfg: RunConfig, model: nn.Module, device: torch.device) -> bool:
    """Whether the run's one-shot peak without offloading fits the device's free memory."""
    weights = module_bytes(model)
    memory_of = getattr(get_method(cfg.method.name), "memory", None)
    memory = memory_of(cfg) if memory_of is not None else None
    need = weights if memory is None else max(memory.one_shot(offload=False), weights)
    free, _total = torch.cuda.mem_get_info(device)
    return need <= FIT_FRACTION * free
