"""Semantic segmentation: models, mIoU, COCO/CityScapes loaders on stand-ins, training runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import tiny_config

from benchmark.cli import main
from benchmark.config.run import DataConfig
from benchmark.core.errors import ConfigError, DatasetError
from benchmark.data.base import build_dataset
from benchmark.data.fakedata import write_cityscapes, write_coco
from benchmark.data.segmentation import cityscapes_train_ids
from benchmark.models.registry import build_model
from benchmark.tasks.segmentation import confusion_matrix, mean_iou
from benchmark.training.runner import execute


def num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def coco_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_coco(tmp_path_factory.mktemp("coco"))


@pytest.fixture(scope="module")
def cityscapes_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_cityscapes(tmp_path_factory.mktemp("cityscapes"))


def seg_config(store: Path, data: str, root: Path, model: str, *overrides: str):
    """A tiny segmentation run: 24-pixel crops, batches of 2, no loader workers."""
    return tiny_config(
        store,
        f"data.name={data}",
        f"data.root={str(root)!r}",
        "data.crop_size=24",
        "data.batch_size=2",
        "data.eval_batch_size=4",
        "data.workers=0",
        "data.val_fraction=0.25",
        # CUDA's deterministic mode has no backward for bilinear upsampling: tests run on the CPU.
        "runtime.device='cpu'",
        f"model.name={model}",
        *overrides,
    )


# --------------------------------------------------------------------------- models


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "classes", "exact", "paper"),
    [("deeplabv3_resnet50", 21, 39_638_869, 40e6), ("pspnet_resnet101", 19, 67_948_390, 68e6)],
)
def test_segmentation_models_have_the_papers_parameter_counts(
    name: str, classes: int, exact: int, paper: float
) -> None:
    count = num_params(build_model(name, classes, (3, 32, 32)))
    assert count == exact
    assert count == pytest.approx(paper, rel=0.01)


@pytest.mark.parametrize("name", ["deeplabv3_tiny", "pspnet_tiny"])
def test_models_map_images_to_per_pixel_logits(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, 5, (3, 24, 24))
    out = model(torch.randn(2, 3, 24, 20))
    assert out["out"].shape == (2, 5, 24, 20)
    assert ("aux" in out) is name.startswith("pspnet")  # the aux head runs in training only
    assert set(model.eval()(torch.randn(1, 3, 24, 20))) == {"out"}


def test_pretrained_weights_load_from_a_state_dict_or_a_backbone(tmp_path: Path) -> None:
    torch.manual_seed(0)
    source = build_model("deeplabv3_tiny", 21, (3, 24, 24))
    torch.save(source.state_dict(), tmp_path / "full.pt")
    loaded = build_model("deeplabv3_tiny", 21, (3, 24, 24), pretrained=str(tmp_path / "full.pt"))
    assert all(
        torch.equal(a, b)
        for a, b in zip(source.state_dict().values(), loaded.state_dict().values(), strict=True)
    )
    # An ImageNet classifier checkpoint of the backbone network (with its fc head) also loads.
    from benchmark.models.segmentation import tiny_resnet

    resnet = tiny_resnet()
    torch.save(resnet.state_dict(), tmp_path / "backbone.pt")
    model = build_model("pspnet_tiny", 19, (3, 24, 24), pretrained=str(tmp_path / "backbone.pt"))
    assert torch.equal(model.backbone.conv1.weight, resnet.conv1.weight)
    with pytest.raises(ConfigError, match="model.pretrained"):
        build_model("pspnet_tiny", 19, (3, 24, 24), pretrained=str(tmp_path / "full.pt"))
    with pytest.raises(ConfigError, match="model.pretrained"):
        build_model("pspnet_tiny", 19, (3, 24, 24), pretrained=str(tmp_path / "missing.pt"))
    (tmp_path / "text.pt").write_text("not a checkpoint\n")
    with pytest.raises(ConfigError, match="model.pretrained.*a torch state-dict file"):
        build_model("pspnet_tiny", 19, (3, 24, 24), pretrained=str(tmp_path / "text.pt"))


def test_a_classifier_cannot_train_on_a_segmentation_dataset(tmp_path: Path, coco_root) -> None:
    with pytest.raises(ConfigError, match="model.name"):
        seg_config(tmp_path, "coco", coco_root, "resnet20")
    with pytest.raises(ConfigError, match="model.name"):
        tiny_config(tmp_path, "model.name=deeplabv3_tiny")


def test_deterministic_segmentation_on_cuda_is_refused_before_compute(tmp_path: Path) -> None:
    base = ["data.name=coco", "model.name=deeplabv3_tiny", "runtime.deterministic=true"]
    with pytest.raises(ConfigError, match="runtime.deterministic") as err:
        tiny_config(tmp_path, *base, "runtime.device=cuda")
    assert "runtime.device = 'cpu'" in str(err.value)
    # The same model deterministic on the CPU, or on CUDA without determinism, is fine.
    assert tiny_config(tmp_path, *base, "runtime.device=cpu").runtime.deterministic
    tiny_config(tmp_path, *base[:2], "runtime.deterministic=false", "runtime.device=cuda")


# --------------------------------------------------------------------------- mIoU


def test_mean_iou_ignores_unlabelled_pixels_and_absent_classes() -> None:
    target = torch.tensor([[0, 0, 1, 1, 255, 255]])
    pred = torch.tensor([[0, 1, 1, 1, 2, 0]])
    cm = confusion_matrix(pred, target, num_classes=3)
    assert cm.tolist() == [[1, 1, 0], [0, 2, 0], [0, 0, 0]]
    # class 0: 1 / (2 + 1 - 1) = 1/2; class 1: 2 / (2 + 3 - 2) = 2/3; class 2 never occurs.
    assert mean_iou(cm) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert mean_iou(confusion_matrix(target.clamp(max=1), target.clamp(max=1), 3)) == 1.0


# --------------------------------------------------------------------------- loaders


def test_coco_masks_hold_voc_classes_and_skip_empty_training_images(coco_root: Path) -> None:
    cfg = DataConfig(name="coco", root=str(coco_root), workers=0, crop_size=24, val_fraction=0.25)
    data = build_dataset(cfg, torch.device("cpu"))
    assert data.num_classes == 21 and data.task == "segmentation"
    assert data.num_train + data.num_val == 7  # 8 written, the one without VOC objects left out
    assert data.num_test == 4
    x, y = next(data.eval_batches("test"))
    assert x.shape[1] == 3 and y.dtype == torch.int64
    # The large box of the first test image is category 5 (airplane: VOC train id 1); the
    # toothbrush (category 90) in its corner is background.
    labels = set(torch.unique(y).tolist())
    assert labels <= set(range(21)) | {255} and 1 in labels
    assert y[0, 0, 0] == 0


def test_cityscapes_label_ids_map_to_the_19_train_ids() -> None:
    table = cityscapes_train_ids()
    assert (table[7], table[26], table[24], table[0], table[255]) == (0, 13, 11, 255, 255)
    assert sorted(set(table.tolist()) - {255}) == list(range(19))


def test_training_batches_are_deterministic_and_crop_sized(cityscapes_root: Path) -> None:
    cfg = DataConfig(
        name="cityscapes", root=str(cityscapes_root), workers=0, crop_size=24, batch_size=3
    )
    data = build_dataset(cfg, torch.device("cpu"))
    first = list(data.train_batches(0, 0))
    again = list(data.train_batches(0, 0))
    assert len(first) == data.iters_per_epoch() == 2  # 7 training images, last batch dropped
    assert first[0][0].shape == (3, 3, 24, 24) and first[0][1].shape == (3, 24, 24)
    assert all(torch.equal(a[1], b[1]) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0][1], next(data.train_batches(1, 0))[1])


def test_missing_or_corrupt_files_are_one_clear_error(tmp_path: Path, capsys) -> None:
    with pytest.raises(DatasetError, match="COCO files"):
        build_dataset(DataConfig(name="coco", root=str(tmp_path)), torch.device("cpu"))
    write_coco(tmp_path / "bad")
    (tmp_path / "bad" / "annotations" / "instances_train2017.json").write_text("{not json")
    with pytest.raises(DatasetError, match="cannot read the COCO annotations"):
        build_dataset(DataConfig(name="coco", root=str(tmp_path / "bad")), torch.device("cpu"))
    args = ["run", "--set", "data.name=cityscapes", "--set", f"data.root={str(tmp_path)!r}"]
    args += ["--set", "model.name=pspnet_tiny", "--set", f"output.dir={str(tmp_path / 's')!r}"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CityScapes files" in err


# --------------------------------------------------------------------------- training


@pytest.mark.slow
@pytest.mark.parametrize(
    ("data", "model"), [("coco", "deeplabv3_tiny"), ("cityscapes", "pspnet_tiny")]
)
def test_pruned_segmentation_run_reports_miou(
    tmp_path: Path, data: str, model: str, coco_root: Path, cityscapes_root: Path
) -> None:
    root = coco_root if data == "coco" else cityscapes_root
    cfg = seg_config(
        tmp_path, data, root, model, "method.name=gmp", "method.sparsity=0.8", "budget.epochs=2"
    )
    m = execute(cfg)["metrics"]
    assert 0.0 <= m["test"]["miou"] <= 1.0 and 0.0 <= m["test"]["top1"] <= 1.0
    assert m["sparsity"] == pytest.approx(0.8, abs=1e-3)
    assert m["speedup"] > 2
    # The auxiliary head of PSPNet is not prunable: it is dropped at inference.
    assert m["num_prunable"] < m["num_params"]


def test_fake_data_command_writes_segmentation_stand_ins(tmp_path: Path) -> None:
    assert main(["fake-data", "coco", "--root", str(tmp_path / "c")]) == 0
    assert main(["fake-data", "cityscapes", "--root", str(tmp_path / "s")]) == 0
    assert (tmp_path / "c" / "annotations" / "instances_val2017.json").is_file()
    masks = list((tmp_path / "s" / "gtFine" / "train").rglob("*_gtFine_labelIds.png"))
    assert masks and np.asarray(__import__("PIL.Image").Image.open(masks[0])).dtype == np.uint8
