"""Small stand-in dataset files in the real on-disk formats (CIFAR pickles, ImageFolder trees).

They let the real loaders run where the datasets cannot be downloaded: in tests, in smoke-scale
experiments, and for ``prunebench fake-data``. With ``signal > 0`` every class gets its own
colour pattern under the noise, so models can learn them and methods can be told apart.
Load CIFAR stand-ins with ``data.check_integrity = false``: their md5 sums are not the official
ones, and torchvision would otherwise reject them.
"""

from __future__ import annotations

import json
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


# --------------------------------------------------------------------------- segmentation

# Stand-in objects: (COCO category id, CityScapes label id) pairs with a colour each.
_SEG_OBJECTS = ((5, 26, (200, 40, 40)), (2, 24, (40, 200, 40)), (16, 11, (40, 40, 200)))


def _object_boxes(
    rng: np.random.Generator, h: int, w: int, n: int
) -> list[tuple[int, int, int, int, int]]:
    """``n`` random boxes (object index, x0, y0, x1, y1) inside an h x w image."""
    boxes = []
    for _ in range(n):
        k = int(rng.integers(len(_SEG_OBJECTS)))
        x0, y0 = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
        x1, y1 = x0 + int(rng.integers(w // 4, w // 2)), y0 + int(rng.integers(h // 4, h // 2))
        boxes.append((k, x0, y0, x1, y1))
    return boxes


def _paint(rng: np.random.Generator, h: int, w: int, boxes: list) -> np.ndarray:
    """A noisy uint8 RGB image with each box filled in its object's colour."""
    pixels = rng.integers(0, 80, (h, w, 3)).astype(np.int64)
    for k, x0, y0, x1, y1 in boxes:
        pixels[y0:y1, x0:x1] += np.array(_SEG_OBJECTS[k][2])
    return np.clip(pixels, 0, 255).astype(np.uint8)


def write_coco(
    root: str | Path, n_train: int = 8, n_val: int = 4, size: tuple[int, int] = (64, 80)
) -> Path:
    """Write a COCO 2017 stand-in: ``{train,val}2017/*.jpg`` and ``annotations/instances_*.json``.

    Each image holds 1-2 rectangles of VOC categories (as polygons; one as RLE) and one object of
    a non-VOC category (toothbrush, 90) that the loader must ignore; the first rectangle covers a
    quarter of the image, so that the objects pass the reference's 1000-pixel area filter at the
    default size. One training image has no VOC object at all and is left out of training.
    """
    from PIL import Image
    from pycocotools import mask as coco_mask

    root = Path(root)
    rng = np.random.default_rng(0)
    h, w = size
    categories = [{"id": c, "name": f"cat{c}", "supercategory": "x"} for c in (2, 5, 16, 90)]
    for split, n in (("train", n_train), ("val", n_val)):
        folder = root / f"{split}2017"
        folder.mkdir(parents=True, exist_ok=True)
        images, annotations = [], []
        for i in range(n):
            img_id = 1000 * (split == "val") + i + 1
            empty = split == "train" and i == n - 1
            big = (i % len(_SEG_OBJECTS), 0, h // 2, w // 2, h)
            boxes = [] if empty else [big, *_object_boxes(rng, h, w, i % 2)]
            name = f"{img_id:012d}.jpg"
            Image.fromarray(_paint(rng, h, w, boxes)).save(folder / name, quality=95)
            images.append({"id": img_id, "file_name": name, "height": h, "width": w})
            objects = [(_SEG_OBJECTS[k][0], box) for k, *box in boxes] + [(90, (0, 0, 4, 4))]
            for j, (cat, (x0, y0, x1, y1)) in enumerate(objects):
                polygon = [[x0, y0, x1, y0, x1, y1, x0, y1]]
                segmentation: list | dict = polygon
                if j == 1:
                    rle = coco_mask.merge(coco_mask.frPyObjects(polygon, h, w))
                    segmentation = {"size": rle["size"], "counts": rle["counts"].decode()}
                annotations.append(
                    {
                        "id": len(annotations) + 1 + 10_000 * (split == "val"),
                        "image_id": img_id,
                        "category_id": cat,
                        "segmentation": segmentation,
                        "area": float((x1 - x0) * (y1 - y0)),
                        "bbox": [x0, y0, x1 - x0, y1 - y0],
                        "iscrowd": 0,
                    }
                )
        ann = {"images": images, "annotations": annotations, "categories": categories}
        path = root / "annotations" / f"instances_{split}2017.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(ann))
    return root


def write_cityscapes(
    root: str | Path, n_train: int = 8, n_val: int = 4, size: tuple[int, int] = (32, 64)
) -> Path:
    """Write a CityScapes stand-in: ``leftImg8bit/{train,val}/<city>/*_leftImg8bit.png`` and
    ``gtFine/{train,val}/<city>/*_gtFine_labelIds.png`` (label ids; 0 = unlabelled)."""
    from PIL import Image

    root = Path(root)
    rng = np.random.default_rng(1)
    h, w = size
    for split, n, city in (("train", n_train, "aachen"), ("val", n_val, "frankfurt")):
        images = root / "leftImg8bit" / split / city
        labels = root / "gtFine" / split / city
        images.mkdir(parents=True, exist_ok=True)
        labels.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            boxes = _object_boxes(rng, h, w, 2)
            ids = np.full((h, w), 7, dtype=np.uint8)  # road
            ids[: h // 8] = 0  # unlabelled sky strip
            for k, x0, y0, x1, y1 in boxes:
                ids[y0:y1, x0:x1] = _SEG_OBJECTS[k][1]
            stem = f"{city}_000000_{i:06d}"
            Image.fromarray(_paint(rng, h, w, boxes)).save(images / f"{stem}_leftImg8bit.png")
            Image.fromarray(ids).save(labels / f"{stem}_gtFine_labelIds.png")
    return root


WRITERS["coco"] = write_coco
WRITERS["cityscapes"] = write_cityscapes


# --------------------------------------------------------------------------- translation

# A word-for-word English -> German dictionary: the stand-in corpus is learnable.
_LEXICON = {
    "the": "die",
    "cat": "katze",
    "dog": "hund",
    "sees": "sieht",
    "likes": "mag",
    "small": "kleine",
    "big": "große",
    "house": "haus",
    "tree": "baum",
    "and": "und",
    "a": "eine",
    "red": "rote",
    "green": "grüne",
    "car": "auto",
    "bird": "vogel",
    "today": "heute",
}


def write_wmt16(
    root: str | Path,
    n_train: int = 64,
    n_val: int = 8,
    n_test: int = 8,
    vocab_size: int = 100,
    parquet: bool = True,
) -> Path:
    """Write a WMT16 de-en stand-in: the Hugging Face dataset's ``de-en/{split}-*.parquet``
    files (or, with ``parquet=False``, raw ``{split}.en``/``{split}.de`` text) and a tiny
    SentencePiece model ``spiece.model`` trained on the stand-in text with T5's special ids."""
    import io

    import pandas as pd
    import sentencepiece as spm

    from benchmark.data.translation import PREFIX

    root = Path(root)
    rng = np.random.default_rng(2)
    words = list(_LEXICON)
    text: list[str] = []
    for split, n in (("train", n_train), ("validation", n_val), ("test", n_test)):
        en = [" ".join(rng.choice(words, size=int(rng.integers(3, 9)))) for _ in range(n)]
        de = [" ".join(_LEXICON[w] for w in s.split()) for s in en]
        text += [PREFIX + s for s in en] + de
        if parquet:
            path = root / "de-en" / f"{split}-00000-of-00001.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pairs = [{"de": d, "en": e} for d, e in zip(de, en, strict=True)]
            pd.DataFrame({"translation": pairs}).to_parquet(path)
        else:
            root.mkdir(parents=True, exist_ok=True)
            (root / f"{split}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
            (root / f"{split}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text),
        model_writer=model,
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
    )
    (root / "spiece.model").write_bytes(model.getvalue())
    return root


WRITERS["wmt16"] = write_wmt16
