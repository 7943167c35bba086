"""Semantic-segmentation datasets in their real on-disk formats: COCO 2017 and CityScapes.

* ``coco``: ``train2017/``, ``val2017/`` and ``annotations/instances_{train,val}2017.json`` under
  ``data.root``, read with pycocotools. As in torchvision's segmentation reference, the masks hold
  the 20 Pascal VOC categories plus background (21 classes), pixels where two objects overlap are
  ignored (255), and training images without any of those objects are left out.
* ``cityscapes``: ``leftImg8bit/`` and ``gtFine/`` under ``data.root`` (torchvision's
  ``Cityscapes``, fine annotations); label ids map to the 19 train ids, the rest to 255.

The official validation split is the test split (the paper reports validation mIoU); the
harness's validation split is a fixed part of the official training set. Training: random
rescale (0.5-2x of the base size), horizontal flip, random crop of ``data.crop_size`` (padded
with ignore pixels); evaluation: the short side resized to the base size. Batches of different
image sizes are padded (ignore pixels in the targets). Randomness per item comes from
``(seed, epoch)`` only, as for ImageNet, and the last incomplete training batch is dropped
(batch norm after global pooling needs two samples).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor
from torch.utils.data import DataLoader

from benchmark.config.run import DataConfig
from benchmark.core.errors import DatasetError
from benchmark.data.base import DATASETS, Batch, DataSource, check_split
from benchmark.data.imagenet import IMAGENET_MEAN, IMAGENET_STD, FileListSource, SeededList
from benchmark.data.seeding import epoch_generator, stratified_split

if TYPE_CHECKING:
    from torchvision.transforms import v2

# torchvision is imported where samples are read, not with this module: it costs seconds of
# CPU that every command validating a config (table, list, a dry run) would pay for nothing.

IGNORE_INDEX = 255
# COCO category ids of the Pascal VOC classes; the position is the train id (0: background).
COCO_VOC_CATEGORIES = (0, 5, 2, 16, 9, 44, 6, 3, 17, 62, 21, 67, 18, 19, 4, 1, 64, 20, 63, 7, 72)
# A training image is kept when its VOC objects cover more than this many pixels (torchvision).
COCO_MIN_AREA = 1000


@dataclass(frozen=True)
class Sizes:
    """Base (evaluation short side) and training crop sizes of a dataset, in pixels."""

    base: int
    crop: int

    def scaled(self, crop: int) -> Sizes:
        """These sizes with the crop set to ``crop`` (0 keeps them) and the base scaled alike."""
        if crop == 0:
            return self
        return Sizes(max(1, round(self.base * crop / self.crop)), crop)


COCO_SIZES = Sizes(520, 480)
CITYSCAPES_SIZES = Sizes(1024, 713)

# A sample: (image path, a function returning its uint8 label mask as a PIL image).
Sample = tuple[str, Callable[[], Image.Image]]


def joint_transforms(sizes: Sizes, train: bool) -> v2.Transform:
    """Image-and-mask transforms: scale/flip/crop for training, a short-side resize otherwise."""
    from torchvision import tv_tensors
    from torchvision.transforms import v2

    if train:
        geometry = [
            v2.RandomResize(sizes.base // 2, 2 * sizes.base),
            v2.RandomHorizontalFlip(),
            v2.RandomCrop(
                sizes.crop,
                pad_if_needed=True,
                fill={tv_tensors.Image: 0, tv_tensors.Mask: IGNORE_INDEX},
            ),
        ]
    else:
        geometry = [v2.Resize(sizes.base)]
    return v2.Compose(
        [
            *geometry,
            v2.ToDtype({tv_tensors.Image: torch.float32, "others": None}, scale=True),
            v2.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ]
    )


class SegmentationList(SeededList):
    """Image files with their label masks, as (normalised image, int64 mask)."""

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        from torchvision import tv_tensors
        from torchvision.transforms import v2

        path, load_mask = self.samples[self.order[i]]
        try:
            image = tv_tensors.Image(v2.functional.pil_to_tensor(Image.open(path).convert("RGB")))
            mask = tv_tensors.Mask(torch.from_numpy(np.array(load_mask(), dtype=np.uint8)))
        except OSError as err:
            raise DatasetError(f"cannot read the sample {path!r}: {err}") from err
        x, y = self.apply(i, image, mask)
        return x.as_subclass(Tensor), y.as_subclass(Tensor).to(torch.int64)


def pad_collate(items: list[tuple[Tensor, Tensor]]) -> Batch:
    """Stack images and masks, padding each to the largest height and width of the batch."""
    h = max(x.shape[-2] for x, _ in items)
    w = max(x.shape[-1] for x, _ in items)

    def pad(t: Tensor, value: float) -> Tensor:
        return F.pad(t, (0, w - t.shape[-1], 0, h - t.shape[-2]), value=value)

    images = torch.stack([pad(x, 0.0) for x, _ in items])
    masks = torch.stack([pad(y, IGNORE_INDEX) for _, y in items])
    return images, masks


class SegmentationSource(FileListSource):
    """Image/mask pairs read by DataLoaders: fixed splits and deterministic batches."""

    task = "segmentation"
    list_class = SegmentationList

    def __init__(
        self,
        name: str,
        num_classes: int,
        train: Sequence[Sample],
        test: Sequence[Sample],
        sizes: Sizes,
        cfg: DataConfig,
        device: torch.device,
    ) -> None:
        if len(train) < 2 or not test:
            raise DatasetError(
                f"{name} under {cfg.root!r} has {len(train)} training and {len(test)} test "
                "samples; at least 2 and 1 are needed"
            )
        self.name = name
        self.num_classes = num_classes
        self.sizes = sizes.scaled(cfg.crop_size)
        self.input_shape = (3, self.sizes.crop, self.sizes.crop)
        self.batch_size = cfg.batch_size
        self.eval_batch_size = cfg.eval_batch_size
        self.device = device
        self.workers = cfg.workers
        # No labels to stratify by: every sample is of the same "class", the split is random.
        self.train_indices, self.val_indices = stratified_split(
            torch.zeros(len(train), dtype=torch.int64), cfg.val_fraction, cfg.split_seed
        )
        self._train_items, self._test_items = list(train), list(test)
        self.num_train = len(self.train_indices)
        self.num_val = len(self.val_indices)
        self.num_test = len(test)
        if self.num_train < 2:
            raise DatasetError(f"{name}: {self.num_train} training sample(s) left; need 2")
        self.train_transform = joint_transforms(self.sizes, train=True)
        self.eval_transform = joint_transforms(self.sizes, train=False)

    def iters_per_epoch(self) -> int:
        """Full training batches per epoch (a last incomplete batch is dropped; at least 1)."""
        return max(1, self.num_train // self.batch_size)

    def train_batches(self, epoch: int, seed: int) -> Iterator[Batch]:
        """Yield one epoch of shuffled, augmented batches; order and crops from (seed, epoch)."""
        g = epoch_generator(seed, epoch)
        order = self.train_indices[torch.randperm(self.num_train, generator=g)]
        seeds = torch.randint(0, 2**62, (self.num_train,), generator=g)
        data = SegmentationList(self._train_items, order, self.train_transform, seeds)
        batch = min(self.batch_size, self.num_train)
        yield from self._load(data, batch, g, drop_last=True)

    def eval_batches(self, split: str) -> Iterator[Batch]:
        """Yield ``split`` in a fixed order, short side resized to the base size."""
        data = self._eval_list(check_split(split))
        yield from self._load(data, self.eval_batch_size, None)

    def _load(
        self,
        data: SegmentationList,
        batch_size: int,
        g: torch.Generator | None,
        drop_last: bool = False,
    ) -> Iterator[Batch]:
        loader = DataLoader(
            data,
            batch_size=batch_size,
            shuffle=False,
            drop_last=drop_last,
            num_workers=self.workers,
            collate_fn=pad_collate,
            pin_memory=self.device.type == "cuda",
            # A fixed generator keeps the loader's base-seed draw off the global RNG.
            generator=g if g is not None else torch.Generator().manual_seed(0),
        )
        for x, y in loader:
            yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)


# --------------------------------------------------------------------------- COCO


def _read_coco(root: Path, split: str, keep_empty: bool) -> list[Sample]:
    """The samples of ``{split}2017`` with VOC masks built from the instance annotations."""
    from pycocotools import mask as coco_mask
    from pycocotools.coco import COCO

    ann_file = root / "annotations" / f"instances_{split}2017.json"
    images = root / f"{split}2017"
    if not ann_file.is_file() or not images.is_dir():
        raise DatasetError(
            f"COCO files under {str(root)!r} are missing: need {split}2017/ and {ann_file.name} "
            "in annotations/ (`prunebench fake-data coco` writes a stand-in)"
        )
    try:
        coco = _quiet(lambda: COCO(str(ann_file)))
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise DatasetError(f"cannot read the COCO annotations {str(ann_file)!r}: {err}") from err
    to_train_id = {cat: i for i, cat in enumerate(COCO_VOC_CATEGORIES) if cat}

    def objects(img_id: int) -> list[dict]:
        anns = coco.loadAnns(coco.getAnnIds(imgIds=img_id, iscrowd=None))
        return [a for a in anns if a["category_id"] in to_train_id]

    def mask_of(info: dict) -> Callable[[], Image.Image]:
        def load() -> Image.Image:
            h, w = info["height"], info["width"]
            target = np.zeros((h, w), dtype=np.uint8)
            count = np.zeros((h, w), dtype=np.uint8)
            for ann in objects(info["id"]):
                with warnings.catch_warnings():
                    # pycocotools' NumPy-2 copy-keyword deprecation, harmless here.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    m = coco_mask.decode(_rle(ann["segmentation"], h, w)).astype(bool)
                target[m] = to_train_id[ann["category_id"]]
                count += m
            target[count > 1] = IGNORE_INDEX
            return Image.fromarray(target)

        return load

    samples = []
    for img_id in sorted(coco.getImgIds()):
        if not keep_empty and sum(a["area"] for a in objects(img_id)) <= COCO_MIN_AREA:
            continue
        info = coco.loadImgs(img_id)[0]
        samples.append((str(images / info["file_name"]), mask_of(info)))
    return samples


def _rle(segmentation: list | dict, h: int, w: int) -> dict:
    """One run-length encoding of a COCO segmentation: polygons, raw or compressed RLE."""
    from pycocotools import mask as coco_mask

    if isinstance(segmentation, list):
        return coco_mask.merge(coco_mask.frPyObjects(segmentation, h, w))
    if isinstance(segmentation["counts"], list):
        return coco_mask.frPyObjects(segmentation, h, w)
    return segmentation


def _quiet(fn: Callable[[], object]) -> object:
    """Call ``fn`` with stdout silenced (pycocotools prints progress lines)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return fn()


