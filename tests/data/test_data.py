"""Tests for benchmark.data: every dataset built offline from bundled or synthetic files."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmark.config.run import DataConfig
from benchmark.core.errors import ConfigError, DatasetError
from benchmark.data.augment import horizontal_flip, random_crop, rotate
from benchmark.data.base import DATASETS, DataSource, build_dataset, validate_data_config
from benchmark.data.classification import (
    CIFAR10_MEAN,
    CIFAR10_STD,
    CIFAR100_MEAN,
    CIFAR100_STD,
    TensorSource,
)
from benchmark.data.fakedata import write_cifar10, write_cifar100, write_imagefolder
from benchmark.data.imagenet import IMAGENET_MEAN, IMAGENET_STD
from benchmark.data.seeding import stratified_split

CPU = torch.device("cpu")


# --------------------------------------------------------------------------- fixtures


def cfg_for(name: str, root: Path | str = "data", **overrides: object) -> DataConfig:
    """A DataConfig for tests: small batches, no md5 check, no worker processes."""
    base = {
        "name": name,
        "root": str(root),
        "check_integrity": False,
        "batch_size": 16,
        "eval_batch_size": 32,
        "workers": 0,
    }
    base.update(overrides)
    return DataConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def cifar10_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("cifar10")
    return root, write_cifar10(root)


@pytest.fixture(scope="module")
def cifar10(cifar10_root: tuple[Path, dict]) -> DataSource:
    return build_dataset(cfg_for("cifar10", cifar10_root[0]), CPU)


@pytest.fixture(scope="module")
def digits() -> DataSource:
    return build_dataset(cfg_for("digits", batch_size=64, eval_batch_size=500), CPU)


def collect(batches) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate an iterator of (inputs, labels) batches."""
    xs, ys = zip(*batches, strict=True)
    return torch.cat(xs), torch.cat(ys)


def unaugmented(source: TensorSource) -> TensorSource:
    """A shallow copy of ``source`` with augmentation switched off (same data and order)."""
    plain = object.__new__(type(source))
    plain.__dict__.update(source.__dict__)
    plain.augment = None
    return plain


# --------------------------------------------------------------------------- registry / config


def test_registry_has_the_papers_datasets() -> None:
    # The paper's, and the language-model track's (WikiText-2 with C4; CPython's documentation).
    expected = ["cifar10", "cifar100", "cityscapes", "coco", "digits", "imagenet", "pydoc"]
    expected += ["wikitext2", "wmt16"]
    assert DATASETS.names() == expected


def test_unknown_name_names_the_field_and_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        build_dataset(cfg_for("mnist"), CPU)
    assert info.value.field == "data.name"
    assert "data.name" in str(info.value) and "'cifar10'" in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "mnist"),
        ("batch_size", 0),
        ("batch_size", -3),
        ("batch_size", True),
        ("batch_size", 1.5),
        ("eval_batch_size", 0),
        ("val_fraction", 0.0),
        ("val_fraction", 1.0),
        ("val_fraction", -0.1),
        ("val_fraction", "0.1"),
        ("workers", -1),
        ("split_seed", "zero"),
        ("check_integrity", "yes"),
    ],
)
def test_bad_values_raise_config_error_naming_the_field(field: str, value: object) -> None:
    cfg = dataclasses.replace(cfg_for("digits"), **{field: value})
    with pytest.raises(ConfigError) as info:
        validate_data_config(cfg)
    assert info.value.field == f"data.{field}"
    assert f"data.{field}" in str(info.value)


def test_imagenet_cannot_be_downloaded() -> None:
    with pytest.raises(ConfigError, match=r"data\.download"):
        validate_data_config(cfg_for("imagenet", download=True))


def test_defaults_and_good_values_pass_validation() -> None:
    validate_data_config(DataConfig())
    for name in DATASETS.names():
        validate_data_config(cfg_for(name, val_fraction=0.5, workers=0, batch_size=1))


def test_build_validates_before_touching_files(tmp_path: Path) -> None:
    # An empty root would fail on missing files; the config error must come first.
    with pytest.raises(ConfigError, match=r"data\.batch_size"):
        build_dataset(cfg_for("cifar10", tmp_path, batch_size=0), CPU)


# --------------------------------------------------------------------------- split


