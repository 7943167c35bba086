"""Seeded randomness of the data pipeline: per-epoch generators, shards, the validation split.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

from benchmark.core.errors import DatasetError


def _seed_value(seed: int, epoch: int) -> int:
    # A fixed affine mix keeps (seed, epoch) pairs apart for any realistic epoch count;
    # the modulus keeps the value inside manual_seed's accepted range for any int seed.
    return (seed * 100_003 + epoch) % (2**63)


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """Return a CPU generator seeded from ``(seed, epoch)`` only."""
    return torch.Generator(device="cpu").manual_seed(_seed_value(seed, epoch))


def shard_range(start: int, stop: int, rank: int, world: int) -> tuple[int, int]:
    """Rank ``rank``'s contiguous slice of positions ``[start, stop)`` split over ``world`` ranks.

    Sizes differ by at most one (the first ``(stop - start) % world`` ranks take one more), so
    the concatenation over ranks is the whole batch, in order.
    """
    base, extra = divmod(stop - start, world)
    lo = start + rank * base + min(rank, extra)
    return lo, lo + base + (rank < extra)


def stratified_split(labels: Tensor, val_fraction: float, split_seed: int) -> tuple[Tensor, Tensor]:
    """Split sample positions into sorted (train, val) index tensors, stratified by label.

    The validation set has ``round(val_fraction * n)`` samples (at least one, and at least one
    sample stays for training); each class contributes ``floor(val_fraction * n_c)`` and the
    remaining slots go to the classes with the largest remainders, so tiny sets work too.
    """
    labels = labels.to("cpu", torch.int64)
    n = labels.numel()
    if n < 2:
        raise DatasetError(f"cannot split {n} training sample(s) into train and validation")
    n_val = min(max(round(val_fraction * n), 1), n - 1)
    counts = torch.bincount(labels).to(torch.float64)
    exact = counts * (n_val / n)
    quota = exact.floor().to(torch.int64)
    # Largest remainders first; the stable sort breaks ties by class index.
    order = torch.argsort(-(exact - quota), stable=True)
    quota[order[: n_val - int(quota.sum())]] += 1
    # A random permutation followed by a stable sort by label gives every class a random
    # internal order; the first `quota[c]` of class c become validation samples.
    g = torch.Generator(device="cpu").manual_seed(_seed_value(split_seed, 0))
    perm = torch.randperm(n, generator=g)
    by_class = perm[torch.argsort(labels[perm], stable=True)]
    sorted_labels = labels[by_class]
    starts = torch.cumsum(torch.bincount(labels), 0) - torch.bincount(labels)
    rank = torch.arange(n) - starts[sorted_labels]
    is_val = rank < quota[sorted_labels]
    return by_class[~is_val].sort().values, by_class[is_val].sort().values


@contextmanager
def torch_seeded(seed: int) -> Iterator[None]:
    """Seed the global torch RNG for one item's random transforms, then restore it.

    torchvision's random transforms use the global torch RNG; seeding it per item makes every
    crop independent of the worker count and leaves the caller's RNG untouched (workers == 0).
    """
    state = torch.get_rng_state()
    try:
        torch.manual_seed(seed)
        yield
    finally:
        torch.set_rng_state(state)
