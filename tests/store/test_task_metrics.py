"""Every task's metrics are checked when a record is read (each task declares its metrics'
types in benchmark.core.task_metrics): a language-model record with a string, a boolean, a
list, a non-finite number or no value at all for its perplexity is named, skipped and counted
by ``table``, ``export`` and ``free``, as a classification record always was."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from reporting.test_keep import smoke_runs
from store.test_damaged_store import _run

from benchmark.config.parse import config_to_dict
from benchmark.core.task_metrics import TASK_METRICS
from benchmark.store.errors import CorruptRecord
from benchmark.store.records import check_record
from benchmark.store.results import Store
from benchmark.tasks import TASKS

SPEC = "llm-oneshot-wikitext2"


def lm_metrics(ppl: float) -> dict[str, float]:
    return {"loss": 2.0, "ppl": ppl, "neg_ppl": -ppl, "top1": 0.3}


def fake_lm_store(root: Path) -> list[str]:
    """Finished records of SPEC's smoke runs, as a language-model run writes them."""
    ids = []
    for i, run in enumerate(smoke_runs(root, SPEC)):
        cfg = run.cfg
        if Store(root).is_finished(cfg.run_id):
            continue
        now = time.time()
        metrics = {"val": lm_metrics(20.0 + i), "test": lm_metrics(21.0 + i), "sparsity": 0.5}
        record = {"run_id": cfg.run_id, "status": "finished", "method": cfg.method.name,
                  "config": config_to_dict(cfg), "metrics": metrics, "started": now,
                  "finished": now}  # fmt: skip
        Store(root).write(record)
        ids.append(cfg.run_id)
    return ids


# How each bad value is written into ``test.neg_ppl`` (JSON text), and what its reason says.
BAD = {
    "string": ('"-21.5"', "metrics.test.neg_ppl = '-21.5' (str), not a number or null"),
    "boolean": ("true", "metrics.test.neg_ppl = True (bool), not a number or null"),
    "list": ("[-21.5]", "metrics.test.neg_ppl = [-21.5] (list), not a number or null"),
    "overflow": ("-1e400", "metrics.test.neg_ppl = -inf (float), not a number or null"),
    "missing": (None, "metrics.test.neg_ppl is missing: a finished causal_lm run has it"),
}


def test_bad_language_model_values_are_named_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    ids = fake_lm_store(store)
    victims = {}
    for (name, (text, _reason)), rid in zip(BAD.items(), ids, strict=False):
        path = Store(store).result_path(rid)
        record = json.loads(path.read_text())
        del record["metrics"]["test"]["neg_ppl"]
        raw = json.dumps(record)
        if text is not None:  # written as JSON text: 1e400 is not a Python float
            raw = raw.replace('"test": {', f'"test": {{"neg_ppl": {text}, ', 1)
        path.write_text(raw)
        victims[name] = path
    at = ["--store", str(store), "--scale", "smoke"]
    commands = {
        "table": ["table", SPEC, *at],
        "export": ["export", SPEC, *at, "--format", "csv"],
        "free --dry-run": ["free", SPEC, *at, "--dry-run"],
        "free": ["free", SPEC, *at],
    }
    for command, args in commands.items():
        code, text = _run(args, capsys)
        assert code == 0, (command, text)
        for name, (_text, reason) in BAD.items():
            assert f"{victims[name].name}: {reason}" in text, (command, name, text)
        if command == "table":
            planned = len(ids)
            assert f"{len(BAD)} unusable store record(s) skipped" in text
            assert f"{planned - len(BAD)} of {planned} planned runs found" in text, text
            assert "inf**" not in text  # 1e400 used to show as the best cell, **-inf**
        if command == "export":
            unusable = {line.split(",")[3] for line in text.splitlines() if ",unusable," in line}
            assert unusable == {path.stem for path in victims.values()}


def test_every_task_declares_its_metrics_and_the_store_checks_them() -> None:
    assert set(TASKS.names()) == set(TASK_METRICS)
    for name in TASKS.names():
        spec = TASK_METRICS[name]
        assert TASKS.get(name, "task").metric == spec.headline
        for metric in spec.types:
            record = {"run_id": "r", "status": "finished", "task": name,
                      "metrics": {"val": {spec.headline: 1.0, metric: "1.0"}}}  # fmt: skip
            with pytest.raises(CorruptRecord, match=f"metrics.val.{metric} = '1.0'"):
                check_record(record)
            for bad in (float("inf"), float("-inf"), float("nan")):  # non-finite, every task
                record["metrics"]["val"][metric] = bad
                with pytest.raises(CorruptRecord, match=f"metrics.val.{metric} = {bad}"):
                    check_record(record)
        check_record({"run_id": "r", "status": "finished", "task": name,
                      "metrics": {"test": {spec.headline: None}}})  # fmt: skip
    with pytest.raises(CorruptRecord, match="task = 'poetry'"):
        check_record({"run_id": "r", "status": "failed", "task": "poetry"})