def test_stratified_split_sizes_and_class_balance() -> None:
    labels = torch.tensor([0] * 50 + [1] * 30 + [2] * 17 + [3] * 3)
    train, val = stratified_split(labels, 0.1, split_seed=0)
    assert len(val) == 10 and len(train) == 90
    assert set(train.tolist()).isdisjoint(val.tolist())
    assert sorted(train.tolist() + val.tolist()) == list(range(100))
    counts = torch.bincount(labels[val], minlength=4).tolist()
    exact = [5.0, 3.0, 1.7, 0.3]
    assert all(math.floor(e) <= c <= math.ceil(e) for c, e in zip(counts, exact, strict=True))


def test_stratified_split_depends_only_on_split_seed() -> None:
    labels = torch.arange(200) % 7
    a = stratified_split(labels, 0.2, split_seed=3)
    b = stratified_split(labels, 0.2, split_seed=3)
    c = stratified_split(labels, 0.2, split_seed=4)
    assert torch.equal(a[1], b[1]) and torch.equal(a[0], b[0])
    assert not torch.equal(a[1], c[1])
    assert torch.bincount(labels[c[1]]).tolist() == torch.bincount(labels[a[1]]).tolist()


def test_stratified_split_keeps_one_sample_on_each_side() -> None:
    train, val = stratified_split(torch.tensor([0, 1]), 0.01, split_seed=0)
    assert len(train) == 1 and len(val) == 1


# --------------------------------------------------------------------------- digits


def test_digits_sizes_shapes_and_batches(digits: DataSource) -> None:
    assert (digits.name, digits.num_classes, digits.input_shape) == ("digits", 10, (1, 8, 8))
    assert digits.num_train + digits.num_val == 1437
    assert (digits.num_val, digits.num_train, digits.num_test) == (144, 1293, 360)
    assert digits.iters_per_epoch() == math.ceil(1293 / 64) == 21
    sizes = [len(y) for _, y in digits.train_batches(epoch=0, seed=0)]
    assert len(sizes) == 21 and sizes[:-1] == [64] * 20 and sizes[-1] == 1293 - 20 * 64
    x, y = next(digits.train_batches(epoch=0, seed=0))
    assert x.dtype == torch.float32 and y.dtype == torch.int64 and x.shape == (64, 1, 8, 8)
    assert digits.example_batch().shape == (64, 1, 8, 8)
    _, test_y = collect(digits.eval_batches("test"))
    assert sorted(set(test_y.tolist())) == list(range(10))


def test_digits_splits_are_stratified(digits: DataSource) -> None:
    _, train_y = collect(digits.eval_batches("train"))
    _, val_y = collect(digits.eval_batches("val"))
    _, test_y = collect(digits.eval_batches("test"))
    full = torch.bincount(torch.cat([train_y, val_y]), minlength=10).double()
    val_counts = torch.bincount(val_y, minlength=10).double()
    assert torch.all((val_counts - 0.1 * full).abs() < 1.0)
    # The fixed 20% test split is stratified over the whole 1797-image set.
    test_share = torch.bincount(test_y, minlength=10).double() / (full + torch.bincount(test_y))
    assert torch.all((test_share - 0.2).abs() < 0.02)


def test_digits_normalised_with_training_statistics(digits: DataSource) -> None:
    train_x, _ = collect(digits.eval_batches("train"))
    assert abs(train_x.mean().item()) < 1e-5 and abs(train_x.std().item() - 1.0) < 1e-5
    test_x, _ = collect(digits.eval_batches("test"))
    assert abs(test_x.mean().item()) < 0.1 and test_x.std().item() == pytest.approx(1.0, abs=0.1)
    # Training batches are only a shuffle: the same inputs as the eval view of the train split.
    shuffled, _ = collect(digits.train_batches(epoch=2, seed=5))
    assert shuffled.shape == train_x.shape
    assert torch.allclose(shuffled.sum(0), train_x.sum(0), atol=1e-3)
    assert not torch.equal(shuffled, train_x)


# --------------------------------------------------------------------------- CIFAR


def test_cifar10_loads_tiny_files(cifar10: DataSource, cifar10_root: tuple[Path, dict]) -> None:
    arrays = cifar10_root[1]
    assert (cifar10.num_classes, cifar10.input_shape) == (10, (3, 32, 32))
    assert (cifar10.num_train, cifar10.num_val, cifar10.num_test) == (90, 10, 20)
    assert cifar10.iters_per_epoch() == 6
    _, val_y = collect(cifar10.eval_batches("val"))
    assert sorted(val_y.tolist()) == list(range(10))  # one per class: stratified
    test_x, test_y = collect(cifar10.eval_batches("test"))
    assert test_x.shape == (20, 3, 32, 32) and test_y.tolist() == arrays["test_y"].tolist()
    assert cifar10.example_batch().shape == (16, 3, 32, 32)


