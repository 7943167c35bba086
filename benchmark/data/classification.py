"""In-memory classification datasets: scikit-learn's embedded digits and CIFAR-10/100 read from
torchvision's on-disk format.
"""

from __future__ import annotations

import functools
import os
import pickle
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import Tensor

from benchmark.config.run import DataConfig
from benchmark.core.errors import DatasetError
from benchmark.data.augment import CropFlipAugment, Normalizer
from benchmark.data.base import DATASETS, Batch, DataSource
from benchmark.data.seeding import epoch_generator, stratified_split

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)


CIFAR10_STD = (0.2470, 0.2435, 0.2616)


CIFAR100_MEAN = (0.5071, 0.4865, 0.4409)


CIFAR100_STD = (0.2673, 0.2564, 0.2762)


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


@functools.cache
def cifar_classes(name: str) -> tuple[type, type]:
    """torchvision's dataset class of ``name`` (cifar10, cifar100) and its subclass without md5
    verification."""
    # Imported here, not with the module: torchvision costs seconds of CPU that every command
    # validating a config (table, list, a dry run) would pay for nothing.
    from torchvision.datasets import CIFAR10, CIFAR100

    base = {"cifar10": CIFAR10, "cifar100": CIFAR100}[name]
    doc = f"{base.__name__} without md5 verification."
    return base, type(f"_Unchecked{base.__name__}", (_ExistenceCheckMixin, base), {"__doc__": doc})


def _load_cifar(cls: type, cfg: DataConfig, train: bool, title: str) -> Batch:
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
    stats: tuple[Sequence[float], Sequence[float]],
    max_degrees: float,
) -> DataSource:
    checked, unchecked = cifar_classes(name)
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
    return _build_cifar(cfg, device, "cifar10", (CIFAR10_MEAN, CIFAR10_STD), 0.0)


@DATASETS.register("cifar100")
def build_cifar100(cfg: DataConfig, device: torch.device) -> DataSource:
    """CIFAR-100 (fine labels) like :func:`build_cifar10`, plus random rotation of up to 15°.

    ``cfg.check_integrity = False`` skips torchvision's md5 verification and only checks that
    the files exist: for local copies and for the tests' tiny files.
    """
    return _build_cifar(cfg, device, "cifar100", (CIFAR100_MEAN, CIFAR100_STD), 15.0)
