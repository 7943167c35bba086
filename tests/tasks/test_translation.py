"""Translation: T5 from transformers, WMT16 files with a SentencePiece model, BLEU, training."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.cli import main
from benchmark.config.run import DataConfig
from benchmark.core.errors import ConfigError, DatasetError
from benchmark.data.base import build_dataset
from benchmark.data.fakedata import write_wmt16
from benchmark.data.translation import EOS_ID, MAX_LENGTH, encode, model_vocab_size
from benchmark.models.registry import build_model
from benchmark.tasks.translation import bleu
from benchmark.training.runner import execute

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def wmt_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_wmt16(tmp_path_factory.mktemp("wmt16"))


def wmt_config(store: Path, root: Path, *overrides: str):
    """A tiny T5 run on the stand-in: batches of 16, one epoch per pass."""
    return tiny_config(
        store,
        "data.name=wmt16",
        f"data.root={str(root)!r}",
        "data.batch_size=16",
        "data.eval_batch_size=8",
        "data.max_length=24",
        "runtime.device='cpu'",
        "model.name=t5_tiny",
        *overrides,
    )


@pytest.mark.slow
def test_t5_small_has_t5_smalls_parameters_and_the_papers_count_with_its_head() -> None:
    model = build_model("t5_small", model_vocab_size(32_000), (1, 1, MAX_LENGTH))
    assert model_vocab_size(32_000) == 32_128
    distinct = sum(p.numel() for p in model.parameters())
    assert distinct == 60_506_624
    # The paper's 77M counts the output projection (tied to the embedding) a second time.
    assert distinct + model.lm_head.weight.numel() == pytest.approx(77e6, rel=0.001)


def test_bleu_is_sacrebleus_corpus_score() -> None:
    refs = ["die katze sieht einen hund", "das haus ist rot"]
    assert bleu(refs, refs) == pytest.approx(100.0)
    assert bleu(["der baum", "ein auto"], refs) == pytest.approx(0.0)


def test_parquet_and_raw_text_give_the_same_batches(wmt_root: Path, tmp_path: Path) -> None:
    text_root = write_wmt16(tmp_path, parquet=False)
    a = build_dataset(DataConfig(name="wmt16", root=str(wmt_root), batch_size=16), CPU)
    b = build_dataset(DataConfig(name="wmt16", root=str(text_root), batch_size=16), CPU)
    assert (a.num_train, a.num_val, a.num_test) == (64, 8, 8) and a.task == "translation"
    for (xa, ya), (xb, yb) in zip(a.train_batches(0, 3), b.train_batches(0, 3), strict=True):
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    x, y = next(a.eval_batches("test"))
    assert a.decode(y) == a.references["test"][: len(y)]  # targets are the references
    assert (x[:, 0] != 0).all() and (y == EOS_ID).sum(1).tolist() == [1] * len(y)


def test_sequences_are_cut_to_128_tokens_ending_with_eos(wmt_root: Path) -> None:
    data = build_dataset(DataConfig(name="wmt16", root=str(wmt_root)), CPU)
    (ids,) = encode(data.tokenizer, ["die katze " * 200])
    assert len(ids) == MAX_LENGTH and ids[-1] == EOS_ID


def test_a_partial_epoch_is_a_disjoint_part_of_one_shuffled_pass(wmt_root: Path) -> None:
    cfg = DataConfig(name="wmt16", root=str(wmt_root), batch_size=8, epoch_fraction=0.25)
    data = build_dataset(cfg, CPU)
    assert data.iters_per_epoch() == 2

    def rows(batches) -> list[tuple[int, ...]]:
        return [tuple(t for t in r.tolist() if t) for x, _ in batches for r in x]

    parts = [rows(data.train_batches(e, 0)) for e in range(4)]
    assert [len(p) for p in parts] == [16] * 4
    assert sorted(sum(parts, [])) == sorted(rows(data.eval_batches("train")))
    assert rows(data.train_batches(4, 0)) != parts[0]  # the next pass is shuffled anew
    for bad in (0.3, 0.0, 1.5):
        with pytest.raises(ConfigError, match="data.epoch_fraction"):
            build_dataset(DataConfig(name="wmt16", root=str(wmt_root), epoch_fraction=bad), CPU)
    with pytest.raises(ConfigError, match="data.epoch_fraction"):
        build_dataset(DataConfig(name="digits", epoch_fraction=0.5), CPU)


def test_missing_files_are_one_clear_error(tmp_path: Path, wmt_root: Path, capsys) -> None:
    with pytest.raises(DatasetError, match="spiece.model"):
        build_dataset(DataConfig(name="wmt16", root=str(tmp_path)), CPU)
    (tmp_path / "spiece.model").write_bytes((wmt_root / "spiece.model").read_bytes())
    args = ["run", "--set", "data.name=wmt16", "--set", f"data.root={str(tmp_path)!r}"]
    args += ["--set", "model.name=t5_tiny", "--set", f"output.dir={str(tmp_path / 's')!r}"]
    assert main(args) == 1
    err = capsys.readouterr().err
    # Found before any compute: every split's files named at once.
    assert err.count("\n") == 1 and "WMT16 files" in err and "train.en" in err


def test_pretrained_t5_loads_from_a_save_pretrained_folder(tmp_path: Path) -> None:
    torch.manual_seed(0)
    source = build_model("t5_tiny", 256, (1, 1, MAX_LENGTH))
    source.save_pretrained(tmp_path / "t5")
    loaded = build_model("t5_tiny", 256, (1, 1, MAX_LENGTH), pretrained=str(tmp_path / "t5"))
    assert torch.equal(loaded.shared.weight, source.shared.weight)
    with pytest.raises(ConfigError, match="model.pretrained"):
        build_model("t5_tiny", 384, (1, 1, MAX_LENGTH), pretrained=str(tmp_path / "t5"))


@pytest.mark.slow
def test_pruned_t5_run_reports_bleu_and_keeps_the_embedding_dense(
    tmp_path: Path, wmt_root: Path
) -> None:
    cfg = wmt_config(tmp_path, wmt_root, "method.name=gmp", "method.sparsity=0.6")
    m = execute(cfg)["metrics"]
    assert 0.0 <= m["test"]["bleu"] <= 100.0 and 0.0 <= m["val"]["top1"] <= 1.0
    assert m["sparsity"] == pytest.approx(0.6, abs=1e-3)
    assert m["speedup"] > 1.5
    # The tied embedding/output projection is not in P.
    assert m["num_prunable"] < m["num_params"] - 256 * 32


def test_fake_data_command_writes_the_wmt16_stand_in(tmp_path: Path) -> None:
    assert main(["fake-data", "wmt16", "--root", str(tmp_path)]) == 0
    assert (tmp_path / "spiece.model").is_file()
    assert (tmp_path / "de-en" / "test-00000-of-00001.parquet").is_file()