def test_cifar10_eval_normalisation_matches_constants(cifar10: DataSource, cifar10_root) -> None:
    raw = cifar10_root[1]["test_x"].reshape(-1, 3, 32, 32).astype(np.float64) / 255
    expected = (raw.mean(axis=(0, 2, 3)) - np.array(CIFAR10_MEAN)) / np.array(CIFAR10_STD)
    test_x, _ = collect(cifar10.eval_batches("test"))
    got = test_x.double().mean(dim=(0, 2, 3)).numpy()
    assert np.allclose(got, expected, atol=1e-5)
    # The synthetic channels have different means, so a channel mix-up would be caught.
    assert expected[2] - expected[0] > 1.0
    # Pixel-exact: the first image equals (x / 255 - mean) / std.
    first = torch.from_numpy(raw[0]).float()
    mean, std = torch.tensor(CIFAR10_MEAN)[:, None, None], torch.tensor(CIFAR10_STD)[:, None, None]
    assert torch.allclose(test_x[0], (first - mean) / std, atol=1e-5)


def test_cifar100_loads_tiny_files(tmp_path: Path) -> None:
    arrays = write_cifar100(tmp_path)
    source = build_dataset(cfg_for("cifar100", tmp_path), CPU)
    assert (source.num_classes, source.input_shape) == (100, (3, 32, 32))
    assert (source.num_train, source.num_val, source.num_test) == (180, 20, 100)
    train_x, train_y = collect(source.eval_batches("train"))
    _, val_y = collect(source.eval_batches("val"))
    assert sorted(train_y.tolist() + val_y.tolist()) == sorted(arrays["train_y"].tolist())
    assert len(set(val_y.tolist())) == 20  # no class gives two validation samples
    raw = arrays["test_x"].reshape(-1, 3, 32, 32).astype(np.float64) / 255
    expected = (raw.mean(axis=(0, 2, 3)) - np.array(CIFAR100_MEAN)) / np.array(CIFAR100_STD)
    test_x, _ = collect(source.eval_batches("test"))
    assert np.allclose(test_x.double().mean(dim=(0, 2, 3)).numpy(), expected, atol=1e-5)
    # Rotation on top of crop/flip still yields normalised 32x32 batches that differ.
    aug_x, _ = collect(source.train_batches(epoch=0, seed=0))
    plain_x, _ = collect(unaugmented(source).train_batches(epoch=0, seed=0))
    assert aug_x.shape == plain_x.shape == (180, 3, 32, 32)
    assert (aug_x != plain_x).flatten(1).any(1).float().mean() > 0.9


@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
def test_check_integrity_rejects_files_with_wrong_md5(tmp_path: Path, name: str) -> None:
    (write_cifar10 if name == "cifar10" else write_cifar100)(tmp_path)
    with pytest.raises(DatasetError, match="check_integrity") as info:
        build_dataset(cfg_for(name, tmp_path, check_integrity=True), CPU)
    assert "md5" in str(info.value) and str(tmp_path) in str(info.value)


def test_missing_cifar_files_give_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="CIFAR-10 files under .* missing"):
        build_dataset(cfg_for("cifar10", tmp_path), CPU)


