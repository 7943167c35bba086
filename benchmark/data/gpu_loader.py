"""ImageNet batches decoded on the training device (``data.loader = "gpu"``).

Loader workers only read the files' bytes; the main process decodes each batch's JPEGs at once
with ``torchvision.io.decode_jpeg(..., device=...)`` (nvJPEG on a GPU, libjpeg on a CPU run) and
applies the PIL loader's transforms to the decoded tensors on the device:

- training: RandomResizedCrop(224) and a horizontal flip, their parameters drawn exactly as the
  PIL loader draws them (the same per-image seeds, the same torchvision draws), so both loaders
  crop the same boxes;
- evaluation: Resize(256) + CenterCrop(224);
- then scaling to [0, 1] and ImageNet mean/std normalisation.

Pixels are close to the PIL loader's, not equal (another JPEG decoder and antialiased tensor
resizing instead of PIL's), which is why the loader is part of the run's identity. Files that
are not JPEGs (ImageNet holds a few PNG and CMYK files) are decoded on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset
from torchvision.io import ImageReadMode, decode_image, decode_jpeg, read_file
from torchvision.transforms import RandomResizedCrop
from torchvision.transforms.v2 import functional as TF

from benchmark.data.seeding import torch_seeded

JPEG_MAGIC = b"\xff\xd8"
TRAIN_SIZE = 224
RESIZE = 256

Encoded = tuple[list[Tensor], Tensor, list[int] | None]


class EncodedImages(Dataset):
    """The raw bytes of ``samples[order[i]]`` with its label (and per-image seed)."""

    def __init__(
        self, samples: Sequence[tuple[str, int]], order: Sequence[int], seeds: Sequence[int] | None
    ) -> None:
        self.samples = samples
        self.order = list(order)
        self.seeds = list(seeds) if seeds is not None else None

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: int) -> tuple[Tensor, int, int | None]:
        path, label = self.samples[self.order[i]]
        seed = self.seeds[i] if self.seeds is not None else None
        return read_file(path), label, seed


def collate_encoded(items: list[tuple[Tensor, int, int | None]]) -> Encoded:
    """Keep the variable-length byte tensors as a list; stack the labels."""
    data = [item[0] for item in items]
    labels = torch.tensor([item[1] for item in items], dtype=torch.int64)
    seeds = [item[2] for item in items]
    return data, labels, None if seeds[0] is None else [int(s) for s in seeds]  # type: ignore[misc]


def decode_batch(data: list[Tensor], device: torch.device) -> list[Tensor]:
    """Decode every image to a uint8 RGB (3, H, W) tensor on ``device``; JPEGs in one call."""
    is_jpeg = [bytes(d[:2].tolist()) == JPEG_MAGIC for d in data]
    jpegs = [d for d, j in zip(data, is_jpeg, strict=True) if j]
    decoded: list[Tensor] = []
    if jpegs:
        try:
            decoded = list(decode_jpeg(jpegs, mode=ImageReadMode.RGB, device=device))
        except RuntimeError:  # e.g. a CMYK JPEG the device decoder refuses: one by one on CPU
            decoded = [decode_image(d, mode=ImageReadMode.RGB).to(device) for d in jpegs]
    out: list[Tensor] = []
    it = iter(decoded)
    for d, j in zip(data, is_jpeg, strict=True):
        out.append(next(it) if j else decode_image(d, mode=ImageReadMode.RGB).to(device))
    return out


def train_view(image: Tensor, seed: int) -> Tensor:
    """RandomResizedCrop(224) + horizontal flip of a uint8 (3, H, W) image, drawn like PIL's.

    The PIL loader seeds the global RNG with ``seed`` and runs the same two transforms; the same
    calls draw the same crop box and flip here. The global RNG is restored afterwards.
    """
    with torch_seeded(seed):
        top, left, h, w = RandomResizedCrop.get_params(image, [0.08, 1.0], [3 / 4, 4 / 3])
        flip = bool(torch.rand(1) < 0.5)
    out = TF.resized_crop(image, top, left, h, w, [TRAIN_SIZE, TRAIN_SIZE], antialias=True)
    return out.flip(-1) if flip else out


def eval_view(image: Tensor) -> Tensor:
    """Resize(256) + CenterCrop(224) of a uint8 (3, H, W) image."""
    return TF.center_crop(TF.resize(image, [RESIZE], antialias=True), [TRAIN_SIZE, TRAIN_SIZE])


def normalize(batch: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """uint8 (B, 3, H, W) to float in [0, 1], standardised per channel ((3, 1, 1) mean/std)."""
    return (batch.float() / 255 - mean) / std


def device_batches(
    loader: DataLoader, device: torch.device, mean: Sequence[float], std: Sequence[float]
) -> Iterator[tuple[Tensor, Tensor]]:
    """Decode, transform and normalise the batches of an :class:`EncodedImages` loader."""
    # Made once on the device: a host-to-device copy per batch otherwise.
    mean_t = torch.tensor(mean, device=device)[:, None, None]
    std_t = torch.tensor(std, device=device)[:, None, None]
    for data, labels, seeds in loader:
        images = decode_batch(data, device)
        if seeds is None:
            views = [eval_view(img) for img in images]
        else:
            views = [train_view(img, s) for img, s in zip(images, seeds, strict=True)]
        yield normalize(torch.stack(views), mean_t, std_t), labels.to(device, non_blocking=True)
