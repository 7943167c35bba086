"""Benchmark: K runs trained as one array model (benchmark.training.array) on one device.

    python -m benchmark.bench.array --device cuda
    python -m benchmark.bench.array --device cpu --tiny     # a smoke test, seconds

Three parts, in one call (``--parts``):

* ``layer``: one 3x3 convolution at ResNet-56's shapes (16, 32, 64 channels at 32, 16, 8 pixels,
  batch 128), forward and backward, for K models: one grouped convolution, K separate ones, and
  ``torch.func.vmap`` over the K weights; fp32 and bf16, channels_last; images/s of the K;
* ``model``: whole-model training at each K: the array (harness trainers driven together, one
  fused step per iteration, each layout), packing (the same K trainers each stepping on its own
  stream, ``--runs-per-gpu K``) and one run (K = 1 packing, today's speed), images/s of all K;
* ``core`` (with ``model``, ``--core``): the array's bare iteration on one fixed batch per run
  (stacked forward, summed loss, backward, SGD update; no epoch loops, data or hooks), eager and,
  on CUDA, captured in one CUDA graph per layout: what the array's math reaches without Python's
  per-step overhead, to decide whether capturing the array step is worth it;
* ``equality``: four small runs alone against the same runs as one array on the device, within
  the noise floor of the runs alone with other rounding (benchmark.training.array.check).

Prints figures; exits 1 when the equality check fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmark.bench.pack import packed_harness
from benchmark.bench.throughput import (
    MODEL_DATA,
    SYNTHETIC,
    SyntheticSource,
    make_batches,
    mode_config,
    parse_device,
)
from benchmark.data.base import DATASETS
from benchmark.training.array.check import check_array
from benchmark.training.array.fit import array_epoch
from benchmark.training.array.stack import LAYOUTS
from benchmark.training.array.step import ArrayStep
from benchmark.training.device import configure_kernels, sync
from benchmark.training.fast_step import CudaGraphBackend
from benchmark.training.packing import RngState
from benchmark.training.trainer import Trainer

# ResNet-56's three stages: (channels, pixels per side).
STAGES = ((16, 32), (32, 16), (64, 8))
PARTS = ("layer", "model", "equality")


def timed(fn: Callable[[], None], device: torch.device, iters: int) -> float:
    """Seconds per call of ``fn`` after two warm-up calls."""
    for _ in range(2):
        fn()
    sync(device)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    sync(device)
    return (time.perf_counter() - start) / iters


def conv_variants(
    k: int, c: int, side: int, batch: int, dtype: torch.dtype, dev: torch.device
) -> dict[str, Callable[[], None]]:
    """Forward and backward of one 3x3 convolution of K models, three ways."""
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(k, c, c, 3, 3, generator=g) * 0.1).to(dev, dtype).requires_grad_()
    cl = torch.channels_last
    x_sep = [torch.randn(batch, c, side, side, generator=g).to(dev, dtype) for _ in range(k)]
    x_sep = [x.contiguous(memory_format=cl) for x in x_sep]
    x_grouped = torch.cat(x_sep, 1).contiguous(memory_format=cl)
    x_stacked = torch.stack(x_sep)

    def grouped() -> None:
        out = F.conv2d(x_grouped, w.view(k * c, c, 3, 3), padding=1, groups=k)
        out.sum().backward()

    def separate() -> None:
        outs = [F.conv2d(x, w[i], padding=1) for i, x in enumerate(x_sep)]
        torch.stack([o.sum() for o in outs]).sum().backward()

    def vmapped() -> None:
        out = torch.func.vmap(lambda wi, xi: F.conv2d(xi, wi, padding=1))(w, x_stacked)
        out.sum().backward()

    return {"grouped": grouped, "separate": separate, "vmap": vmapped}


def layer_part(args: argparse.Namespace) -> None:
    """Print images/s of one conv layer's forward+backward for K models, three ways."""
    print("\none 3x3 conv, forward + backward, images/s of all K models (K x batch per call)")
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if precision not in args.precisions:
            continue
        for c, side in args.stages:
            print(f"\n{precision} C={c} {side}x{side}{'K':>6s}{'grouped':>12s}{'separate':>12s}"
                  f"{'vmap':>12s}")  # fmt: skip
            for k in args.ks:
                cells = []
                for fn in conv_variants(k, c, side, args.batch, dtype, args.dev).values():
                    try:
                        cells.append(f"{k * args.batch / timed(fn, args.dev, args.iters):12,.0f}")
                    except Exception as err:  # noqa: BLE001 - a figure per cell, whatever fails
                        cells.append(f"{type(err).__name__:>12s}")
                print(f"{'':18s}{k:6d}{''.join(cells)}", flush=True)


