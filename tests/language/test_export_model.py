"""``prunebench export-model``: a finished language-model run becomes a save_pretrained folder
that transformers loads on its own and that gives the recorded perplexity; bad arguments are
refused by name before anything is read or written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from fake_runs import finish
from helpers import tiny_lm_config

from benchmark.cli import main
from benchmark.config.parse import config_to_dict
from benchmark.core.files import load_checkpoint
from benchmark.data.language import join_rows, pydoc_topics
from benchmark.store.results import Store
from benchmark.training.runner import execute
from benchmark.training.validation import load_config


def reloaded_perplexity(folder: Path, length: int) -> float:
    """The pydoc test perplexity of the exported folder, by transformers alone: its model and
    tokenizer, the text in non-overlapping windows, exp of the mean window NLL."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = torch.tensor(tokenizer(join_rows(pydoc_topics()["test"])).input_ids)
    windows = ids[: len(ids) // length * length].view(-1, length)
    with torch.no_grad():
        logits = model(input_ids=windows).logits[:, :-1].float()
    nll = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), windows[:, 1:], reduction="none"
    )
    return math.exp(nll.mean(dim=1).double().mean())


@pytest.mark.parametrize(
    ("dtype", "method", "tolerance"),
    [
        ("float32", {"name": "sparsegpt", "retrain": "perp", "head": "lora"}, 1e-6),
        # The tiny model's rotary frequencies were cast to bfloat16 in the run; transformers
        # keeps them in float32: a last-digit difference.
        ("bfloat16", {"name": "wanda", "pattern": "2:4"}, 1e-4),
    ],
)
def test_exported_folder_loads_with_transformers_and_gives_the_recorded_perplexity(
    tmp_path: Path, capsys, dtype: str, method: dict, tolerance: float
) -> None:
    store = tmp_path / "runs"
    cfg = tiny_lm_config(
        data={"epoch_iters": 2},
        model={"dtype": dtype},
        method={"calibration_samples": 4, **method},
        output={"dir": str(store)},
    )
    record = execute(cfg)
    folder = tmp_path / "export" / "pruned"
    assert main(["export-model", cfg.run_id, str(folder), "--store", str(store)]) == 0
    assert str(folder) in capsys.readouterr().out
    assert {"config.json", "model.safetensors", "tokenizer.json", "prunebench_run.json"} <= {
        p.name for p in folder.iterdir()
    }
    assert not [p for p in folder.parent.iterdir() if p != folder]  # no staging folder left
    ppl = reloaded_perplexity(folder, cfg.data.max_length)
    assert ppl == pytest.approx(record["metrics"]["test"]["ppl"], rel=tolerance)
    from safetensors.torch import load_file

    saved = load_file(folder / "model.safetensors")
    stored = load_checkpoint(Store(store).weights_path(cfg.run_id))
    for key, value in saved.items():  # the final weights as stored, in the run's precision
        assert torch.equal(value, stored[key]) and value.dtype == getattr(torch, dtype)
    pruned = [v for k, v in saved.items() if "layers" in k and k.endswith("proj.weight")]
    assert sum(int((v == 0).sum()) for v in pruned) / sum(v.numel() for v in pruned) == 0.5
    assert json.loads((folder / "prunebench_run.json").read_text())["run_id"] == cfg.run_id


def test_export_model_refuses_bad_arguments_before_any_work(tmp_path: Path, capsys) -> None:
    store = tmp_path / "runs"
    lm = tiny_lm_config(method={"name": "wanda"}, output={"dir": str(store)})
    finish(store, lm, val=0.0, test=0.0)  # finished, but its weights were never written
    digits = load_config(None, [f"output.dir={str(store)!r}"])
    finish(store, digits, val=0.9, test=0.9)
    failed = {"run_id": "wanda-failed", "status": "failed", "config": config_to_dict(lm)}
    Store(store).write(failed)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    cases = [
        (["nope", str(tmp_path / "a")], "RUN_ID", "the id of a finished run"),
        (["wanda-failed", str(tmp_path / "a")], "RUN_ID", "failed, not finished"),
        ([digits.run_id, str(tmp_path / "a")], "RUN_ID", "model.name one of causal_lm"),
        ([lm.run_id, str(tmp_path / "a")], "RUN_ID", "final weights are kept"),
        ([lm.run_id, str(full)], "FOLDER", "a new or empty folder"),
        ([lm.run_id, str(full / "keep.txt")], "FOLDER", "is a file"),
    ]
    for args, field, allowed in cases:
        assert main(["export-model", *args, "--store", str(store)]) == 2
        err = capsys.readouterr().err
        assert f"{field} = " in err and allowed in err, err
    assert not (tmp_path / "a").exists()
    assert [p.name for p in full.iterdir()] == ["keep.txt"]
    assert (full / "keep.txt").read_text() == "mine"
