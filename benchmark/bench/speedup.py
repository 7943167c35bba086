"""Measured vs theoretical inference speedup of pruned models (a benchmark script, not a test).

    python -m benchmark.bench.speedup                       # CPU, or the GPU when there is one
    python -m benchmark.bench.speedup --device cpu --repeats 5 --large-batch 8

Filter pruning (Li et al.; the paper's structured setting) of ResNet-56 (CIFAR-10, 32x32) and
ResNet-50 (ImageNet, 224x224) at 30% and 50% of the filters of every conv: the masked model is
compacted (:mod:`benchmark.measure.compaction`) and timed against the dense model
(:mod:`benchmark.measure.latency`) at batch 1 and a large batch. Columns:

* ``theoretical``: the paper's ShrinkBench speedup of the masked model (FLOPs of zero weights
  removed; the next layer's input channels still count as dense);
* ``compacted``: dense MACs / MACs of the compacted model (corrected count), what the smaller
  model really computes (next-layer input channels removed too, residual widths kept);
* ``measured b=1`` / ``measured b=N``: median dense latency / median compacted latency.

On a GPU with sparse tensor cores (compute capability >= 8.0) it also times MaxViT-T with 2:4
masks on every linear layer, the linears on semi-structured sparse kernels, in float16; elsewhere
it prints why that is not measurable. Weights are random: speed does not depend on their values.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch
from torch import nn

from benchmark.measure.compaction import compact
from benchmark.measure.latency import compare, device_info, versions
from benchmark.measure.metrics import layer_macs, theoretical_speedup
from benchmark.measure.semistructured import measure_nm, unsupported_reason
from benchmark.models.registry import build_model
from benchmark.pruning import MaskStore, filter_masks
from benchmark.pruning.nm import nm_mask

FILTER_MODELS = (("resnet56", 10, (3, 32, 32)), ("resnet50", 1000, (3, 224, 224)))
FRACTIONS = (0.3, 0.5)


def filter_pruned(name: str, classes: int, shape: tuple[int, int, int], fraction: float):
    """(dense model, filter-masked copy) with random weights, seeded."""
    torch.manual_seed(0)
    dense = build_model(name, classes, shape).eval()
    masked = build_model(name, classes, shape).eval()
    masked.load_state_dict(dense.state_dict())
    MaskStore.from_named_masks(masked, filter_masks(masked, fraction)).apply()
    return dense, masked


def total_macs(model: nn.Module, example: torch.Tensor) -> float:
    """Per-example MACs (corrected count) of every conv and linear layer."""
    return float(sum(layer.dense_macs_corrected for layer in layer_macs(model, example)))


def filter_rows(
    device: torch.device, batches: Sequence[int], warmup: int, repeats: int
) -> list[tuple]:
    """One row per model and fraction: theoretical, compacted and measured speedups."""
    rows = []
    for name, classes, shape in FILTER_MODELS:
        example = torch.zeros(1, *shape)
        for fraction in FRACTIONS:
            dense, masked = filter_pruned(name, classes, shape, fraction)
            small = compact(masked, example)
            theory = theoretical_speedup(masked, example)["speedup"]
            macs = total_macs(dense, example) / total_macs(small, example)
            result = compare(
                dense, small, shape, batches=batches, device=device, warmup=warmup, repeats=repeats
            )
            measured = [result["per_batch"][str(b)]["measured_speedup"] for b in batches]
            dense_ms = result["per_batch"][str(batches[-1])]["dense"]["median_ms"]
            rows.append((name, fraction, theory, macs, *measured, dense_ms))
    return rows


def maxvit_nm(device: torch.device, batch: int, warmup: int, repeats: int) -> dict:
    """MaxViT-T with 2:4 masks on every linear layer, timed dense vs semi-structured sparse."""
    reason = unsupported_reason(device)
    if reason is not None:
        return {"measured_speedup": None, "note": reason}
    torch.manual_seed(0)
    model = build_model("maxvit_t", 1000, (3, 224, 224)).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear):
                weight = module.weight
                weight.mul_(nm_mask(weight.abs(), torch.ones_like(weight, dtype=torch.bool)))
    return measure_nm(model, (3, 224, 224), device, batches=(1, batch), warmup=warmup,
                      repeats=repeats)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    """Print the speedup table (and the MaxViT-T 2:4 line) for the chosen device."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--large-batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    info = device_info(device)
    print(
        f"device {info['device']} ({info['device_name']}), threads {info['threads']}, "
        f"warmup {args.warmup}, repeats {args.repeats} (median), versions {versions()}"
    )
    batches = (1, args.large_batch)
    header = (
        f"{'model':<10} {'filters':>7} {'theoretical':>11} {'compacted':>9} "
        f"{'measured b=1':>12} {f'measured b={args.large_batch}':>13} {'dense ms':>9}"
    )
    print(header)
    for name, fraction, theory, macs, m1, mn, dense_ms in filter_rows(
        device, batches, args.warmup, args.repeats
    ):
        print(
            f"{name:<10} {fraction:>7.0%} {theory:>10.2f}x {macs:>8.2f}x {m1:>11.2f}x "
            f"{mn:>12.2f}x {dense_ms:>9.1f}"
        )
    nm = maxvit_nm(device, args.large_batch, args.warmup, args.repeats)
    if nm["measured_speedup"] is None:
        print(f"maxvit_t 2:4 linears: {nm['note']}")
    else:
        per = {b: f"{v['measured_speedup']:.2f}x" for b, v in nm["per_batch"].items()}
        print(
            f"maxvit_t 2:4 linears ({nm['converted_linears']} converted, "
            f"{nm['skipped_linears']} dense, {nm['dtype']}): measured {per} on {nm['device_name']}"
        )


if __name__ == "__main__":
    main()
