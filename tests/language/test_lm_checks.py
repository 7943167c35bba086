"""A language-model run on your own files: the tokenizer is the model's folder's unless set;
what would give silent wrong numbers (a pretrained model on byte tokens, a tokenizer larger than
the model's vocabulary) and folders without their files are config errors naming the field,
before anything is computed or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.config.parse import config_from_dict
from benchmark.core.errors import ConfigError
from benchmark.models import build_model
from benchmark.training.lm_checks import check_lm_files
from benchmark.training.validation import validate


def write_tokenizer(folder: Path, size: int) -> None:
    """A word-level tokenizer of ``size`` ids (the tokenizers library, no download)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(folder)


def write_model(folder: Path, vocab: int = 256) -> None:
    build_model("opt_tiny", vocab, (1, 1, 32)).save_pretrained(folder)


def cfg_of(model: str, tokenizer: str, store: Path | None = None):
    data = {"name": "pydoc", "max_length": 32, "tokenizer": tokenizer, "eval_batch_size": 64}
    cfg = config_from_dict(
        {
            "data": data,
            "model": {"name": "causal_lm", "pretrained": model},
            "method": {"name": "wanda", "sparsity": 0.5, "calibration_samples": 4},
            "optim": {"name": "adamw", "weight_decay": 0.0},
            "runtime": {"device": "cpu", "threads": 1},
            "logging": {"progress": False},
            "output": {"dir": str(store or "results/runs")},
        }
    )
    validate(cfg)
    return cfg


def test_pretrained_model_without_its_tokenizer_is_refused(tmp_path: Path) -> None:
    write_model(tmp_path / "opt")
    with pytest.raises(ConfigError) as err:
        check_lm_files(cfg_of(str(tmp_path / "opt"), ""))  # unset: the model's folder, no files
    assert err.value.field == "data.tokenizer" and "bytes" in str(err.value)
    assert "model.pretrained" in str(err.value)
    cfg_of(str(tmp_path / "opt"), "bytes")  # a byte model asks for bytes by name


def test_the_tokenizer_defaults_to_the_model_s_folder(tmp_path: Path) -> None:
    folder = tmp_path / "opt"
    write_model(folder, vocab=300)
    write_tokenizer(folder, 300)
    unset = cfg_of(str(folder), "")
    assert unset.data.tokenizer == str(folder)
    # The same run as with the folder written out (its id too), not a run on bytes.
    assert unset.run_id == cfg_of(str(folder), str(folder)).run_id
    check_lm_files(unset)  # its files are found there
    assert cfg_of(str(folder), "bytes").run_id != unset.run_id


def test_tokenizer_larger_than_the_vocabulary_names_both_sizes(tmp_path: Path) -> None:
    write_model(tmp_path / "opt", vocab=256)
    write_tokenizer(tmp_path / "tok", 300)
    with pytest.raises(ConfigError) as err:
        check_lm_files(cfg_of(str(tmp_path / "opt"), str(tmp_path / "tok")))
    assert err.value.field == "data.tokenizer"
    assert "300 ids" in str(err.value) and "vocab_size 256" in str(err.value)
    write_tokenizer(tmp_path / "small", 200)
    check_lm_files(cfg_of(str(tmp_path / "opt"), str(tmp_path / "small")))  # fits


def test_folders_without_their_files_are_named(tmp_path: Path) -> None:
    write_model(tmp_path / "opt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError) as err:
        check_lm_files(cfg_of(str(tmp_path / "opt"), str(tmp_path / "empty")))
    assert err.value.field == "data.tokenizer" and "tokenizer.json" in str(err.value)
    write_tokenizer(tmp_path / "tok", 100)
    with pytest.raises(ConfigError) as err:  # a model folder without config.json
        check_lm_files(cfg_of(str(tmp_path / "tok"), str(tmp_path / "tok")))
    assert err.value.field == "model.pretrained" and "config.json" in str(err.value)


def test_run_refuses_a_tokenizer_that_does_not_fit_before_writing_anything(
    tmp_path: Path,
) -> None:
    from benchmark.training.runner import execute

    write_model(tmp_path / "opt", vocab=256)
    write_tokenizer(tmp_path / "tok", 300)
    store = tmp_path / "store"
    with pytest.raises(ConfigError, match="vocab_size 256"):
        execute(cfg_of(str(tmp_path / "opt"), str(tmp_path / "tok"), store))
    assert not store.exists()  # no failed record, not even the store's folder