def test_cli_reports_missing_data_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmark.cli import main

    rc = main(
        [
            "run",
            "--set",
            "data.name=cifar10",
            "--set",
            f"data.root={str(tmp_path / 'none')!r}",
            "--set",
            f"output.dir={str(tmp_path / 'runs')!r}",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert err.startswith("prunebench: data error: CIFAR-10 files under") and "none" in err


# --------------------------------------------------------------------------- augmentation


def test_random_crop_offsets_shift_with_zero_padding() -> None:
    x = torch.arange(2 * 3 * 5 * 5, dtype=torch.float32).reshape(2, 3, 5, 5) + 1
    centre = random_crop(x, torch.tensor([[2, 2], [2, 2]]), pad=2)
    assert torch.equal(centre, x)
    out = random_crop(x, torch.tensor([[0, 0], [4, 3]]), pad=2)
    # Offset (0, 0): content moves down-right by 2, zeros fill the top rows / left columns.
    assert torch.equal(out[0, :, 2:, 2:], x[0, :, :3, :3])
    assert out[0, :, :2].eq(0).all() and out[0, :, :, :2].eq(0).all()
    # Offset (4, 3): up by 2 and left by 1.
    assert torch.equal(out[1, :, :3, :4], x[1, :, 2:, 1:])
    assert out[1, :, 3:].eq(0).all() and out[1, :, :, 4:].eq(0).all()


def test_flip_and_rotation_are_exact_per_image() -> None:
    x = torch.rand(3, 3, 6, 6, generator=torch.Generator().manual_seed(0))
    flipped = horizontal_flip(x, torch.tensor([True, False, True]))
    assert torch.equal(flipped[0], x[0].flip(-1)) and torch.equal(flipped[1], x[1])
    assert torch.equal(rotate(x, torch.zeros(3)), x)
    quarter = rotate(x, torch.full((3,), 90.0))
    assert any(torch.equal(quarter, torch.rot90(x, k, dims=(-2, -1))) for k in (1, -1))
    tilted = rotate(x, torch.tensor([15.0, -15.0, 30.0]))
    assert tilted.shape == x.shape and tilted[:, :, 0, 0].eq(0).all()  # corners are zero-filled


def test_cifar10_augmentation_is_a_crop_and_flip(cifar10: TensorSource) -> None:
    aug_x, aug_y = collect(cifar10.train_batches(epoch=1, seed=3))
    plain_x, plain_y = collect(unaugmented(cifar10).train_batches(epoch=1, seed=3))
    assert aug_x.shape == plain_x.shape == (90, 3, 32, 32) and torch.equal(aug_y, plain_y)
    mean = torch.tensor(CIFAR10_MEAN)[:, None, None]
    std = torch.tensor(CIFAR10_STD)[:, None, None]
    unit = plain_x * std + mean
    # All 9 x 9 offsets and both flips of every image; exactly one must match.
    matches = []
    for dy in range(9):
        for dx in range(9):
            offsets = torch.tensor([[dy, dx]]).expand(len(unit), 2)
            cropped = random_crop(unit, offsets, pad=4)
            for flip in (False, True):
                cand = (horizontal_flip(cropped, torch.full((len(unit),), flip)) - mean) / std
                hit = (cand - aug_x).abs().flatten(1).amax(1) < 1e-4
                matches.append(((dy, dx, flip), hit))
    found = torch.stack([hit for _, hit in matches]).sum(0)
    assert torch.all(found == 1)
    used = {key for key, hit in matches if hit.any()}
    assert len(used) > 20 and {f for *_, f in used} == {False, True}
    identity = dict(matches)[(4, 4, False)]
    assert identity.float().mean() < 0.2


# --------------------------------------------------------------------------- determinism


def test_same_seed_and_epoch_give_identical_batches(cifar10_root: tuple[Path, dict]) -> None:
    cfg = cfg_for("cifar10", cifar10_root[0])
    first = build_dataset(cfg, CPU)
    for epoch in range(3):  # earlier epochs ran in this source, not in the second one
        list(first.train_batches(epoch, seed=7))
    torch.manual_seed(123)
    a = list(first.train_batches(epoch=3, seed=7))
    torch.manual_seed(999)  # the global RNG must not matter
    b = list(build_dataset(cfg, CPU).train_batches(epoch=3, seed=7))
    assert len(a) == len(b) == 6
    assert all(
        torch.equal(xa, xb) and torch.equal(ya, yb) for (xa, ya), (xb, yb) in zip(a, b, strict=True)
    )


def test_other_epochs_and_seeds_give_other_batches(cifar10: DataSource) -> None:
    base, _ = collect(cifar10.train_batches(epoch=3, seed=7))
    other_epoch, _ = collect(cifar10.train_batches(epoch=4, seed=7))
    other_seed, _ = collect(cifar10.train_batches(epoch=3, seed=8))
    assert not torch.equal(base, other_epoch) and not torch.equal(base, other_seed)


def test_train_batches_leave_the_global_rng_alone(cifar10: DataSource) -> None:
    torch.manual_seed(0)
    state = torch.get_rng_state()
    list(cifar10.train_batches(epoch=0, seed=0))
    list(cifar10.eval_batches("val"))
    assert torch.equal(torch.get_rng_state(), state)


def test_training_batches_never_contain_validation_samples(cifar10: TensorSource) -> None:
    plain = unaugmented(cifar10)
    train_x, _ = collect(plain.eval_batches("train"))
    val_x, _ = collect(plain.eval_batches("val"))
    for seed in (0, 1):
        seen, _ = collect(plain.train_batches(epoch=0, seed=seed))
        # Each training sample exactly once per epoch, and no validation sample at all.
        assert torch.equal(seen.flatten(1).sort(0).values, train_x.flatten(1).sort(0).values)
        dist = torch.cdist(seen.flatten(1), val_x.flatten(1))
        assert dist.min() > 1.0


def test_validation_split_is_fixed_by_split_seed(cifar10_root: tuple[Path, dict]) -> None:
    root = cifar10_root[0]
    a = build_dataset(cfg_for("cifar10", root, split_seed=0), CPU)
    b = build_dataset(cfg_for("cifar10", root, split_seed=0), CPU)
    c = build_dataset(cfg_for("cifar10", root, split_seed=1), CPU)
    assert set(a.train_indices.tolist()).isdisjoint(a.val_indices.tolist())
    assert len(a.train_indices) + len(a.val_indices) == 100
    assert torch.equal(a.val_indices, b.val_indices)
    assert not torch.equal(a.val_indices, c.val_indices)
    labels = torch.from_numpy(cifar10_root[1]["train_y"])
    assert sorted(labels[c.val_indices].tolist()) == list(range(10))


# --------------------------------------------------------------------------- ImageNet


@pytest.fixture(scope="module")
def folder_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three class folders: 4 mixed PNG/JPEG training images each, one plain PNG test image."""
    return write_imagefolder(tmp_path_factory.mktemp("imagenet"))


def test_imagefolder_shapes_classes_and_splits(folder_root: Path) -> None:
    cfg = cfg_for("imagenet", folder_root, batch_size=4, eval_batch_size=5, val_fraction=0.25)
    source = build_dataset(cfg, CPU)
    assert (source.num_classes, source.input_shape) == (3, (3, 224, 224))
    assert (source.num_train, source.num_val, source.num_test) == (9, 3, 3)
    assert source.iters_per_epoch() == 3
    batches = list(source.train_batches(epoch=0, seed=0))
    assert [tuple(x.shape) for x, _ in batches] == [(4, 3, 224, 224)] * 2 + [(1, 3, 224, 224)]
    _, val_y = collect(source.eval_batches("val"))
    assert sorted(val_y.tolist()) == [0, 1, 2]
    test_x, test_y = collect(source.eval_batches("test"))
    assert test_x.shape == (3, 3, 224, 224) and test_y.tolist() == [0, 1, 2]
    # Uniform test images: every pixel is (colour / 255 - mean) / std after resize and crop.
    colours = torch.tensor([[40.0 * c, 100.0, 250.0 - 60 * c] for c in range(3)]) / 255
    expected = (colours - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)
    assert torch.allclose(test_x.mean(dim=(2, 3)), expected, atol=1e-5)
    assert torch.allclose(test_x.std(dim=(2, 3)), torch.zeros(3, 3), atol=1e-5)
    assert source.example_batch().shape == (3, 3, 224, 224)  # the whole tiny test set


def test_imagefolder_training_is_deterministic_per_epoch(folder_root: Path) -> None:
    cfg = cfg_for("imagenet", folder_root, batch_size=4, val_fraction=0.25)
    source = build_dataset(cfg, CPU)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    a_x, a_y = collect(source.train_batches(epoch=2, seed=1))
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(5)
    b_x, b_y = collect(build_dataset(cfg, CPU).train_batches(epoch=2, seed=1))
    assert torch.equal(a_x, b_x) and torch.equal(a_y, b_y)
    c_x, _ = collect(source.train_batches(epoch=3, seed=1))
    assert not torch.equal(a_x, c_x)
    # Random crops differ from the centre crops of the same images.
    train_x, _ = collect(source.eval_batches("train"))
    assert a_x.shape == train_x.shape
    assert not torch.allclose(a_x.sum(0), train_x.sum(0), atol=1e-2)


def test_imagefolder_batches_do_not_depend_on_the_worker_count(folder_root: Path) -> None:
    cfg = cfg_for("imagenet", folder_root, batch_size=4, val_fraction=0.25)
    inline_x, inline_y = collect(build_dataset(cfg, CPU).train_batches(epoch=1, seed=2))
    workers = dataclasses.replace(cfg, workers=2)
    pooled_x, pooled_y = collect(build_dataset(workers, CPU).train_batches(epoch=1, seed=2))
    assert torch.equal(inline_x, pooled_x) and torch.equal(inline_y, pooled_y)


def test_missing_image_folder_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="train"):
        build_dataset(cfg_for("imagenet", tmp_path), CPU)