@DATASETS.register("coco")
def build_coco(cfg: DataConfig, device: torch.device) -> DataSource:
    """COCO 2017 as 21-class VOC segmentation (train2017 for training, val2017 as test)."""
    root = Path(cfg.root)
    train = _read_coco(root, "train", keep_empty=False)
    test = _read_coco(root, "val", keep_empty=True)
    return SegmentationSource(
        "coco", len(COCO_VOC_CATEGORIES), train, test, COCO_SIZES, cfg, device
    )


# --------------------------------------------------------------------------- CityScapes


def cityscapes_train_ids() -> np.ndarray:
    """A lookup table from CityScapes label ids (0-255) to the 19 train ids (255: ignored)."""
    from torchvision.datasets import Cityscapes

    table = np.full(256, IGNORE_INDEX, dtype=np.uint8)
    for cls in Cityscapes.classes:
        if 0 <= cls.id < 256 and 0 <= cls.train_id < 255:
            table[cls.id] = cls.train_id
    return table


CITYSCAPES_CLASSES = 19


def _read_cityscapes(root: Path, split: str) -> list[Sample]:
    """The fine-annotated samples of ``split`` with label ids mapped to train ids."""
    from torchvision.datasets import Cityscapes

    try:
        ds = Cityscapes(str(root), split=split, mode="fine", target_type="semantic")
    except (RuntimeError, OSError, ValueError) as err:
        raise DatasetError(
            f"CityScapes files under {str(root)!r} are missing or incomplete: need "
            f"leftImg8bit/{split}/ and gtFine/{split}/ ({err}); "
            "`prunebench fake-data cityscapes` writes a stand-in"
        ) from err
    table = cityscapes_train_ids()

    def mask_of(path: str) -> Callable[[], Image.Image]:
        def load() -> Image.Image:
            return Image.fromarray(table[np.array(Image.open(path), dtype=np.uint8)])

        return load

    return [(img, mask_of(t[0])) for img, t in zip(ds.images, ds.targets, strict=True)]


@DATASETS.register("cityscapes")
def build_cityscapes(cfg: DataConfig, device: torch.device) -> DataSource:
    """CityScapes fine annotations, 19 train ids (train for training, val as test)."""
    root = Path(cfg.root)
    train, test = _read_cityscapes(root, "train"), _read_cityscapes(root, "val")
    return SegmentationSource(
        "cityscapes", CITYSCAPES_CLASSES, train, test, CITYSCAPES_SIZES, cfg, device
    )