def array_harness(
    args: argparse.Namespace, model: str, k: int, layout: str, compiled: str = "off"
) -> tuple[float, float]:
    """Images/s of K harness trainers trained as one array (epoch 1 timed, epoch 0 warm-up,
    capture and compile): over the whole epoch's wall-clock (its boundaries' host work
    included), and over the iterations the runs time themselves (what their records report)."""
    cfg = mode_config(args, args.mode, model, {"name": "dense"}, {"epochs": 2})
    cfg.runtime.compile = compiled  # type: ignore[assignment]
    trainers = [Trainer(cfg) for _ in range(k)]
    rngs = [RngState.capture(t.device) for t in trainers]
    ArrayStep(trainers, layout)
    array_epoch(trainers, 0, rngs)  # warm-up
    sync(args.dev)
    before = [(t.state.throughput.images, t.state.throughput.seconds) for t in trainers]
    start = time.perf_counter()
    array_epoch(trainers, 1, rngs)
    sync(args.dev)
    wall = sum(t.data.num_train for t in trainers) / (time.perf_counter() - start)
    images = sum(t.state.throughput.images - i for t, (i, _) in zip(trainers, before, strict=True))
    seconds = max(
        t.state.throughput.seconds - s for t, (_, s) in zip(trainers, before, strict=True)
    )
    return wall, images / seconds if seconds > 0 else 0.0


def model_part(args: argparse.Namespace) -> None:
    """Print images/s of whole-model training: arrays (each layout), packing, one run, and the
    array's bare iteration (``--core``: eager and captured, per layout)."""
    for model in args.models:
        shape, classes = MODEL_DATA.get(model, ((3, 32, 32), 10))
        batches = make_batches(args.iters, args.batch, shape, classes, args.dev)
        args.batches, args.classes = batches, classes
        DATASETS.replace(SYNTHETIC, lambda cfg, device, b=batches, c=classes: SyntheticSource(b, c))
        for mode in args.modes:
            args.mode = mode
            for compiled in args.compile:
                _model_rows(args, model, mode, compiled)


def _model_rows(args: argparse.Namespace, model: str, mode: str, compiled: str) -> None:
    """One table of the model part: a row per K, at one ``runtime.compile`` setting."""
    head = "".join(f"{'array ' + layout:>14s}{'timed':>10s}" for layout in args.layouts)
    head += "".join(f"{name:>14s}" for name, _, _ in _core_columns(args))
    packs = [] if args.no_baselines else [k for k in args.ks if k in args.pack_ks]
    title = f"{model} {mode} compile={compiled}"
    print(f"\n{title}{'K':>5s}{head}{'packing':>12s}{'one run':>12s}  (images/s)")
    one = "-" if args.no_baselines else _figure(_packed, args, model, 1)
    for k in args.ks:
        cells = [_figures(array_harness, args, model, k, lay, compiled) for lay in args.layouts]
        line = "".join(f"{wall:>14s}{timed:>10s}" for wall, timed in cells)
        line += "".join(f"{_figure(array_core, args, model, k, lay, graph, compiled):>14s}"
                        for _, lay, graph in _core_columns(args))  # fmt: skip
        packing = _figure(_packed, args, model, k) if k in packs else "-"
        print(f"{'':{len(title)}s}{k:5d}{line}{packing:>12s}{one:>12s}", flush=True)


def _core_columns(args: argparse.Namespace) -> list[tuple[str, str, bool]]:
    """The ``--core`` columns: (heading, layout, captured), captured ones on CUDA only."""
    graphs = (False, True) if args.dev.type == "cuda" else (False,)
    if args.no_baselines and args.dev.type == "cuda":
        graphs = (True,)
    return [
        (f"{'graph' if graph else 'core'} {layout}", layout, graph)
        for layout in args.core
        for graph in graphs
    ]


def array_core(
    args: argparse.Namespace, model: str, k: int, layout: str, graph: bool, compiled: str = "off"
) -> float:
    """Images/s of the array's bare iteration for K runs (each on the same fixed batch; the
    same losses as the harness's step, compiled when ``compiled`` is "on"), replayed from one
    CUDA graph when ``graph``."""
    cfg = mode_config(args, args.mode, model, {"name": "dense"}, {"epochs": 2})
    array = ArrayStep([Trainer(cfg) for _ in range(k)], layout)
    x, y = args.batches[0]
    xs, ys = x.expand(k, *x.shape).contiguous(), y.expand(k, *y.shape).contiguous()
    sgd, stacked = array.sgd, array.stacked
    tables = sgd.tables()
    losses = array._losses
    if compiled == "on":
        losses = torch.compile(losses, dynamic=False)

    def step() -> None:
        total = losses(xs, ys).sum()
        stacked.zero_grad()
        total.backward()
        sgd.update_from(tables)

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "grad and param do not obey")
        if graph:
            for _ in range(3):  # cuDNN's choices and the allocator's blocks, before capture
                step()
            sync(args.dev)
            step = CudaGraphBackend(args.dev).capture(step)
        seconds = timed(step, args.dev, args.iters)
    del step
    if args.dev.type == "cuda":
        torch.cuda.empty_cache()  # the graph's pool, before the next (larger) K
    return k * x.shape[0] / seconds


def _packed(args: argparse.Namespace, model: str, k: int) -> float:
    return packed_harness(args, model, k)[0]


