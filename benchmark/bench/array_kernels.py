"""Benchmark: the kernels of an array's step, each variant side by side.

    python -m benchmark.bench.array_kernels --device cuda            # ResNet-56, K = 32
    python -m benchmark.bench.array_kernels --device cpu --tiny      # a smoke test, seconds

Parts (``--parts``):

* ``conv``: one 3x3 convolution of K models at each ResNet-56 stage, forward and backward, each
  way captured in one CUDA graph on CUDA: one grouped convolution (weights as stored or
  channels_last), K separate convolutions in one stream, K separate convolutions spread over
  several streams; per stage the fastest is named (PyTorch issue 73764 measured K convolutions
  on streams beating one grouped convolution in fp16 channels_last; measured here, not assumed);
* ``step``: the array's bare step (grouped layout: stacked forward, the K losses, backward, SGD
  update on one fixed batch per run), captured in one CUDA graph on CUDA, per variant of
  ``--variants``: ``base`` (today's kernels), ``wcl`` (channels_last weights), ``fp16``
  (fp16 activations, fp32 BatchNorm statistics, as bf16 does), ``compile`` (torch.compile of
  the forward and losses: Inductor fuses BatchNorm, ReLU and the residual adds; its backward
  too), and combinations joined by ``+``;
* ``profile``: the base step (eager, so every operator is seen) under torch.profiler, its device
  time per operator summed over the step and grouped (convolution, BatchNorm, elementwise,
  loss, optimizer, other): where the time goes.

Prints figures; asserts nothing (speed targets live in benchmarks, never in timed tests).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from benchmark.bench.array import timed
from benchmark.bench.throughput import (
    SYNTHETIC,
    SyntheticSource,
    make_batches,
    mode_config,
    parse_device,
)
from benchmark.data.base import DATASETS
from benchmark.training.array.step import ArrayStep
from benchmark.training.device import configure_kernels, sync
from benchmark.training.fast_step import CudaGraphBackend
from benchmark.training.trainer import Trainer

STAGES = ((16, 32), (32, 16), (64, 8))  # ResNet-56's stages: channels, pixels per side
PARTS = ("conv", "step", "profile")
VARIANT_PARTS = ("base", "wcl", "fp16", "compile")
HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


def seconds_per_call(fn: Callable[[], None], dev: torch.device, iters: int, graph: bool) -> float:
    """Seconds per call of ``fn`` (captured in a CUDA graph first when ``graph``), after warm-up."""
    if graph and dev.type == "cuda":
        for _ in range(3):  # cuDNN's choices and the allocator's blocks, before capture
            fn()
        sync(dev)
        fn = CudaGraphBackend(dev).capture(fn)
    return timed(fn, dev, iters)


def conv_ways(
    k: int, c: int, side: int, batch: int, dtype: torch.dtype, dev: torch.device, streams: int
) -> dict[str, Callable[[], None]]:
    """Forward and backward of one 3x3 convolution of K models, each way of running it."""
    g = torch.Generator().manual_seed(0)
    cl = torch.channels_last
    w = (torch.randn(k, c, c, 3, 3, generator=g) * 0.1).to(dev, dtype).requires_grad_()
    x_wide = torch.randn(batch, k * c, side, side, generator=g).to(dev, dtype)
    x_wide = x_wide.contiguous(memory_format=cl).requires_grad_()
    x_sep = [
        torch.randn(batch, c, side, side, generator=g)
        .to(dev, dtype)
        .contiguous(memory_format=cl)
        .requires_grad_()
        for _ in range(k)
    ]
    side_streams = [torch.cuda.Stream(dev) for _ in range(streams)] if dev.type == "cuda" else []

    def grouped(weight_cl: bool) -> Callable[[], None]:
        def run() -> None:
            weight = w.view(k * c, c, 3, 3)
            if weight_cl:
                weight = weight.contiguous(memory_format=cl)
            F.conv2d(x_wide, weight, padding=1, groups=k).sum().backward()

        return run

    def one(i: int) -> None:
        F.conv2d(x_sep[i], w[i], padding=1).sum().backward()

    def separate() -> None:
        for i in range(k):
            one(i)

    def on_streams() -> None:
        if not side_streams:
            return separate()
        here = torch.cuda.current_stream(dev)
        for s in side_streams:
            s.wait_stream(here)
        for i in range(k):
            with torch.cuda.stream(side_streams[i % len(side_streams)]):
                one(i)
        for s in side_streams:
            here.wait_stream(s)

    return {
        "grouped": grouped(False),
        "grouped wcl": grouped(True),
        "separate": separate,
        f"{streams} streams": on_streams,
    }


def conv_part(args: argparse.Namespace) -> None:
    """Print images/s of one conv layer (forward + backward) of K models, each way, per stage."""
    graph = "captured" if args.dev.type == "cuda" else "eager"
    print(f"\none 3x3 conv of K models, forward + backward, {graph}; images/s of all K")
    for precision in args.precisions:
        for k in args.ks:
            for c, side in args.stages:
                ways = conv_ways(k, c, side, args.batch, _dtype(precision), args.dev, args.streams)
                rates = {}
                for name, fn in ways.items():
                    try:
                        t = seconds_per_call(fn, args.dev, args.iters, graph=True)
                        rates[name] = k * args.batch / t
                    except Exception as err:  # noqa: BLE001 - a figure per cell
                        print(f"  {name} failed: {type(err).__name__}: {err}"[:300])
                cells = "".join(f"{n:>14s} {r:>12,.0f}" for n, r in rates.items())
                best = max(rates, key=rates.__getitem__) if rates else "-"
                print(f"{precision} K={k:<3d} C={c:<3d}{side:>3d}px{cells}   fastest: {best}",
                      flush=True)  # fmt: skip


def _dtype(precision: str) -> torch.dtype:
    return HALF.get(precision, torch.float32)


def build_array(args: argparse.Namespace, k: int, precision: str) -> ArrayStep:
    """An array of K dense ResNet trainers (grouped layout) on the synthetic batches."""
    mode = "fast" if precision == "fp32" else "fast-bf16"
    cfg = mode_config(args, mode, args.model, {"name": "dense"}, {"epochs": 2})
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "grad and param do not obey")
        return ArrayStep([Trainer(cfg) for _ in range(k)], "grouped")


def bare_step(
    args: argparse.Namespace, array: ArrayStep, precision: str, variant: set[str]
) -> Callable[[], None]:
    """The array's bare iteration on one fixed batch per run, with the variant's kernels."""
    k = array.k
    x, y = args.batches[0]
    xs, ys = x.expand(k, *x.shape).contiguous(), y.expand(k, *y.shape).contiguous()
    stacked, sgd = array.stacked, array.sgd
    assert stacked.wide is not None
    stacked.wide.set_weight_format("wcl" in variant)
    tables = sgd.tables()
    half = "fp16" if "fp16" in variant else precision
    autocast_on = half != "fp32"
    dtype = _dtype(half) if autocast_on else torch.bfloat16

    def losses(xs: Tensor, ys: Tensor) -> Tensor:
        # No autocast cache: a captured cast would replay stale weights.
        with torch.autocast(args.dev.type, dtype, enabled=autocast_on, cache_enabled=False):
            out = stacked.forward(xs)
            per = F.cross_entropy(out.flatten(0, 1).float(), ys.flatten(), reduction="none")
            return per.view(k, -1).mean(1).sum()

    forward = torch.compile(losses, dynamic=False) if "compile" in variant else losses

    def step() -> None:
        with torch.autograd.profiler.record_function("forward"):
            total = forward(xs, ys)
        stacked.zero_grad()
        with torch.autograd.profiler.record_function("backward"):
            total.backward()
        with torch.autograd.profiler.record_function("optimizer"):
            sgd.update_from(tables)

    return step


def step_part(args: argparse.Namespace) -> None:
    """Print images/s of the array's bare step per variant, captured on CUDA."""
    graph = args.dev.type == "cuda"
    print(f"\narray bare step ({args.model}, grouped layout, {'captured' if graph else 'eager'});"
          " images/s of all K")  # fmt: skip
    for precision in args.precisions:
        for k in args.ks:
            cells = []
            for name in args.variants:
                variant = set(name.split("+"))
                try:
                    array = build_array(args, k, precision)
                    step = bare_step(args, array, precision, variant)
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.filterwarnings("ignore", "grad and param do not obey")
                        t = seconds_per_call(step, args.dev, args.iters, graph)
                    cells.append(f"{name} {k * args.batch / t:,.0f}")
                    del array, step
                except Exception as err:  # noqa: BLE001 - a figure per cell
                    cells.append(f"{name} {type(err).__name__}")
                    print(f"  {name} failed: {type(err).__name__}: {err}"[:400], file=sys.stderr)
                if args.dev.type == "cuda":
                    torch.cuda.empty_cache()
                spent = time.perf_counter() - start
                print(f"{precision} K={k:<3d} {cells[-1]:>28s}   ({spent:.0f} s with warm-up and"
                      " compile)", flush=True)  # fmt: skip


