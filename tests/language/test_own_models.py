"""Your own checkpoint in a spec: ``--model NAME=FOLDER`` plans, runs and tabulates a
language-model spec's paper-scale grid on a local folder, under that model's run ids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from benchmark.cli import main
from benchmark.core.errors import ConfigError
from benchmark.data.language import C4_SHARD
from benchmark.experiments.own_models import with_models
from benchmark.experiments.registry import get_experiment

WORDS = 200


def write_checkpoint(folder: Path, positions: int = 4096) -> None:
    """A random tiny Llama and a word-level tokenizer of ``WORDS`` ids, saved together as a
    Hub snapshot holds them."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = LlamaConfig(
        vocab_size=WORDS,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=positions,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(folder)


def words(n: int, start: int) -> str:
    return " ".join(f"w{1 + (start + 7 * i) % (WORDS - 1)}" for i in range(n))


def write_data(root: Path) -> None:
    """WikiText-2's raw files and a C4 shard, of the checkpoint's words."""
    folder = root / "wikitext-2-raw"
    folder.mkdir(parents=True)
    for name in ("wiki.train.raw", "wiki.valid.raw", "wiki.test.raw"):
        (folder / name).write_text(words(300, len(name)) + "\n", encoding="utf-8")
    with gzip.open(root / C4_SHARD, "wt", encoding="utf-8") as f:
        for i in range(3):
            f.write(json.dumps({"text": words(200, i)}) + "\n")


def test_model_flag_replaces_one_section_s_model_and_keeps_the_rest(tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "mine")
    spec = get_experiment("llm-oneshot-wikitext2")
    before = spec.runs("paper", tmp_path)
    mine = with_models(spec, [f"llama-2-7b={tmp_path / 'mine'}"], "paper")
    after = mine.runs("paper", tmp_path)
    for old, new in zip(before, after, strict=True):
        if old.section == "Llama-2-7B":
            assert new.cfg.model.pretrained == str(tmp_path / "mine")
            assert new.cfg.data.tokenizer == str(tmp_path / "mine")
            assert new.cfg.run_id != old.cfg.run_id  # the runs of that model
        else:
            assert new.cfg.run_id == old.cfg.run_id
    assert mine.published_numbers() is not None  # the paper's values stay beside it
    assert any(str(tmp_path / "mine") in note for note in mine.table_notes("paper"))


@pytest.mark.parametrize(
    ("spec", "value", "scale", "says"),
    [
        ("llm-oneshot-wikitext2", "Llama-3-8B={mine}", "paper", "Llama-2-7B (hf:"),
        ("llm-oneshot-wikitext2", "Llama-2-7B={empty}", "paper", "config.json is missing"),
        ("llm-oneshot-wikitext2", "Llama-2-7B", "paper", "NAME=FOLDER"),
        ("llm-oneshot-wikitext2", "Llama-2-7B={mine}", "smoke", "--scale paper"),
        ("appendix-ALLR-AccALLR-Comparison", "ResNet-56={mine}", "paper", "Hub models"),
    ],
)
def test_model_flag_errors_name_the_flag(tmp_path, spec, value, scale, says) -> None:
    write_checkpoint(tmp_path / "mine", positions=64)
    (tmp_path / "empty").mkdir()
    value = value.format(mine=tmp_path / "mine", empty=tmp_path / "empty")
    with pytest.raises(ConfigError) as err:
        with_models(get_experiment(spec), [value], scale)
    assert err.value.field == "--model" and says in str(err.value)


def test_a_planned_run_of_your_checkpoint_runs_and_the_table_names_the_model(
    tmp_path: Path, capsys
) -> None:
    import dataclasses

    from benchmark.config.parse import replace_section
    from benchmark.training.runner import execute

    write_checkpoint(tmp_path / "mine")
    write_data(tmp_path / "data")
    store = tmp_path / "runs"
    flag = f"Llama-2-7B={tmp_path / 'mine'}"
    mine = with_models(get_experiment("llm-oneshot-wikitext2"), [flag], "paper")
    planned = next(r.cfg for r in mine.runs("paper", store) if r.row == "Wanda")
    # The spec's run at a CPU's size: 64-token windows, 4 calibration windows.
    small = replace_section(
        planned,
        data=dataclasses.replace(
            planned.data, root=str(tmp_path / "data"), max_length=64, eval_batch_size=8
        ),
        method=dataclasses.replace(
            planned.method,
            params=dataclasses.replace(planned.method.params, calibration_samples=4),
        ),
        runtime=dataclasses.replace(planned.runtime, device="cpu", threads=1),
    )
    record = execute(small)
    assert record["status"] == "finished" and record["metrics"]["test"]["ppl"] > 1
    assert record["config"]["model"]["pretrained"] == str(tmp_path / "mine")
    assert record["config"]["model"]["dtype"] == "float16"  # as the references load models
    assert main(["table", "llm-oneshot-wikitext2", "--scale", "paper", "--store", str(store),
                 "--model", flag]) == 0  # fmt: skip
    assert f"Llama-2-7B: the model and tokenizer in {tmp_path / 'mine'}" in capsys.readouterr().out
