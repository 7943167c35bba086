"""The files a data set's loader reads are checked before any compute, without reading them:
absent in an empty folder (each named), present once the stand-ins that the loaders read are
written."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from benchmark.config.run import DataConfig
from benchmark.core.errors import DatasetError
from benchmark.data.fakedata import WRITERS
from benchmark.data.language import C4_SHARD, WIKITEXT_RAW
from benchmark.data.presence import RULES, check_data_files, missing_files


def _write_wikitext2(root: Path) -> None:
    (root / "wikitext-2-raw").mkdir(parents=True)
    for name in WIKITEXT_RAW.values():
        (root / "wikitext-2-raw" / name).write_text(" = A = \n")
    with gzip.open(root / C4_SHARD, "wt") as f:
        f.write('{"text": "a document"}\n')


@pytest.mark.parametrize("name", sorted(RULES))
def test_missing_files_are_named_and_the_stand_ins_pass(name: str, tmp_path: Path) -> None:
    cfg = DataConfig(name=name, root=str(tmp_path))
    missing = missing_files(cfg)
    assert missing and all(str(tmp_path) in m for m in missing)
    with pytest.raises(DatasetError, match="files under data.root"):
        check_data_files(cfg)
    if name == "wikitext2":
        _write_wikitext2(tmp_path)
    elif name == "cifar100":
        WRITERS[name](tmp_path, n_train=4, n_test=2)
    elif name == "cifar10":
        WRITERS[name](tmp_path, per_batch=2, n_test=2)
    else:
        WRITERS[name](tmp_path)
    assert missing_files(cfg) == []


def test_embedded_data_and_downloads_need_no_files(tmp_path: Path) -> None:
    assert missing_files(DataConfig(name="digits", root=str(tmp_path))) == []
    assert missing_files(DataConfig(name="cifar10", root=str(tmp_path), download=True)) == []
