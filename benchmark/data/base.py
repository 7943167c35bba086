"""The data interface: a :class:`DataSource` per run, the dataset registry and the checks of a
``[data]`` section.

Every source exposes the same small interface. Training batches are shuffled and augmented with
randomness drawn only from a generator seeded by ``(seed, epoch)``, so an epoch yields the same
batches whether or not earlier epochs ran in this process (runs resume from epoch checkpoints and
must end bit-identical). The validation split is a fixed, stratified part of the official training
set, chosen by ``data.split_seed`` alone.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import Tensor

from benchmark.config.run import DataConfig
from benchmark.core.errors import ConfigError
from benchmark.core.registry import Registry
from benchmark.data.seeding import shard_range

SPLITS = ("train", "val", "test")


# How ImageNet files become batches: PIL in loader workers, or decoding on the run's device.
LOADERS = ("pil", "gpu")


Batch = tuple[Tensor, Tensor]


class DataSource(ABC):
    """A dataset ready for training: fixed train/val/test splits and deterministic batches."""

    name: str
    # The registered task (benchmark.tasks) that says how batches are trained and scored.
    task: str = "classification"
    num_classes: int
    input_shape: tuple[int, int, int]
    num_train: int  # training samples after removing the validation split
    num_val: int
    num_test: int
    batch_size: int
    eval_batch_size: int
    device: torch.device
    # Positions in the official training set; disjoint, fixed by data.split_seed.
    train_indices: Tensor
    val_indices: Tensor

    # (rank, processes) of a data-parallel run: this process trains on its slice of every batch.
    shard: tuple[int, int] = (0, 1)

    def shard_range(self, start: int, stop: int) -> tuple[int, int]:
        """This process's part ``[lo, hi)`` of the global batch ``[start, stop)``."""
        return shard_range(start, stop, *self.shard)

    def eval_range(self, split: str) -> tuple[int, int]:
        """This process's part ``[lo, hi)`` of ``split`` in evaluation (all of it alone)."""
        size = {"train": self.num_train, "val": self.num_val, "test": self.num_test}
        return shard_range(0, size[check_split(split)], *self.shard)

    def iters_per_epoch(self) -> int:
        """Return the number of training batches per epoch (the last one may be smaller)."""
        return math.ceil(self.num_train / self.batch_size)

    @abstractmethod
    def train_batches(self, epoch: int, seed: int) -> Iterator[Batch]:
        """Yield one epoch of shuffled, augmented training batches on the device."""

    @abstractmethod
    def eval_batches(self, split: str) -> Iterator[Batch]:
        """Yield ``split`` ("train", "val" or "test") in a fixed order with the eval transform."""

    def example_batch(self) -> Tensor:
        """Return the first ``batch_size`` test inputs (eval transform, on the device)."""
        return self._example_inputs(self.batch_size)

    @abstractmethod
    def _example_inputs(self, n: int) -> Tensor:
        """Return the first ``n`` test inputs."""


# Datasets that torchvision cannot download: their files must already be under data.root.
NO_DOWNLOAD = {"imagenet", "coco", "cityscapes", "wmt16", "wikitext2", "pydoc"}


DatasetBuilder = Callable[[DataConfig, torch.device], DataSource]


DATASETS: Registry[DatasetBuilder] = Registry("dataset")


def _is_int(value: object) -> bool:
    # bool is a subclass of int, but `batch_size = true` is certainly a mistake.
    return isinstance(value, int) and not isinstance(value, bool)


