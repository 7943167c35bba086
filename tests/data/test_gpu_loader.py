"""The tensor ImageNet loader (``data.loader = "gpu"``; on a CPU run it decodes on the CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from benchmark.cli import main
from benchmark.config.run import DataConfig
from benchmark.core.errors import ConfigError
from benchmark.data.base import build_dataset, validate_data_config
from benchmark.data.fakedata import write_imagefolder, write_imagenet_photos

# One intensity level (1/255) divided by the smallest ImageNet std.
ONE_LEVEL = 1 / 255 / 0.224 + 1e-6


def both_loaders(root: Path, **kwargs: object) -> dict[str, tuple[list, list]]:
    """Training batches (epoch 0) and test batches of the PIL and the tensor loader."""
    out = {}
    for loader in ("pil", "gpu"):
        cfg = DataConfig(
            name="imagenet", root=str(root), workers=0, loader=loader, val_fraction=0.25, **kwargs
        )
        source = build_dataset(cfg, torch.device("cpu"))
        out[loader] = (list(source.train_batches(0, 5)), list(source.eval_batches("test")))
    return out


@pytest.mark.parametrize("photos", [False, True])
def test_tensor_loader_crops_like_the_pil_loader(tmp_path: Path, photos: bool) -> None:
    # The small tree mixes PNG and JPEG files; the photos are JPEGs of another aspect ratio.
    if photos:
        write_imagenet_photos(tmp_path, n_train=12, classes=3, size=(120, 90))
    else:
        write_imagefolder(tmp_path)
    batches = both_loaders(tmp_path, batch_size=4, eval_batch_size=4)
    for split in (0, 1):
        pil, gpu = batches["pil"][split], batches["gpu"][split]
        assert len(pil) == len(gpu) > 0
        for (a, ya), (b, yb) in zip(pil, gpu, strict=True):
            assert torch.equal(ya, yb) and a.shape == b.shape == (len(ya), 3, 224, 224)
            # Same crop boxes and flips: pixels differ by at most one level (resize rounding).
            assert float((a - b).abs().max()) <= ONE_LEVEL
            assert float((a - b).abs().mean()) < 0.1 * ONE_LEVEL


def test_loader_is_checked() -> None:
    validate_data_config(DataConfig(name="imagenet", loader="gpu"))
    with pytest.raises(ConfigError, match="data.loader"):
        validate_data_config(DataConfig(name="digits", loader="gpu"))
    with pytest.raises(ConfigError, match="data.loader"):
        validate_data_config(DataConfig(name="imagenet", loader="dali"))


def test_fake_data_writes_photograph_sized_jpegs(tmp_path: Path) -> None:
    args = ["fake-data", "imagenet", "--photos", "--size", "10", "--classes", "2"]
    assert main([*args, "--root", str(tmp_path)]) == 0
    train = sorted((tmp_path / "train").rglob("*.JPEG"))
    assert len(train) == 10 and len(list((tmp_path / "train").iterdir())) == 2
    assert len(list((tmp_path / "val").rglob("*.JPEG"))) == 2
    with Image.open(train[1]) as img:
        assert img.format == "JPEG" and img.size == (500, 375)
    assert all(p.stat().st_size > 30_000 for p in train)  # photograph-like, not flat colour
