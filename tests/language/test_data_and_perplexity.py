"""Language-model data in the real on-disk formats, local model folders and the perplexity
protocol, checked against an independent computation on a tiny model."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import torch

from benchmark.config.parse import config_from_dict
from benchmark.core.errors import ConfigError, DatasetError
from benchmark.data import build_dataset
from benchmark.data.language import C4_SHARD, join_rows, wikitext_rows
from benchmark.models import build_model
from benchmark.tasks import get_task
from benchmark.training.validation import validate

WIKI_LINES = [" \n", " = Valkyria Chronicles III = \n", " \n", " Senjo no Valkyria 3 . \n"]


def write_wikitext(root: Path, repeat: int = 40) -> None:
    """The raw release's layout: wikitext-2-raw/wiki.{train,valid,test}.raw."""
    folder = root / "wikitext-2-raw"
    folder.mkdir(parents=True)
    for name in ("wiki.train.raw", "wiki.valid.raw", "wiki.test.raw"):
        (folder / name).write_text("".join(WIKI_LINES * repeat), encoding="utf-8")


def write_c4(root: Path, docs: int = 20) -> None:
    """A C4 shard: gzip, one JSON document per line with text/timestamp/url."""
    with gzip.open(root / C4_SHARD, "wt", encoding="utf-8") as f:
        for i in range(docs):
            record = {"text": f"document {i} " + "words " * (30 + i), "timestamp": "", "url": ""}
            f.write(json.dumps(record) + "\n")


def lm_config(root: Path | str = "data", **data: object):
    cfg = config_from_dict(
        {
            "data": {"name": "wikitext2", "root": str(root), "max_length": 32, **data},
            "model": {"name": "opt_tiny"},
            "runtime": {"device": "cpu"},
        }
    )
    validate(cfg)
    return cfg


def test_wikitext_rows_as_the_hf_dataset_holds_them(tmp_path: Path) -> None:
    write_wikitext(tmp_path, repeat=1)
    rows = wikitext_rows(tmp_path, "test")
    # One row per line, newline kept, blank lines empty; joined with "\n\n" as the papers do.
    assert rows == ["", " = Valkyria Chronicles III = \n", "", " Senjo no Valkyria 3 . \n"]
    assert join_rows(rows).startswith("\n\n = Valkyria")


def test_wikitext_and_c4_source_windows_and_calibration(tmp_path: Path) -> None:
    write_wikitext(tmp_path)
    write_c4(tmp_path)
    data = build_dataset(lm_config(tmp_path).data, torch.device("cpu"))
    text = join_rows(wikitext_rows(tmp_path, "test")).encode()
    windows = torch.cat([x for x, _ in data.eval_batches("test")])
    assert windows.shape == (len(text) // 32, 32)
    assert bytes(windows.flatten().tolist()) == text[: windows.numel()]
    first = data.calibration(5, seed=3)
    assert torch.equal(first, data.calibration(5, seed=3))
    assert not torch.equal(first, data.calibration(5, seed=4))
    docs = [f"document {i} " + "words " * (30 + i) for i in range(20)]
    assert all(any(bytes(w.tolist()).decode() in d for d in docs) for w in first)


def test_missing_files_name_the_file(tmp_path: Path) -> None:
    write_wikitext(tmp_path)
    with pytest.raises(DatasetError, match=C4_SHARD):
        build_dataset(lm_config(tmp_path).data, torch.device("cpu"))
    with pytest.raises(DatasetError, match="wiki.train.raw"):
        build_dataset(lm_config(tmp_path / "nowhere").data, torch.device("cpu"))


def test_perplexity_matches_an_independent_computation() -> None:
    torch.manual_seed(0)
    cfg = config_from_dict(
        {
            "data": {"name": "pydoc", "max_length": 48, "eval_batch_size": 7},
            "model": {"name": "llama_tiny"},
        }
    )
    data = build_dataset(cfg.data, torch.device("cpu"))
    model = build_model("llama_tiny", data.num_classes, data.input_shape)
    got = get_task("causal_lm", cfg).evaluate(model, data, "test")
    # Independently: the test text's bytes, whole windows of 48, HF's own shifted loss per window.
    from benchmark.data.language import pydoc_topics

    ids = torch.tensor(list(join_rows(pydoc_topics()["test"]).encode()))
    n = len(ids) // 48
    nlls = []
    model.eval()
    with torch.no_grad():
        for w in ids[: n * 48].view(n, 48)[:, None]:
            nlls.append(model(input_ids=w, labels=w).loss.double())
    expected = math.exp(torch.stack(nlls).mean().item())
    assert got["ppl"] == pytest.approx(expected, rel=1e-5)
    assert got["neg_ppl"] == -got["ppl"]


def test_local_folder_loads_and_bad_input_is_named_before_compute(tmp_path: Path) -> None:
    model = build_model("opt_tiny", 256, (1, 1, 32))
    folder = tmp_path / "opt"
    model.save_pretrained(folder)
    cfg = config_from_dict(
        {
            # A model trained on bytes: its tokenizer is asked for by name.
            "data": {"name": "pydoc", "max_length": 32, "tokenizer": "bytes"},
            "model": {"name": "causal_lm", "pretrained": str(folder)},
        }
    )
    validate(cfg)
    loaded = build_model("causal_lm", 256, (1, 1, 32), pretrained=str(folder))
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True)
    )
    missing = str(tmp_path / "no-such-model")
    with pytest.raises(ConfigError, match="no-such-model") as err:
        validate(
            config_from_dict(
                {
                    "data": {"name": "pydoc", "tokenizer": "bytes"},
                    "model": {"name": "causal_lm", "pretrained": missing},
                }
            )
        )
    assert err.value.field == "model.pretrained"
    with pytest.raises(ConfigError) as err:
        validate(
            config_from_dict(
                {"data": {"name": "pydoc", "max_length": 4096}, "model": {"name": "opt_tiny"}}
            )
        )
    assert err.value.field == "data.max_length" and "512" in str(err.value)
