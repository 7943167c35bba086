"""Datasets as deterministic batch sources: digits, CIFAR-10/100 and ImageNet.

Every source exposes the same small interface (:class:`DataSource`). Training batches are
shuffled and augmented with randomness drawn only from a generator seeded by ``(seed, epoch)``,
so an epoch yields the same batches whether or not earlier epochs ran in this process (runs
resume from epoch checkpoints and must end bit-identical). The validation split is a fixed,
stratified part of the official training set, chosen by ``data.split_seed`` alone.
"""

from __future__ import annotations

import math
import os
import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms
from torchvision.datasets import CIFAR10, CIFAR100, ImageFolder
from torchvision.datasets.folder import default_loader

from benchmark.config import DataConfig
from benchmark.errors import ConfigError, DatasetError
from benchmark.registry import Registry

SPLITS = ("train", "val", "test")
# How ImageNet files become batches: PIL in loader workers, or decoding on the run's device.
LOADERS = ("pil", "gpu")

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)
CIFAR100_STD = (0.2673, 0.2564, 0.2762)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Batch = tuple[Tensor, Tensor]


# --------------------------------------------------------------------------- interface


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
        return shard_range(0, size[_check_split(split)], *self.shard)

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
NO_DOWNLOAD = {"imagenet", "coco", "cityscapes", "wmt16"}

DatasetBuilder = Callable[[DataConfig, torch.device], DataSource]
DATASETS: Registry[DatasetBuilder] = Registry("dataset")


# --------------------------------------------------------------------------- config


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


# --------------------------------------------------------------------------- randomness


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


# --------------------------------------------------------------------------- augmentation


@dataclass
class AugmentParams:
    """Per-sample augmentation draws: crop offsets (n, 2), flips (n,), angles in degrees (n,)."""

    offsets: Tensor
    flips: Tensor
    angles: Tensor

    def take(self, start: int, stop: int, device: torch.device) -> AugmentParams:
        """Return the draws for positions ``start:stop`` on ``device``."""
        return AugmentParams(
            self.offsets[start:stop].to(device),
            self.flips[start:stop].to(device),
            self.angles[start:stop].to(device),
        )


def random_crop(x: Tensor, offsets: Tensor, pad: int) -> Tensor:
    """Crop each image of ``x`` (B, C, H, W) at its own (row, col) offset in a zero-padded copy."""
    b, _, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))
    rows = offsets[:, :1] + torch.arange(h, device=x.device)  # (B, H)
    cols = offsets[:, 1:] + torch.arange(w, device=x.device)  # (B, W)
    batch = torch.arange(b, device=x.device)[:, None, None]
    # Advanced indices split by the channel slice put the broadcast (B, H, W) dims first.
    out = padded[batch, :, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


def horizontal_flip(x: Tensor, flips: Tensor) -> Tensor:
    """Mirror the images of ``x`` whose entry in the boolean ``flips`` is set."""
    return torch.where(flips[:, None, None, None], x.flip(-1), x)


def rotate(x: Tensor, degrees: Tensor) -> Tensor:
    """Rotate each image of ``x`` about its centre by its angle, nearest sampling, zero fill."""
    rad = torch.deg2rad(degrees.to(x.dtype))
    cos, sin, zero = rad.cos(), rad.sin(), torch.zeros_like(rad)
    theta = torch.stack(
        [torch.stack([cos, -sin, zero], dim=1), torch.stack([sin, cos, zero], dim=1)], dim=1
    )
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    # Nearest sampling matches torchvision's RandomRotation default and keeps values exact.
    return F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)


@dataclass(frozen=True)
class CropFlipAugment:
    """Random crop with zero padding, horizontal flip and optional random rotation, batched."""

    pad: int = 4
    max_degrees: float = 0.0

    def sample(self, n: int, g: torch.Generator) -> AugmentParams:
        """Draw the parameters for ``n`` samples from ``g`` (always the same number of draws)."""
        offsets = torch.randint(0, 2 * self.pad + 1, (n, 2), generator=g)
        flips = torch.rand(n, generator=g) < 0.5
        angles = (torch.rand(n, generator=g) * 2 - 1) * self.max_degrees
        return AugmentParams(offsets, flips, angles)

    def apply(self, x: Tensor, params: AugmentParams) -> Tensor:
        """Augment a float batch in [0, 1] (before normalisation, so padding is black)."""
        x = horizontal_flip(random_crop(x, params.offsets, self.pad), params.flips)
        if self.max_degrees > 0:
            x = rotate(x, params.angles)
        return x


