"""Zero-shot accuracy through lm-eval (the optional extra ``.[llm]``): a task of our own from
local files scored on the tiny Llama equals the log-likelihoods computed by hand, the shipped
smoke task loads from any folder, and a task without its data, a generation task, a model that
is no language model or a missing lm-eval are config errors before any compute."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from test_oneshot import lm_cfg

from benchmark.config.parse import replace_section
from benchmark.core.errors import ConfigError

try:
    import lm_eval
except ImportError:  # the optional extra: pip install -e '.[llm]'
    lm_eval = None
needs_lm_eval = pytest.mark.skipif(
    lm_eval is None, reason="lm-eval is not installed (pip install -e '.[llm]')"
)

DOCS = [
    {"context": "def main():\n    return ", "choices": ["None", "zebra", "12345"], "label": 0},
    {"context": "import os\nimport ", "choices": ["sys", "((((", " q"], "label": 0},
    {"context": "The list ", "choices": ["is empty.", "xqzv", "!!"], "label": 2},
    {"context": "for i in range(", "choices": ["10):", "]]]", "a b c"], "label": 0},
    {"context": "class Foo:\n    ", "choices": ["pass", "@@@@", "9"], "label": 1},
]


def write_task(folder: Path, name: str = "tiny_cloze", **overrides: str) -> Path:
    """An lm-eval task YAML and its JSON-lines data (named relative to the YAML's folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "docs.jsonl").write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
    fields = {
        "task": name,
        "dataset_path": "json",
        "output_type": "multiple_choice",
        "test_split": "test",
        "doc_to_text": '"{{context}}"',
        "doc_to_choice": '"{{choices}}"',
        "doc_to_target": "label",
        "target_delimiter": '""',
        **overrides,
    }
    text = "".join(f"{k}: {v}\n" for k, v in fields.items())
    text += "dataset_kwargs:\n  data_files:\n    test: docs.jsonl\n"
    text += "metric_list:\n  - metric: acc\n  - metric: acc_norm\nmetadata:\n  version: 2.0\n"
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def with_zero_shot(cfg, tasks: list[str]):
    return replace_section(cfg, eval=dataclasses.replace(cfg.eval, zero_shot=tasks))


def by_hand(model: torch.nn.Module) -> tuple[float, float]:
    """acc and acc_norm of DOCS: each choice's summed log-probability of its bytes after the
    context's bytes, the context's trailing spaces scored with the choice as lm-eval does
    (acc_norm: divided by the choice's length in characters)."""
    hits = norm_hits = 0
    with torch.no_grad():
        for doc in DOCS:
            text = doc["context"].rstrip(" ")
            context, spaces = list(text.encode()), doc["context"][len(text) :]
            lls = []
            for choice in doc["choices"]:
                cont = list((spaces + choice).encode())
                ids = torch.tensor([context + cont])
                logp = torch.log_softmax(model(input_ids=ids[:, :-1]).logits.float(), -1)[0]
                picks = logp[len(context) - 1 :].gather(1, torch.tensor(cont).view(-1, 1))
                lls.append(float(picks.sum()))
            hits += max(range(3), key=lambda i: lls[i]) == doc["label"]
            norms = [ll / len(c) for ll, c in zip(lls, doc["choices"], strict=True)]
            norm_hits += max(range(3), key=lambda i: norms[i]) == doc["label"]
    return hits / len(DOCS), norm_hits / len(DOCS)


@needs_lm_eval
def test_a_run_records_the_accuracy_of_a_local_task_as_computed_by_hand(tmp_path, monkeypatch):
    from benchmark.training.trainer import Trainer

    yaml = write_task(tmp_path / "tasks")
    monkeypatch.chdir(tmp_path)  # the data are found beside the YAML, not in the working folder
    cfg = with_zero_shot(lm_cfg(name="wanda", calibration_samples=8), [str(yaml)])
    trainer = Trainer(cfg)
    metrics = trainer.fit()
    assert metrics is not None
    record = metrics["zero_shot"]
    task = record["tasks"]["tiny_cloze"]
    acc, acc_norm = by_hand(trainer.model)
    assert (task["acc"], task["acc_norm"]) == (pytest.approx(acc), pytest.approx(acc_norm))
    assert task["examples"] == len(DOCS) and task["version"] == 2.0
    assert record["mean_acc"] == task["acc"] and record["mean_acc_norm"] == task["acc_norm"]
    assert record["lm_eval"] == lm_eval.__version__  # type: ignore[union-attr]
    assert (record["num_fewshot"], record["batch_size"]) == (0, 32)


@needs_lm_eval
def test_the_shipped_smoke_task_loads_from_any_folder(tmp_path, monkeypatch):
    from benchmark.tasks.zero_shot import load_tasks

    monkeypatch.chdir(tmp_path)
    task = load_tasks(["pydoc_cloze"])["pydoc_cloze"]
    docs = list(task.test_docs())
    assert len(docs) == 120
    assert all(len(d["choices"]) == 4 and 0 <= d["label"] < 4 for d in docs)
    assert len({d["label"] for d in docs}) == 4  # the true span's place varies


@needs_lm_eval
@pytest.mark.parametrize(
    "overrides, says",
    [
        ({"dataset_path": "prunebench-absent/no-such-data"}, "local Hugging Face datasets cache"),
        ({"output_type": "generate_until"}, "output type"),
    ],
)
def test_a_task_without_its_data_or_not_multiple_choice_stops_before_compute(
    tmp_path, overrides, says
):
    from benchmark.training.preflight import check_before_compute

    yaml = write_task(tmp_path / "tasks", **overrides)
    if "dataset_path" in overrides:  # a Hub dataset, not in the local cache
        yaml.write_text(yaml.read_text().replace("  data_files:\n    test: docs.jsonl\n", ""))
        yaml.write_text(yaml.read_text().replace("dataset_kwargs:\n", ""))
    cfg = with_zero_shot(lm_cfg(name="wanda"), [str(yaml)])
    cfg = replace_section(cfg, output=dataclasses.replace(cfg.output, dir=str(tmp_path / "runs")))
    with pytest.raises(ConfigError) as err:
        check_before_compute(cfg)
    assert err.value.field == "eval.zero_shot" and says in str(err.value)
    assert not (tmp_path / "runs").exists()  # nothing written


def test_zero_shot_settings_are_checked_and_an_empty_list_keeps_run_ids(tmp_path, monkeypatch):
    from benchmark.tasks import zero_shot
    from benchmark.training.validation import validate

    cfg = lm_cfg(name="wanda")
    assert with_zero_shot(cfg, []).run_id == cfg.run_id
    yaml = write_task(tmp_path)
    assert with_zero_shot(cfg, [str(yaml)]).run_id != cfg.run_id
    bad = [
        (with_zero_shot(cfg, [str(tmp_path / "absent.yaml")]), "existing lm-eval task YAML"),
        (with_zero_shot(cfg, ["boolq", "boolq"]), "named once"),
    ]
    for config, says in bad:
        with pytest.raises(ConfigError, match=says):
            validate(config)
    # Without lm-eval a plan is still made; a run stops before any compute, saying what to do.
    monkeypatch.setattr(zero_shot, "lm_eval_version", lambda: None)
    validate(with_zero_shot(cfg, ["boolq"]))
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[llm\]'"):
        zero_shot.check_zero_shot_data(with_zero_shot(cfg, ["boolq"]))


def test_only_language_models_take_zero_shot_tasks() -> None:
    from benchmark.config.parse import config_from_dict
    from benchmark.training.validation import validate

    cfg = config_from_dict({"eval": {"zero_shot": ["boolq"]}})
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert err.value.field == "eval.zero_shot"
