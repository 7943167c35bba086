"""Whether a dataset's files are where a run will read them, checked without reading them.

A run finds missing files only when it builds its data, after its store folder and lock exist;
``reproduce`` and ``submit`` ask here first, for every data section of their plan, so that a
plan without its data stops before its first run with the missing paths named. Each rule looks
for the paths its loader opens (the names are the loaders' own); embedded data sets and data
sets set to download need nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchmark.config.run import DataConfig
from benchmark.core.errors import DatasetError


def _cifar(cfg: DataConfig) -> list[str]:
    from benchmark.data.classification import cifar_classes

    cls = cifar_classes(cfg.name)[0]
    folder = Path(cfg.root) / cls.base_folder
    names = [name for name, _ in cls.train_list + cls.test_list] + [cls.meta["filename"]]
    return [str(folder / n) for n in names if not (folder / n).is_file()]


def _imagenet(cfg: DataConfig) -> list[str]:
    root = Path(cfg.root)
    return [f"{root / s}/ (class folders)" for s in ("train", "val") if not (root / s).is_dir()]


def _coco(cfg: DataConfig) -> list[str]:
    root = Path(cfg.root)
    missing = []
    for split in ("train", "val"):
        ann = root / "annotations" / f"instances_{split}2017.json"
        missing += [str(ann)] if not ann.is_file() else []
        missing += [f"{root / f'{split}2017'}/"] if not (root / f"{split}2017").is_dir() else []
    return missing


def _cityscapes(cfg: DataConfig) -> list[str]:
    root = Path(cfg.root)
    kinds, splits = ("leftImg8bit", "gtFine"), ("train", "val")
    folders = [root / kind / split for kind in kinds for split in splits]
    return [f"{f}/" for f in folders if not f.is_dir()]


def _wmt16(cfg: DataConfig) -> list[str]:
    from benchmark.data.translation import HF_SPLITS, SOURCE, TARGET

    root = Path(cfg.root)
    missing = [] if (root / "spiece.model").is_file() else [str(root / "spiece.model")]
    for split in HF_SPLITS.values():
        raw = [root / f"{split}.{SOURCE}", root / f"{split}.{TARGET}"]
        if not any((root / "de-en").glob(f"{split}-*.parquet")) and not all(
            p.is_file() for p in raw
        ):
            missing.append(f"{root / 'de-en' / split}-*.parquet (or {raw[0].name}, {raw[1].name})")
    return missing


def _wikitext2(cfg: DataConfig) -> list[str]:
    from benchmark.data.language import C4_SHARD, WIKITEXT_PARQUET, WIKITEXT_RAW

    root = Path(cfg.root)
    missing = []
    for split, raw in WIKITEXT_RAW.items():
        parquet = root / "wikitext-2-raw-v1"
        if not any(parquet.glob(f"{WIKITEXT_PARQUET[split]}-*.parquet")):
            if not (root / "wikitext-2-raw" / raw).is_file():
                missing.append(f"{root / 'wikitext-2-raw' / raw} (or its parquet files)")
    if not any((p / C4_SHARD).is_file() for p in (root, root / "en")):
        missing.append(str(root / C4_SHARD))
    return missing


# The data sets' names as their loaders' errors write them.
TITLES = {"cifar10": "CIFAR-10", "cifar100": "CIFAR-100", "imagenet": "ImageNet", "coco": "COCO",
          "cityscapes": "CityScapes", "wmt16": "WMT16", "wikitext2": "WikiText-2"}  # fmt: skip


RULES: dict[str, Callable[[DataConfig], list[str]]] = {
    "cifar10": _cifar,
    "cifar100": _cifar,
    "imagenet": _imagenet,
    "coco": _coco,
    "cityscapes": _cityscapes,
    "wmt16": _wmt16,
    "wikitext2": _wikitext2,
}


def missing_files(cfg: DataConfig) -> list[str]:
    """The paths a run of ``cfg`` would read that are not there (none for embedded data and
    data sets set to download)."""
    rule = RULES.get(cfg.name)
    if rule is None or cfg.download:
        return []
    return rule(cfg)


def check_data_files(cfg: DataConfig) -> None:
    """Raise a DatasetError naming the missing paths unless every file ``cfg`` reads exists."""
    missing = missing_files(cfg)
    if missing:
        more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
        shown = ", ".join(missing[:4]) + more
        raise DatasetError(
            f"{TITLES[cfg.name]} files under data.root = {cfg.root!r} are missing: {shown} (point "
            "data.root, or reproduce --data-root, at the folder that holds them; `prunebench "
            "fake-data` writes small stand-ins)"
        )
