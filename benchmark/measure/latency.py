"""Inference latency and throughput, measured the way the field does it.

Per model and batch size: ``warmup`` untimed forward passes, then ``repeats`` timed ones under
``torch.inference_mode`` in eval mode; the median is reported (robust to the odd slow call),
with the 10th/90th percentiles. On CUDA each call is timed with CUDA events (GPU time, no host
overhead in the measurement loop) and the device is synchronised before reading them; on the
CPU with ``time.perf_counter``, and the torch thread count is recorded (it changes CPU figures
several-fold). ``channels_last`` memory format is used on CUDA, where convolutions prefer it.

``measured_speedup = median latency of the dense model / median latency of the pruned model``
at the same batch size on the same device, the two models timed in alternating chunks.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmark.core.errors import ConfigError

DEFAULT_BATCHES = (1, 64)
ROUNDS = 5  # dense and pruned are timed in alternating chunks (see interleaved)


@dataclass(frozen=True)
class Timing:
    """Latency of one model at one batch size (milliseconds per forward pass)."""

    batch: int
    median_ms: float
    p10_ms: float
    p90_ms: float
    images_per_s: float
    repeats: int
    warmup: int


def check_positive(name: str, value: int) -> int:
    """Return ``value`` if it is an integer >= 1, else raise ConfigError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(name, value, "an integer >= 1")
    return value


def versions() -> dict[str, str]:
    """Versions of the libraries that decide the kernels (recorded with every measurement)."""
    import torchvision

    out = {"python": platform.python_version(), "torch": torch.__version__}
    out["torchvision"] = torchvision.__version__
    try:
        # From the distribution's metadata: torch_pruning 1.6 has no __version__ attribute.
        out["torch_pruning"] = metadata.version("torch-pruning")
    except metadata.PackageNotFoundError:  # pragma: no cover - a declared dependency
        pass
    if torch.version.cuda:
        out["cuda"] = str(torch.version.cuda)
    return out


def device_info(device: torch.device) -> dict[str, Any]:
    """The device, its name, and the CPU thread count (they decide what a timing means)."""
    info: dict[str, Any] = {"device": str(device), "threads": torch.get_num_threads()}
    if device.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(device)
        info["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
    else:
        info["device_name"] = platform.processor() or platform.machine()
    return info


def _prepare(model: nn.Module, device: torch.device, channels_last: bool) -> nn.Module:
    model = model.to(device).eval()
    return model.to(memory_format=torch.channels_last) if channels_last else model


@torch.inference_mode()
def time_forward(
    model: nn.Module, inputs: torch.Tensor, *, warmup: int = 10, repeats: int = 50
) -> list[float]:
    """Milliseconds of each of ``repeats`` timed forward passes after ``warmup`` untimed ones."""
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ConfigError("warmup", warmup, "an integer >= 0")
    check_positive("repeats", repeats)
    for _ in range(warmup):
        model(inputs)
    if inputs.device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
        torch.cuda.synchronize(inputs.device)
        for start, end in zip(starts, ends, strict=True):
            start.record()
            model(inputs)
            end.record()
        torch.cuda.synchronize(inputs.device)
        return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model(inputs)
        times.append((time.perf_counter() - start) * 1000.0)
    return times


def _inputs(
    input_shape: Sequence[int],
    batch: int,
    device: torch.device,
    dtype: torch.dtype,
    channels_last: bool,
) -> torch.Tensor:
    """Fixed random inputs of ``(batch, *input_shape)`` (seeded) on ``device``."""
    check_positive("batch", batch)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, *input_shape, generator=generator).to(device=device, dtype=dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last and x.dim() == 4 else x


def _timing(times: Sequence[float], batch: int, warmup: int) -> Timing:
    median = float(np.median(times))
    return Timing(
        batch=batch,
        median_ms=median,
        p10_ms=float(np.percentile(times, 10)),
        p90_ms=float(np.percentile(times, 90)),
        images_per_s=batch / median * 1000.0,
        repeats=len(times),
        warmup=warmup,
    )


def measure(
    model: nn.Module,
    input_shape: Sequence[int],
    batch: int,
    device: torch.device | str = "cpu",
    *,
    warmup: int = 10,
    repeats: int = 50,
    channels_last: bool | None = None,
    dtype: torch.dtype = torch.float32,
) -> Timing:
    """Latency of ``model`` on random inputs of ``(batch, *input_shape)`` (seeded, fixed)."""
    device = torch.device(device)
    channels_last = device.type == "cuda" if channels_last is None else channels_last
    x = _inputs(input_shape, batch, device, dtype, channels_last)
    model = _prepare(model, device, channels_last and x.dim() == 4)
    return _timing(time_forward(model, x, warmup=warmup, repeats=repeats), batch, warmup)


def interleaved(
    models: Sequence[nn.Module],
    x: torch.Tensor,
    *,
    warmup: int = 10,
    repeats: int = 50,
    rounds: int = ROUNDS,
) -> list[list[float]]:
    """Per model, ``repeats`` timings taken in ``rounds`` alternating chunks after warm-up.

    Alternating the models spreads any drift of the machine's load (other processes, clock
    boost, thermal limits) over all of them instead of biasing whichever ran last.
    """
    check_positive("repeats", repeats)
    for model in models:
        time_forward(model, x, warmup=warmup, repeats=1)
    rounds = min(rounds, repeats)
    chunks = [repeats // rounds + (i < repeats % rounds) for i in range(rounds)]
    times: list[list[float]] = [[] for _ in models]
    for chunk in chunks:
        for i, model in enumerate(models):
            times[i] += time_forward(model, x, warmup=0, repeats=chunk)
    return times


def compare(
    dense: nn.Module,
    pruned: nn.Module,
    input_shape: Sequence[int],
    *,
    batches: Sequence[int] = DEFAULT_BATCHES,
    device: torch.device | str = "cpu",
    warmup: int = 10,
    repeats: int = 50,
    channels_last: bool | None = None,
    dtype: torch.dtype = torch.float32,
) -> dict[str, Any]:
    """Dense vs pruned latency per batch size, the measured speedups and what they ran on.

    ``measured_speedup`` (top level) is the one at the largest batch (throughput); the batch-1
    figure (latency) is under ``per_batch``.
    """
    device = torch.device(device)
    channels_last = device.type == "cuda" if channels_last is None else channels_last
    per_batch: dict[str, Any] = {}
    for batch in batches:
        x = _inputs(input_shape, batch, device, dtype, channels_last)
        models = [_prepare(m, device, channels_last and x.dim() == 4) for m in (dense, pruned)]
        dense_times, pruned_times = interleaved(models, x, warmup=warmup, repeats=repeats)
        d, p = _timing(dense_times, batch, warmup), _timing(pruned_times, batch, warmup)
        per_batch[str(batch)] = {
            "dense": asdict(d),
            "pruned": asdict(p),
            "measured_speedup": d.median_ms / p.median_ms,
        }
    largest = str(max(batches))
    return {
        "measured_speedup": per_batch[largest]["measured_speedup"],
        "measured_batch": int(largest),
        "per_batch": per_batch,
        "channels_last": bool(channels_last),
        "dtype": str(dtype).replace("torch.", ""),
        **device_info(device),
        "versions": versions(),
    }
