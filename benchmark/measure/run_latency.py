"""Measured speedup of a stored run (``prunebench latency RUN_ID``), kept in its record.

What is measured depends on the sparsity the run has:

* filter pruning (``method.params.structured``): the final weights are compacted
  (:mod:`benchmark.measure.compaction`) and the compacted model is timed against the same model
  uncompacted (as slow as the dense one);
* an N:M criterion (``nm``, ``2:4``, ...): the 2:4 linear layers run on semi-structured sparse
  kernels where the GPU has them (:mod:`benchmark.measure.semistructured`), otherwise the record
  says "not measurable on this device";
* any other (unstructured) mask: no measurement; dense kernels do not skip zeros, so only the
  theoretical speedup exists, and the record says so;
* a dense run: nothing to compare.

The result goes to ``metrics.latency`` and ``metrics.measured_speedup`` (None when there is no
measured number) of the run's record, beside the theoretical ``metrics.speedup``.

A run whose config says ``latency.measure = true`` (a grid's ``[latency]`` table sets it on
every run) is measured by the job that trained it, right after training
(:func:`measure_after_training`); the section is not part of the run id.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from benchmark.config.parse import config_from_dict, replace_section
from benchmark.config.run import LatencyConfig, RunConfig
from benchmark.core.errors import ConfigError, check
from benchmark.core.files import load_checkpoint
from benchmark.measure.latency import DEFAULT_BATCHES, compare, device_info, versions
from benchmark.models.registry import build_model
from benchmark.store.results import FINISHED, Store

# Input shapes of the registered datasets (C, H, W); the class count is read from the weights.
INPUT_SHAPES: dict[str, tuple[int, int, int]] = {
    "digits": (1, 8, 8),
    "cifar10": (3, 32, 32),
    "cifar100": (3, 32, 32),
    "imagenet": (3, 224, 224),
}
UNSTRUCTURED_NOTE = (
    "unstructured sparsity: dense kernels do not skip zeros, so there is no measured speedup; "
    "the speedup column is theoretical (FLOPs) only"
)
DEVICES = ("auto", "cpu", "cuda")
# Bounds that keep a timing after training from running out of memory or for days.
MAX_BATCH = 65_536
MAX_REPEATS = 100_000


def validate_latency(cfg: RunConfig) -> None:
    """Check the ``latency`` section of ``cfg`` (before any compute); raises ConfigError."""
    lat = cfg.latency
    check(lat.device in DEVICES, "latency.device", lat.device, f"one of {', '.join(DEVICES)}")
    check(
        bool(lat.batches)
        and all(not isinstance(b, bool) and 1 <= b <= MAX_BATCH for b in lat.batches),
        "latency.batches",
        lat.batches,
        f"a non-empty list of integers in [1, {MAX_BATCH}]",
    )
    check(0 <= lat.warmup <= MAX_REPEATS, "latency.warmup", lat.warmup, f"in [0, {MAX_REPEATS}]")
    check(1 <= lat.repeats <= MAX_REPEATS, "latency.repeats", lat.repeats, f"in [1, {MAX_REPEATS}]")
    check(
        not lat.measure or cfg.data.name in INPUT_SHAPES,
        "latency.measure",
        lat.measure,
        f"false for data.name {cfg.data.name!r} (latency is measured on {', '.join(INPUT_SHAPES)})",
    )


def sparsity_kind(cfg: RunConfig) -> str:
    """'dense', 'filter', 'n:m' or 'unstructured': which speedup can be measured for ``cfg``."""
    from benchmark.pruning.nm import PATTERNS

    if cfg.method.name == "dense":
        return "dense"
    params = cfg.method.params
    if getattr(params, "structured", False):
        return "filter"
    if getattr(params, "criterion", None) in PATTERNS:
        return "n:m"
    return "unstructured"


def resolve_device(device: str) -> torch.device:
    """``auto``: CUDA when available, else the CPU; others are checked against :data:`DEVICES`."""
    if device not in DEVICES:
        raise ConfigError("--device", device, f"one of {', '.join(DEVICES)}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device", device, "cpu or auto (no CUDA device is visible)")
    return torch.device(device)


def load_run_model(cfg: RunConfig, weights: dict[str, torch.Tensor]) -> tuple[nn.Module, tuple]:
    """The run's model with its final weights, and the input shape of its dataset."""
    shape = INPUT_SHAPES.get(cfg.data.name)
    if shape is None:
        raise ConfigError("data.name", cfg.data.name, f"one of {', '.join(INPUT_SHAPES)}")
    probe = build_model(cfg.model.name, 2, shape)
    head = [n for n, m in probe.named_modules() if isinstance(m, nn.Conv2d | nn.Linear)][-1]
    num_classes = int(weights[f"{head}.weight"].shape[0])
    model = build_model(cfg.model.name, num_classes, shape)
    model.load_state_dict(weights)
    return model.eval(), shape


