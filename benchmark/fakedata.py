"""Small stand-in dataset files in the real on-disk formats (CIFAR pickles, ImageFolder trees).

They let the real loaders run where the datasets cannot be downloaded: in tests, in smoke-scale
experiments, and for ``prunebench fake-data``. With ``signal > 0`` every class gets its own
colour pattern under the noise, so models can learn them and methods can be told apart.
Load CIFAR stand-ins with ``data.check_integrity = false``: their md5 sums are not the official
ones, and torchvision would otherwise reject them.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

CIFAR_PIXELS = 3 * 32 * 32


def _dump(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(obj, f)


def _images(
    rng: np.random.Generator, labels: np.ndarray, classes: int, signal: float, high: int = 256
) -> np.ndarray:
    """uint8 images (N, 3072): noise, plus a fixed per-class pattern scaled by ``signal``."""
    noise = rng.integers(0, high, (len(labels), CIFAR_PIXELS)).astype(np.float64)
    if signal <= 0:
        return noise.astype(np.uint8)
    patterns = np.random.default_rng(12345).integers(0, 256, (classes, CIFAR_PIXELS))
    mixed = (1 - signal) * noise + signal * patterns[labels]
    return np.clip(mixed, 0, 255).astype(np.uint8)


def write_cifar10(
    root: str | Path, per_batch: int = 20, n_test: int = 20, signal: float = 0.0
) -> dict[str, np.ndarray]:
    """Write a CIFAR-10 stand-in (``cifar-10-batches-py/``: 5 data batches, test batch, meta).

    Returns the arrays written. The test images carry a per-channel offset so that their
    channel means differ (normalisation is then checkable).
    """
    rng = np.random.default_rng(0)
    folder = Path(root) / "cifar-10-batches-py"
    train_y = np.arange(5 * per_batch) % 10
    train_x = _images(rng, train_y, 10, signal)
    for b in range(5):
        part = slice(b * per_batch, (b + 1) * per_batch)
        _dump(
            folder / f"data_batch_{b + 1}",
            {
                "batch_label": f"batch {b + 1}",
                "data": train_x[part],
                "labels": train_y[part].tolist(),
            },
        )
    test_y = np.arange(n_test) % 10
    if signal > 0:
        test_x = _images(rng, test_y, 10, signal)
    else:
        offset = np.array([0, 50, 100], dtype=np.uint8)[None, :, None]
        test_x = rng.integers(0, 156, (n_test, 3, 1024), dtype=np.uint8) + offset
        test_x = test_x.reshape(n_test, CIFAR_PIXELS)
    _dump(folder / "test_batch", {"data": test_x, "labels": test_y.tolist()})
    _dump(folder / "batches.meta", {"label_names": [f"c{i}" for i in range(10)]})
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def write_cifar100(
    root: str | Path, n_train: int = 200, n_test: int = 100, signal: float = 0.0
) -> dict[str, np.ndarray]:
    """Write a CIFAR-100 stand-in (``cifar-100-python/``: train, test, meta)."""
    rng = np.random.default_rng(1)
    folder = Path(root) / "cifar-100-python"
    train_y = np.arange(n_train) % 100
    train_x = _images(rng, train_y, 100, signal)
    test_y = np.arange(n_test) % 100
    test_x = _images(rng, test_y, 100, signal)
    for name, x, y in (("train", train_x, train_y), ("test", test_x, test_y)):
        _dump(
            folder / name,
            {"data": x, "fine_labels": y.tolist(), "coarse_labels": (y // 5).tolist()},
        )
    _dump(
        folder / "meta",
        {
            "fine_label_names": [f"f{i}" for i in range(100)],
            "coarse_label_names": [f"c{i}" for i in range(20)],
        },
    )
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def write_imagefolder(
    root: str | Path, classes: tuple[str, ...] = ("ant", "bee", "cat"), per_class: int = 4
) -> Path:
    """Write an ImageNet-style tree: ``train/<class>/`` mixed PNG/JPEG, ``val/<class>/`` PNG."""
    from PIL import Image

    root = Path(root)
    rng = np.random.default_rng(0)
    for c, name in enumerate(classes):
        for i in range(per_class):
            pixels = rng.integers(0, 256, (30 + 4 * i, 40, 3), dtype=np.uint8)
            path = root / "train" / name / f"img{i}.{'png' if i % 2 else 'jpg'}"
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(pixels).save(path)
        (root / "val" / name).mkdir(parents=True, exist_ok=True)
        colour = (40 * c, 100, 250 - 60 * c)
        Image.new("RGB", (50, 40), colour).save(root / "val" / name / "img.png")
    return root


def _photo(rng: np.random.Generator, width: int, height: int) -> Any:
    """A photograph-like RGB image: smooth colour fields, mid-frequency texture, sensor noise."""
    from PIL import Image

    def field(h: int, w: int, scale: float) -> np.ndarray:
        small = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        big = Image.fromarray(small).resize((width, height), Image.Resampling.BICUBIC)
        return np.asarray(big, dtype=np.float32) * scale

    pixels = field(6, 8, 0.7) + field(48, 64, 0.3) + rng.normal(0, 9, (height, width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_imagenet_photos(
    root: str | Path,
    n_train: int = 2000,
    classes: int = 10,
    size: tuple[int, int] = (500, 375),
    quality: int = 90,
) -> Path:
    """Write an ImageNet-style JPEG tree whose files cost what ImageNet's cost to load.

    ``n_train`` training and ``n_train // 10`` validation JPEGs (quality 90) over ``classes``
    class folders, 500x375 like a typical ImageNet photograph (every fourth one in portrait),
    with photograph-like content so the files have realistic sizes (~60-120 kB).
    """
    root = Path(root)
    rng = np.random.default_rng(0)
    for split, count in (("train", n_train), ("val", max(n_train // 10, classes))):
        for i in range(count):
            folder = root / split / f"n{i % classes:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            w, h = size if i % 4 else size[::-1]
            _photo(rng, w, h).save(folder / f"img{i:07d}.JPEG", quality=quality)
    return root


WRITERS = {"cifar10": write_cifar10, "cifar100": write_cifar100, "imagenet": write_imagefolder}