# --------------------------------------------------------------------------- in-memory sources


@dataclass
class Normalizer:
    """Maps stored values to normalised float inputs: ``(x * scale - mean) / std`` per channel."""

    scale: float
    mean: Tensor  # (C,)
    std: Tensor  # (C,)

    def to_unit(self, x: Tensor) -> Tensor:
        """Convert stored values to floats (torch's default dtype) in the [0, 1] image range."""
        # The default dtype, not float32: tests of data-parallel equality run in float64.
        return x.to(torch.get_default_dtype()) * self.scale

    def normalize(self, x: Tensor) -> Tensor:
        """Standardise a [0, 1] batch per channel."""
        return (x - self.mean[:, None, None]) / self.std[:, None, None]


class TensorSource(DataSource):
    """A dataset held entirely as tensors on the training device, augmented there in batches."""

    def __init__(
        self,
        name: str,
        num_classes: int,
        train: Batch,
        test: Batch,
        cfg: DataConfig,
        device: torch.device,
        normalizer: Normalizer,
        augment: CropFlipAugment | None,
    ) -> None:
        x, y = train
        self.name = name
        self.num_classes = num_classes
        self.input_shape = tuple(x.shape[1:])  # type: ignore[assignment]
        self.batch_size = cfg.batch_size
        self.eval_batch_size = cfg.eval_batch_size
        self.device = device
        self.train_indices, self.val_indices = stratified_split(y, cfg.val_fraction, cfg.split_seed)
        self.normalizer = Normalizer(
            normalizer.scale, normalizer.mean.to(device), normalizer.std.to(device)
        )
        self.augment = augment
        self._splits: dict[str, Batch] = {
            "train": (x[self.train_indices].to(device), y[self.train_indices].to(device)),
            "val": (x[self.val_indices].to(device), y[self.val_indices].to(device)),
            "test": (test[0].to(device), test[1].to(device)),
        }
        self.num_train = len(self.train_indices)
        self.num_val = len(self.val_indices)
        self.num_test = len(test[1])

    def train_batches(self, epoch: int, seed: int) -> Iterator[Batch]:
        """Yield one epoch of shuffled (and, if configured, augmented) training batches."""
        x, y = self._splits["train"]
        g = epoch_generator(seed, epoch)
        # Draw everything up front, in a fixed order, so the stream does not depend on how
        # far the caller iterates or on the device.
        order = torch.randperm(self.num_train, generator=g).to(self.device)
        params = self.augment.sample(self.num_train, g) if self.augment is not None else None
        if params is not None:
            # One copy to the device per epoch: a copy per batch from pageable memory would make
            # the host wait for the GPU every iteration, so it could never queue work ahead.
            params = params.take(0, self.num_train, self.device)
        for start in range(0, self.num_train, self.batch_size):
            stop = min(start + self.batch_size, self.num_train)
            lo, hi = self.shard_range(start, stop)
            idx = order[lo:hi]
            inputs = self.normalizer.to_unit(x[idx])
            if self.augment is not None and params is not None:
                inputs = self.augment.apply(inputs, params.take(lo, hi, self.device))
            yield self.normalizer.normalize(inputs), y[idx]

    def eval_batches(self, split: str) -> Iterator[Batch]:
        """Yield ``split`` in stored order, unaugmented, in batches of ``eval_batch_size``."""
        lo, hi = self.eval_range(split)
        x, y = self._splits[split]
        x, y = x[lo:hi], y[lo:hi]
        for start in range(0, len(y), self.eval_batch_size):
            stop = start + self.eval_batch_size
            yield self._prepare(x[start:stop]), y[start:stop]

    def _example_inputs(self, n: int) -> Tensor:
        return self._prepare(self._splits["test"][0][:n])

    def _prepare(self, x: Tensor) -> Tensor:
        return self.normalizer.normalize(self.normalizer.to_unit(x))