def _figure(measure: Callable[..., float], *args: object) -> str:
    """``measure(*args)`` as a figure, or the name of the error that stopped it."""
    return _figures(lambda *a: (measure(*a),), *args)[0]


def _figures(measure: Callable[..., tuple[float, ...]], *args: object) -> tuple[str, ...]:
    """Each of ``measure(*args)`` as a figure, or the error's name (twice) that stopped it."""
    try:
        return tuple(f"{value:,.0f}" for value in measure(*args))
    except Exception as err:  # noqa: BLE001 - a figure per cell, whatever fails
        print(f"  failed: {type(err).__name__}: {err}"[:300], file=sys.stderr)
        return (type(err).__name__[:9],) * 2


def equality_part(args: argparse.Namespace) -> bool:
    """Run the equality check on the device; print it; whether it holds."""
    cuda = args.dev.type == "cuda"
    # The noise floor: on a GPU, the runs alone with non-deterministic (autotuned) kernels; on
    # the CPU, at 2 threads.
    rounding = "runtime.deterministic=false" if cuda else "runtime.threads=2"
    extra = [f"runtime.device={args.dev}", f"runtime.compile={args.compile[0]}"]
    with tempfile.TemporaryDirectory() as root:
        comparison, array = check_array(Path(root), rounding, args.layouts[0], extra)
    compiled = any(isinstance(r, dict) and r["metrics"]["array"].get("compiled") for r in array)
    where = f"{args.layouts[0]}, {args.dev}, compile={args.compile[0]}, compiled={compiled}"
    print(f"\nequality ({where}): {comparison.text()}")
    print("equality holds" if comparison.holds() else "EQUALITY FAILS", flush=True)
    return comparison.holds()


def main(argv: Sequence[str] | None = None) -> None:
    """Print the array benchmark's figures (layer, model, equality)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="auto", help="cpu, cuda, or auto (CUDA if present)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated of {PARTS}")
    p.add_argument("--k", default="1,2,4,8,16,32", help="comma-separated runs per array")
    p.add_argument("--pack-k", default="", help="the K of the packing column (default: --k)")
    p.add_argument("--models", default="resnet56", help="comma-separated models")
    p.add_argument("--modes", default="fast-bf16,fast", help="modes of benchmark.bench")
    p.add_argument("--layouts", default=",".join(LAYOUTS), help=f"of {LAYOUTS}")
    p.add_argument("--core", default="", help=f"bare-iteration columns' layouts, of {LAYOUTS}")
    p.add_argument("--compile", default="off", help="runtime.compile settings, of off, on")
    p.add_argument(
        "--no-baselines",
        action="store_true",
        help="no packing, one-run or eager bare-step columns (what compiling is compared by)",
    )
    p.add_argument("--precisions", default="fp32,bf16", help="of the layer part")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--iters", type=int, default=20, help="timed iterations (per epoch)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke test on the CPU")
    args = p.parse_args(argv)
    args.dev = parse_device(p, args.device)
    args.parts = args.parts.split(",")
    args.layouts = args.layouts.split(",")
    args.core = args.core.split(",") if args.core else []
    args.compile = args.compile.split(",")
    args.precisions = args.precisions.split(",")
    for name, values, allowed in (("--parts", args.parts, PARTS),
                                  ("--layouts", args.layouts, LAYOUTS),
                                  ("--core", args.core, LAYOUTS),
                                  ("--compile", args.compile, ("off", "on"))):  # fmt: skip
        if not set(values) <= set(allowed):
            p.error(f"{name} = {','.join(values)!r} is invalid; allowed: {', '.join(allowed)}")
    args.ks = _counts(p, "--k", args.k)
    args.pack_ks = _counts(p, "--pack-k", args.pack_k) if args.pack_k else args.ks
    args.models, args.modes = args.models.split(","), args.modes.split(",")
    args.stages = STAGES
    if args.tiny:
        args.stages, args.batch, args.iters = ((8, 8),), 8, 2
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    args.runtime = {"device": str(args.dev), "deterministic": False, "threads": args.threads}
    configure_kernels(args.dev, False)
    where = torch.cuda.get_device_name(args.dev) if args.dev.type == "cuda" else "CPU"
    threads = torch.get_num_threads()
    print(f"batch {args.batch}, {args.iters} iterations, {where}, {threads} threads", flush=True)
    ok = True
    try:
        if "layer" in args.parts:
            layer_part(args)
        if "model" in args.parts:
            model_part(args)
        if "equality" in args.parts:
            ok = equality_part(args)
    finally:
        DATASETS.discard(SYNTHETIC)
    sys.exit(0 if ok else 1)


def _counts(p: argparse.ArgumentParser, flag: str, text: str) -> list[int]:
    """The comma-separated integers >= 1 of ``flag`` (else a usage error)."""
    try:
        ks = [int(k) for k in text.split(",")]
    except ValueError:
        ks = [0]
    if min(ks) < 1:
        p.error(f"{flag} = {text!r} is invalid; allowed: comma-separated integers >= 1")
    return ks


if __name__ == "__main__":
    main()