def measure_model(
    model: nn.Module,
    shape: Sequence[int],
    kind: str,
    device: torch.device,
    *,
    batches: Sequence[int] = DEFAULT_BATCHES,
    warmup: int = 10,
    repeats: int = 50,
) -> dict[str, Any]:
    """The latency record of ``model`` for a run of sparsity ``kind`` (see the module doc)."""
    if kind == "filter":
        from benchmark.measure.compaction import compact, kept_fraction

        example = torch.zeros(1, *shape)
        compacted = compact(model, example)
        result = compare(
            model, compacted, shape, batches=batches, device=device, warmup=warmup, repeats=repeats
        )
        return result | {
            "kind": kind,
            "params_kept": kept_fraction(model, compacted),
            "note": "filter-pruned model compacted (Torch-Pruning) vs the same model uncompacted",
        }
    if kind == "n:m":
        from benchmark.measure.semistructured import measure_nm

        return measure_nm(model, shape, device, batches=batches, warmup=warmup, repeats=repeats)
    note = UNSTRUCTURED_NOTE if kind == "unstructured" else "dense model: nothing to compare"
    return {
        "kind": kind,
        "measured_speedup": None,
        "note": note,
        **device_info(device),
        "versions": versions(),
    }


def measure_run(
    run_id: str,
    store_dir: str,
    *,
    device: str = "auto",
    batches: Sequence[int] = DEFAULT_BATCHES,
    warmup: int = 10,
    repeats: int = 50,
    save: bool = True,
) -> dict[str, Any]:
    """Measure the finished run ``run_id`` of ``store_dir`` and (by default) keep the result."""
    store = Store(store_dir)
    record = store.read(run_id)
    if record is None or record.get("status") != FINISHED:
        raise ConfigError("RUN_ID", run_id, f"the id of a finished run in {store_dir}")
    weights_path = store.weights_path(run_id)
    if not weights_path.exists():
        raise ConfigError("RUN_ID", run_id, f"a run whose weights are kept ({weights_path})")
    dev = resolve_device(device)
    cfg = config_from_dict(record["config"])
    model, shape = load_run_model(cfg, load_checkpoint(weights_path))
    result = measure_model(
        model, shape, sparsity_kind(cfg), dev, batches=batches, warmup=warmup, repeats=repeats
    )
    if save:  # the record stays the same run's result: rewritten in place, under the lock
        store.update_metrics(
            run_id, {"latency": result, "measured_speedup": result["measured_speedup"]}
        )
    return result


def asking_for_latency(cfg: RunConfig) -> RunConfig:
    """A copy of ``cfg`` that is timed right after training (``latency.measure``); same run id."""
    latency = dataclasses.replace(cfg.latency, measure=True)
    return replace_section(cfg, latency=latency)


def measure_after_training(cfg: RunConfig) -> dict[str, Any] | None:
    """Measure the just-finished run ``cfg`` if ``cfg.latency.measure``; None when not asked.

    The training result is never lost to a failed measurement: the error is logged and kept as
    ``metrics.latency.error`` (``measured_speedup`` None); ``prunebench latency`` can retry.
    """
    lat: LatencyConfig = cfg.latency
    if not lat.measure:
        return None
    options = {"batches": lat.batches, "warmup": lat.warmup, "repeats": lat.repeats}
    try:
        return measure_run(cfg.run_id, cfg.output.dir, device=lat.device, **options)
    except Exception as err:  # the run finished; only its timing failed
        message = f"{type(err).__name__}: {err}"
        print(f"[prunebench] run {cfg.run_id}: latency not measured ({message})", flush=True)
        failed = {"latency": {"error": message, "measured_speedup": None}}
        Store(cfg.output.dir).update_metrics(cfg.run_id, failed | {"measured_speedup": None})
        return None