def profile_part(args: argparse.Namespace) -> None:
    """Print the base step's device time per operator, grouped: where the time goes."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if args.dev.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    for precision in args.precisions:
        k = max(args.ks)
        array = build_array(args, k, precision)
        step = bare_step(args, array, precision, {"base"})
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "grad and param do not obey")
            for _ in range(3):
                step()
            sync(args.dev)
            with profile(activities=activities) as prof:
                for _ in range(args.profile_iters):
                    step()
                sync(args.dev)
        print_breakdown(prof, precision, k, args.profile_iters, args.batch)


# Kernel (on CUDA) or operator (on the CPU) name fragments, in order, to the group they count
# to: cuDNN's convolution kernels are named by their algorithm (xmma, implicit_gemm, ...).
GROUPS = (
    ("convolution", ("conv", "cudnn", "xmma", "implicit_gemm", "wgrad", "dgrad", "fprop")),
    ("batchnorm", ("batch_norm",)),
    ("loss", ("cross_entropy", "nll_loss", "log_softmax", "softmax")),
    ("optimizer", ("addcmul", "foreach", "sgd")),
    ("elementwise", ("relu", "threshold", "elementwise", "vectorized", "add", "mul", "copy",
                     "fill", "zero", "pad", "cat", "reduce", "sum", "mean", "div")),
)  # fmt: skip


def print_breakdown(prof: object, precision: str, k: int, iters: int, batch: int) -> None:
    """The step's time per group, each kernel counted once: on CUDA the device time of every
    kernel (by its name), on the CPU the self time of every operator; and the top ones."""
    from torch.autograd import DeviceType

    events = [e for e in prof.key_averages() if not e.key.startswith("ProfilerStep")]  # type: ignore[attr-defined]
    kernels = [e for e in events if getattr(e, "device_type", None) == DeviceType.CUDA]

    def spent(e: object) -> float:
        if kernels:
            return float(getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0))
        return float(getattr(e, "self_cpu_time_total", 0))

    counted = kernels or [e for e in events if e.key not in ("forward", "backward", "optimizer")]
    groups: dict[str, float] = {}
    for e in counted:
        name = e.key.lower()
        group = next((g for g, frags in GROUPS if any(f in name for f in frags)), "other")
        groups[group] = groups.get(group, 0.0) + spent(e)
    total = sum(groups.values())
    what = "device time of its kernels" if kernels else "CPU self time of its operators"
    print(f"\nwhere a step's time goes ({precision}, K={k}, eager, {what}, per step)")
    for group, us in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {group:14s}{us / iters / 1e3:9.2f} ms  {100 * us / max(total, 1):5.1f}%")
    print(f"  {'all':14s}{total / iters / 1e3:9.2f} ms  = {k * batch * iters / total * 1e6:,.0f}"
          " images/s if nothing else cost")  # fmt: skip
    for e in sorted(counted, key=spent, reverse=True)[:14]:
        print(f"    {e.key[:60]:60s}{spent(e) / iters / 1e3:9.2f} ms  x{e.count // iters}")


def main(argv: Sequence[str] | None = None) -> None:
    """Print the array step's kernel figures (conv ways, step variants, time breakdown)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto", help="cpu, cuda, or auto (CUDA if present)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated of {PARTS}")
    p.add_argument("--k", default="32", help="comma-separated runs per array")
    p.add_argument("--model", default="resnet56")
    p.add_argument("--precisions", default="bf16,fp32", help="of bf16, fp16, fp32")
    p.add_argument("--variants", default="base,wcl,fp16,compile,compile+wcl",
                   help=f"step variants: '+'-joined of {VARIANT_PARTS}")  # fmt: skip
    p.add_argument("--streams", type=int, default=4, help="streams of the conv part")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--profile-iters", type=int, default=3)
    p.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke test on the CPU")
    args = p.parse_args(argv)
    args.dev = parse_device(p, args.device)
    args.parts = args.parts.split(",")
    args.precisions = args.precisions.split(",")
    args.variants = args.variants.split(",")
    variant_parts = [v for name in args.variants for v in name.split("+")]
    checks = (
        ("--parts", args.parts, PARTS),
        ("--precisions", args.precisions, ("bf16", "fp16", "fp32")),
        ("--variants", variant_parts, VARIANT_PARTS),
    )
    for flag, values, allowed in checks:
        if not set(values) <= set(allowed):
            p.error(f"{flag} = {','.join(values)!r} is invalid; allowed: {', '.join(allowed)}")
    try:
        args.ks = [int(k) for k in args.k.split(",")]
    except ValueError:
        p.error(f"--k = {args.k!r} is invalid; allowed: comma-separated integers >= 1")
    args.stages = STAGES
    if args.tiny:
        args.stages, args.batch, args.iters, args.model = ((8, 8),), 8, 2, "cnn_small"
    args.runtime = {"device": str(args.dev), "deterministic": False, "threads": 0}
    configure_kernels(args.dev, False)
    batches = make_batches(2, args.batch, (3, 32, 32), 10, args.dev)
    args.batches = batches
    DATASETS.replace(SYNTHETIC, lambda cfg, device: SyntheticSource(batches, 10))
    where = torch.cuda.get_device_name(args.dev) if args.dev.type == "cuda" else "CPU"
    print(f"batch {args.batch}, {args.iters} iterations, {where}, torch {torch.__version__}",
          flush=True)  # fmt: skip
    try:
        if "conv" in args.parts:
            conv_part(args)
        if "step" in args.parts:
            step_part(args)
        if "profile" in args.parts:
            profile_part(args)
    finally:
        DATASETS.discard(SYNTHETIC)


if __name__ == "__main__":
    main()