def _check_split(split: str) -> str:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return split


# --------------------------------------------------------------------------- digits


@DATASETS.register("digits")
def build_digits(cfg: DataConfig, device: torch.device) -> DataSource:
    """scikit-learn's bundled 8x8 digits (no download): fixed stratified 80/20 train/test split.

    Pixels are scaled to [0, 1] and standardised with the mean/std of the training samples
    (after the validation split is removed). There is no augmentation.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    x_tr, x_te, y_tr, y_te = train_test_split(
        images, bunch.target, test_size=0.2, random_state=0, stratify=bunch.target
    )
    train = (torch.from_numpy(x_tr), torch.from_numpy(y_tr).long())
    test = (torch.from_numpy(x_te), torch.from_numpy(y_te).long())
    train_idx, _ = stratified_split(train[1], cfg.val_fraction, cfg.split_seed)
    fit = train[0][train_idx]
    norm = Normalizer(1.0, fit.mean().reshape(1), fit.std().reshape(1))
    return TensorSource("digits", 10, train, test, cfg, device, norm, augment=None)


# --------------------------------------------------------------------------- CIFAR


class _ExistenceCheckMixin:
    """Replaces torchvision's md5 verification by a check that the files exist."""

    root: str
    base_folder: str
    train_list: list[list[str]]
    test_list: list[list[str]]
    meta: dict[str, str]

    def _check_integrity(self) -> bool:
        names = [name for name, _ in self.train_list + self.test_list]
        return all(os.path.isfile(os.path.join(self.root, self.base_folder, n)) for n in names)

    def _load_meta(self) -> None:
        path = os.path.join(self.root, self.base_folder, self.meta["filename"])
        if not os.path.isfile(path):
            raise RuntimeError(f"Dataset metadata file not found: {path}")
        with open(path, "rb") as f:
            # The same (trusted-file) pickle format torchvision reads.
            self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}


class _UncheckedCIFAR10(_ExistenceCheckMixin, CIFAR10):
    """CIFAR-10 without md5 verification."""


class _UncheckedCIFAR100(_ExistenceCheckMixin, CIFAR100):
    """CIFAR-100 without md5 verification."""


def _load_cifar(cls: type[CIFAR10], cfg: DataConfig, train: bool, title: str) -> Batch:
    """Load one official CIFAR split as (uint8 N x 3 x 32 x 32, int64 labels) on the CPU."""
    try:
        ds = cls(cfg.root, train=train, download=cfg.download)
    except (RuntimeError, OSError, KeyError, pickle.UnpicklingError) as err:
        hint = (
            "set data.download = true to fetch them, or data.check_integrity = false to use a "
            "local copy without md5 verification"
            if cfg.check_integrity
            else "set data.download = true to fetch them"
        )
        raise DatasetError(
            f"{title} files under {cfg.root!r} are missing or failed the "
            f"{'md5' if cfg.check_integrity else 'existence'} check ({err}); {hint}"
        ) from err
    x = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)))
    return x, torch.as_tensor(ds.targets, dtype=torch.int64)


def _build_cifar(
    cfg: DataConfig,
    device: torch.device,
    name: str,
    classes: tuple[type[CIFAR10], type[CIFAR10]],
    stats: tuple[Sequence[float], Sequence[float]],
    max_degrees: float,
) -> DataSource:
    checked, unchecked = classes
    cls = checked if cfg.check_integrity else unchecked
    num_classes = 10 if name == "cifar10" else 100
    title = f"CIFAR-{num_classes}"
    train, test = _load_cifar(cls, cfg, True, title), _load_cifar(cls, cfg, False, title)
    norm = Normalizer(1 / 255, torch.tensor(stats[0]), torch.tensor(stats[1]))
    augment = CropFlipAugment(pad=4, max_degrees=max_degrees)
    return TensorSource(name, num_classes, train, test, cfg, device, norm, augment)


