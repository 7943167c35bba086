"""File-backed sources: image files read by loader workers, and ImageNet's class folders."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from benchmark.config.run import DataConfig
from benchmark.core.errors import DatasetError
from benchmark.data.base import DATASETS, Batch, DataSource, check_split
from benchmark.data.seeding import epoch_generator, stratified_split, torch_seeded

if TYPE_CHECKING:
    from torchvision.datasets import ImageFolder

# torchvision is imported where files are read, not with this module: it costs seconds of CPU
# that every command validating a config (table, list, a dry run) would pay for nothing.

IMAGENET_MEAN = (0.485, 0.456, 0.406)


IMAGENET_STD = (0.229, 0.224, 0.225)


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
        from torchvision.datasets.folder import default_loader

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
        from torchvision import transforms

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
        data = self._eval_list(check_split(split))
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
            from benchmark.data import gpu_loader

            encoded = gpu_loader.EncodedImages(data.samples, data.order, data.seeds)
            files = DataLoader(encoded, collate_fn=gpu_loader.collate_encoded, **common)
            yield from gpu_loader.device_batches(files, self.device, IMAGENET_MEAN, IMAGENET_STD)
            return
        loader = DataLoader(data, **common)
        for x, y in loader:
            yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)


def _image_folder(path: Path) -> ImageFolder:
    from torchvision.datasets import ImageFolder

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