def validate_data_config(cfg: DataConfig) -> None:
    """Check the data section cheaply (no files read); raise ConfigError on the first bad field."""
    if cfg.name not in DATASETS:
        raise ConfigError("data.name", cfg.name, DATASETS.names())
    for field in ("batch_size", "eval_batch_size"):
        value = getattr(cfg, field)
        if not _is_int(value) or value <= 0:
            raise ConfigError(f"data.{field}", value, "an integer > 0")
    frac = cfg.val_fraction
    if isinstance(frac, bool) or not isinstance(frac, int | float) or not 0.0 < frac < 1.0:
        raise ConfigError("data.val_fraction", frac, "a number with 0 < val_fraction < 1")
    if not _is_int(cfg.workers) or cfg.workers < 0:
        raise ConfigError("data.workers", cfg.workers, "an integer >= 0")
    if not _is_int(cfg.split_seed):
        raise ConfigError("data.split_seed", cfg.split_seed, "an integer")
    if not isinstance(cfg.root, str | Path):
        raise ConfigError("data.root", cfg.root, "a directory path")
    for field in ("download", "check_integrity"):
        if not isinstance(getattr(cfg, field), bool):
            raise ConfigError(f"data.{field}", getattr(cfg, field), "true or false")
    check_loader = cfg.loader in LOADERS and (cfg.loader == "pil" or cfg.name == "imagenet")
    if not check_loader:
        raise ConfigError("data.loader", cfg.loader, "'pil', or 'gpu' for data.name = 'imagenet'")
    if cfg.name in NO_DOWNLOAD and cfg.download:
        raise ConfigError("data.download", cfg.download, f"false for {cfg.name} (no download here)")
    if not _is_int(cfg.crop_size) or cfg.crop_size < 0:
        raise ConfigError("data.crop_size", cfg.crop_size, "an integer >= 0 (0: the default)")
    validate_epoch_fraction(cfg)
    if not _is_int(cfg.max_length) or cfg.max_length < 2:
        raise ConfigError("data.max_length", cfg.max_length, "an integer >= 2 (tokens)")
    if not isinstance(cfg.tokenizer, str):
        raise ConfigError("data.tokenizer", cfg.tokenizer, "a tokenizer folder, or '' for bytes")
    if not _is_int(cfg.epoch_iters) or cfg.epoch_iters < 0:
        raise ConfigError("data.epoch_iters", cfg.epoch_iters, "an integer >= 0 (0: one pass)")
    validate_text_options(cfg)


# Datasets of language-model text (their tokenizer options apply).
TEXT_DATASETS = {"wikitext2", "pydoc"}
TRAIN_WINDOWS = ("random", "documents")


def validate_text_options(cfg: DataConfig) -> None:
    """``data.train_windows`` and ``data.slow_tokenizer``: known values, and left unset where
    they change nothing (another dataset; the slow tokenizer without a tokenizer folder)."""
    if cfg.train_windows not in TRAIN_WINDOWS:
        allowed = ", ".join(repr(w) for w in TRAIN_WINDOWS)
        raise ConfigError("data.train_windows", cfg.train_windows, f"one of {allowed}")
    if not isinstance(cfg.slow_tokenizer, bool):
        raise ConfigError("data.slow_tokenizer", cfg.slow_tokenizer, "true or false")
    if cfg.name not in TEXT_DATASETS and cfg.train_windows != "random":
        raise ConfigError(
            "data.train_windows", cfg.train_windows, f"unset for data.name = {cfg.name!r}"
        )
    if cfg.slow_tokenizer and (cfg.name not in TEXT_DATASETS or cfg.tokenizer in ("", "bytes")):
        raise ConfigError(
            "data.slow_tokenizer",
            True,
            "false unless data.tokenizer names a tokenizer folder of a language-model dataset "
            f"(data.name = {cfg.name!r}, data.tokenizer = {cfg.tokenizer!r})",
        )


# Datasets whose epochs may be a part of a pass over the data.
PARTIAL_EPOCHS = {"wmt16"}


def validate_epoch_fraction(cfg: DataConfig) -> None:
    """``data.epoch_fraction`` must be 1/k for an integer k >= 1, and 1 where unsupported."""
    f = cfg.epoch_fraction
    if cfg.name not in PARTIAL_EPOCHS:
        if f != 1.0:
            raise ConfigError("data.epoch_fraction", f, f"1.0 for data.name = {cfg.name!r}")
        return
    if isinstance(f, bool) or not isinstance(f, int | float) or not 0 < f <= 1:
        raise ConfigError("data.epoch_fraction", f, "1/k for an integer k >= 1, e.g. 0.05")
    if abs(1 / f - round(1 / f)) > 1e-6:
        raise ConfigError("data.epoch_fraction", f, "1/k for an integer k >= 1, e.g. 0.05")


def build_dataset(cfg: DataConfig, device: torch.device) -> DataSource:
    """Validate ``cfg`` and build the registered dataset on ``device``."""
    builder = DATASETS.get(cfg.name, "data.name")
    validate_data_config(cfg)
    return builder(cfg, torch.device(device))


def check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return split