@DATASETS.register("cifar10")
def build_cifar10(cfg: DataConfig, device: torch.device) -> DataSource:
    """CIFAR-10 from ``cfg.root`` via torchvision, kept as uint8 on the device.

    Training augmentation: random 32x32 crop with 4 pixels of zero padding and a horizontal
    flip. ``cfg.check_integrity = False`` skips torchvision's md5 verification and only checks
    that the files exist: for local copies and for the tests' tiny files.
    """
    classes = (CIFAR10, _UncheckedCIFAR10)
    return _build_cifar(cfg, device, "cifar10", classes, (CIFAR10_MEAN, CIFAR10_STD), 0.0)


@DATASETS.register("cifar100")
def build_cifar100(cfg: DataConfig, device: torch.device) -> DataSource:
    """CIFAR-100 (fine labels) like :func:`build_cifar10`, plus random rotation of up to 15°.

    ``cfg.check_integrity = False`` skips torchvision's md5 verification and only checks that
    the files exist: for local copies and for the tests' tiny files.
    """
    classes = (CIFAR100, _UncheckedCIFAR100)
    return _build_cifar(cfg, device, "cifar100", classes, (CIFAR100_MEAN, CIFAR100_STD), 15.0)


# --------------------------------------------------------------------------- ImageNet


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


class SeededList(Dataset):
    """Items ``samples[order[i]]`` with a transform; optional per-item seeds for augmentation.

    Subclasses load an item in ``__getitem__`` and pass it through :meth:`apply`.
    """

    def __init__(
        self,
        samples: Sequence[Any],
        order: Tensor,
        transform: Callable[..., Any],
        seeds: Tensor | None = None,
    ) -> None:
        self.samples = samples
        self.order = order.tolist()
        self.transform = transform
        self.seeds = seeds.tolist() if seeds is not None else None

    def __len__(self) -> int:
        return len(self.order)

    def apply(self, i: int, *inputs: Any) -> Any:
        """``transform(*inputs)`` under item ``i``'s seed (when the list has seeds)."""
        if self.seeds is None:
            return self.transform(*inputs)
        with torch_seeded(self.seeds[i]):
            return self.transform(*inputs)


class _ImageList(SeededList):
    """Image files with class labels."""

    def __getitem__(self, i: int) -> tuple[Tensor, int]:
        path, label = self.samples[self.order[i]]
        return self.apply(i, default_loader(path)), label


class FileListSource(DataSource):
    """A source whose samples are files read by DataLoaders (ImageNet folders, segmentation).

    Subclasses set ``list_class`` (how an item is read), ``_train_items`` / ``_test_items``, the
    split indices and ``eval_transform``, and define ``_load(data, batch_size, generator)``.
    """

    list_class: type[SeededList]
    _train_items: Sequence[Any]
    _test_items: Sequence[Any]
    eval_transform: Callable[..., Any]

    def _load(self, data: Any, batch_size: int, g: torch.Generator | None) -> Iterator[Batch]:
        """Batches of ``data`` from a DataLoader (``g`` seeds its shuffling and workers)."""
        raise NotImplementedError

    def _eval_list(self, split: str) -> SeededList:
        """``split``'s items in their fixed order, with the evaluation transform."""
        if split == "test":
            test = torch.arange(self.num_test)
            return self.list_class(self._test_items, test, self.eval_transform)
        idx = self.train_indices if split == "train" else self.val_indices
        return self.list_class(self._train_items, idx, self.eval_transform)

    def _example_inputs(self, n: int) -> Tensor:
        data = self._eval_list("test")
        data.order = data.order[:n]
        return next(self._load(data, n, None))[0]


