"""The equality check of an array against its runs alone, on any device (tests, GPU bench).

Four small runs that differ in seed, learning rate, goal sparsity, retraining schedule,
criterion, weight decay, momentum and method train alone, as one array, and (two of them)
alone again with one setting that only changes float rounding: the noise floor. The array must
stay within a small multiple of that floor in every epoch's training loss, within one test
image in accuracy (or twice what the floor's own runs moved, where rounding alone moves more:
non-deterministic GPU kernels over several epochs), and flip no more mask entries than the floor
does (ties that float noise breaks either way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmark.config.run import RunConfig
from benchmark.core.files import load_checkpoint
from benchmark.store.results import Store
from benchmark.training.contract import tiny_config

BIMP = ["method.name=bimp", "budget.epochs=3", "budget.initial_epochs=1", "budget.cycles=2"]
# How far beyond the noise floor an epoch's loss may be, and the mask flips allowed anyway.
FLOOR_FACTOR = 20
MIN_FLIPS = 10


def four_runs(store: Path, *extra: str) -> list[RunConfig]:
    """Four digits runs that differ in all that runs of one array may differ in (the second
    trains 2 epochs, the others 3)."""
    return [
        tiny_config(store, *BIMP, "method.criterion=global", *extra),
        tiny_config(
            store,
            *BIMP,
            "budget.epochs=2",
            "budget.cycles=1",
            "seed=1",
            "method.sparsity=0.7",
            "schedule.lr=0.05",
            "method.schedule=FT",
            "method.criterion=uniform",
            *extra,
        ),  # fmt: skip
        tiny_config(
            store,
            *BIMP,
            "seed=2",
            "method.schedule=CLR",
            "method.criterion=erk",
            "optim.weight_decay=1e-4",
            *extra,
        ),  # fmt: skip
        tiny_config(
            store,
            "method.name=gmp",
            "budget.epochs=3",
            "method.interval=1",
            "seed=3",
            "method.criterion=lamp",
            "optim.momentum=0.8",
            "schedule.lr=0.05",
            *extra,
        ),  # fmt: skip
    ]


def losses(record: dict[str, Any]) -> list[float]:
    """The run's training loss of every epoch."""
    return [entry["train_loss"] for entry in record["history"]]


def zeros(store: Path, run_id: str) -> torch.Tensor:
    """The zero pattern of a run's final weights (its masks, plus exact zeros)."""
    weights = load_checkpoint(Store(store).weights_path(run_id))
    return torch.cat([(w == 0).flatten() for k, w in weights.items() if k.endswith("weight")])


@dataclass
class Comparison:
    """How an array's runs compare with the same runs alone."""

    floor: float  # largest loss gap between a run alone and itself with other rounding
    loss_gap: float  # largest loss gap between a run alone and in the array
    images: float  # largest test-accuracy gap, in test images
    flips: int  # mask entries (final zero pattern) that differ, array against alone
    floor_flips: int  # the same, run alone against itself with other rounding
    floor_images: float = 0.0  # largest test-accuracy gap, alone against itself rounded

    def image_bound(self) -> float:
        """Test images the array's runs may be apart from alone: one, or twice what other
        rounding moved the floor's runs when that is more (the array's gap is the largest of
        four runs, the floor's of two: the factor, as the loss bound's, leaves room for that)."""
        return max(1.0, 2 * self.floor_images)

    def holds(self) -> bool:
        """Whether the array is equal to the runs alone within the noise floor."""
        return (
            self.floor > 0
            and self.loss_gap <= FLOOR_FACTOR * self.floor
            and self.images <= self.image_bound() + 1e-9
            and self.flips <= max(3 * self.floor_flips, MIN_FLIPS)
        )

    def text(self) -> str:
        """One line of figures."""
        return (
            f"noise floor {self.floor:.3g}, array's largest loss gap {self.loss_gap:.3g} "
            f"(bound {FLOOR_FACTOR} x floor), test images apart {self.images:.0f} "
            f"(floor's {self.floor_images:.0f}, bound {self.image_bound():.0f}), "
            f"mask flips {self.flips} (floor's {self.floor_flips})"
        )


def compare(
    stores: tuple[Path, Path, Path],
    alone: list[dict[str, Any]],
    rounded: list[dict[str, Any]],
    array: list[Any],
) -> Comparison:
    """Compare ``array`` (records, or errors) with ``alone`` and ``alone`` with ``rounded``
    (records of some of the same runs with other float rounding); ``stores`` hold their
    weights (alone, rounded, array)."""
    by_id = {r["run_id"]: r for r in rounded}
    floor = max(
        abs(a - b)
        for one in alone
        if one["run_id"] in by_id
        for a, b in zip(losses(one), losses(by_id[one["run_id"]]), strict=True)
    )
    gap = images = floor_images = 0.0
    flips = floor_flips = 0
    for one, many in zip(alone, array, strict=True):
        if not isinstance(many, dict) or many["run_id"] != one["run_id"]:
            raise AssertionError(f"run {one['run_id']} in the array: {many!r}"[:300])
        gap = max(gap, *(abs(a - b) for a, b in zip(losses(one), losses(many), strict=True)))
        test, other = one["metrics"]["test"], many["metrics"]["test"]
        images = max(images, abs(test["top1"] - other["top1"]) * test["n"])
        mask = zeros(stores[0], one["run_id"])
        flips += int((mask != zeros(stores[2], one["run_id"])).sum())
        if one["run_id"] in by_id:
            floor_flips += int((mask != zeros(stores[1], one["run_id"])).sum())
            rounded_test = by_id[one["run_id"]]["metrics"]["test"]
            floor_images = max(floor_images, abs(test["top1"] - rounded_test["top1"]) * test["n"])
    return Comparison(floor, gap, images, flips, floor_flips, floor_images)


def check_array(
    root: Path,
    rounding: str,
    layout: str = "vmap",
    extra: Sequence[str] = (),
    slots: int | None = None,
) -> tuple[Comparison, list[Any]]:
    """Train :func:`four_runs` (with overrides ``extra``) alone, as one array (of ``slots``
    slots: 3 has the 2-epoch run's slot taken by the fourth run while the others train on;
    None: one per run) and (the two most sensitive) with the override ``rounding`` (another
    thread count, non-deterministic kernels) under ``root``; the comparison and the array's
    outcomes."""
    from benchmark.training.array.fit import execute_array
    from benchmark.training.runner import execute

    stores = (root / "alone", root / "rounded", root / "array")
    alone = [execute(cfg) for cfg in four_runs(stores[0], *extra)]
    # The last two: CLR with ERK and GMP with LAMP, the most sensitive to rounding.
    rounded = [execute(cfg) for cfg in four_runs(stores[1], *extra, rounding)[2:]]
    array = execute_array(four_runs(stores[2], *extra), layout=layout, size=slots)
    return compare(stores, alone, rounded, array), array