class FolderSource(FileListSource):
    """ImageNet-style class folders under ``root/train`` and ``root/val``, read by DataLoaders."""

    list_class = _ImageList

    def __init__(self, cfg: DataConfig, device: torch.device) -> None:
        train_set = _image_folder(Path(cfg.root) / "train")
        test_set = _image_folder(Path(cfg.root) / "val")
        self.name = "imagenet"
        self.num_classes = len(train_set.classes)
        self.input_shape = (3, 224, 224)
        self.batch_size = cfg.batch_size
        self.eval_batch_size = cfg.eval_batch_size
        self.device = device
        self.workers = cfg.workers
        self.loader = cfg.loader  # "pil": decode in loader workers; "gpu": see gpu_loader
        labels = torch.as_tensor(train_set.targets, dtype=torch.int64)
        self.train_indices, self.val_indices = stratified_split(
            labels, cfg.val_fraction, cfg.split_seed
        )
        self._train_items = train_set.samples
        self._test_items = test_set.samples
        self.num_train = len(self.train_indices)
        self.num_val = len(self.val_indices)
        self.num_test = len(test_set.samples)
        normalize = transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)
        self.train_transform = transforms.Compose(
            [
                transforms.RandomResizedCrop(224),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
                normalize,
            ]
        )
        self.eval_transform = transforms.Compose(
            [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), normalize]
        )

    def train_batches(self, epoch: int, seed: int) -> Iterator[Batch]:
        """Yield one epoch of shuffled, augmented batches; order and crops from (seed, epoch)."""
        g = epoch_generator(seed, epoch)
        order = self.train_indices[torch.randperm(self.num_train, generator=g)]
        seeds = torch.randint(0, 2**62, (self.num_train,), generator=g)
        data = _ImageList(self._train_items, order, self.train_transform, seeds)
        # This process's slice of every global batch (all of it with one process).
        batches = [
            list(range(*self.shard_range(start, min(start + self.batch_size, self.num_train))))
            for start in range(0, self.num_train, self.batch_size)
        ]
        # The loader's generator (drawn from after the order and seeds) fixes the workers'
        # base seeds too, so nothing falls back to the global RNG.
        yield from self._load(data, self.batch_size, g, batches)

    def eval_batches(self, split: str) -> Iterator[Batch]:
        """Yield ``split`` in a fixed order with Resize(256) + CenterCrop(224)."""
        data = self._eval_list(_check_split(split))
        data.order = data.order[slice(*self.eval_range(split))]
        yield from self._load(data, self.eval_batch_size, None)

    def _load(
        self,
        data: _ImageList,
        batch_size: int,
        g: torch.Generator | None,
        batches: list[list[int]] | None = None,
    ) -> Iterator[Batch]:
        # DataLoader draws a base seed even without workers; a fixed generator keeps that
        # draw off the global RNG for evaluation.
        sizes: dict[str, Any] = (
            {"batch_sampler": batches}
            if batches is not None
            else {"batch_size": batch_size, "shuffle": False}
        )
        common: dict[str, Any] = {
            **sizes,
            "num_workers": self.workers,
            "pin_memory": self.device.type == "cuda",
            "generator": g if g is not None else torch.Generator().manual_seed(0),
        }
        if self.loader == "gpu":
            from benchmark import gpu_loader

            encoded = gpu_loader.EncodedImages(data.samples, data.order, data.seeds)
            files = DataLoader(encoded, collate_fn=gpu_loader.collate_encoded, **common)
            yield from gpu_loader.device_batches(files, self.device, IMAGENET_MEAN, IMAGENET_STD)
            return
        loader = DataLoader(data, **common)
        for x, y in loader:
            yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)


def _image_folder(path: Path) -> ImageFolder:
    try:
        return ImageFolder(str(path))
    except (FileNotFoundError, OSError) as err:
        raise DatasetError(f"cannot read the image folder {str(path)!r}: {err}") from err


@DATASETS.register("imagenet")
def build_imagenet(cfg: DataConfig, device: torch.device) -> DataSource:
    """ImageNet from ``root/train`` and ``root/val`` class folders (``val`` is the test split).

    Training: RandomResizedCrop(224) + horizontal flip; evaluation: Resize(256) +
    CenterCrop(224); ImageNet mean/std normalisation; ``cfg.workers`` loader processes.
    """
    return FolderSource(cfg, device)


# Registered here so that every dataset is known once this module is imported.
from benchmark import data_segmentation, data_translation  # noqa: E402,F401
