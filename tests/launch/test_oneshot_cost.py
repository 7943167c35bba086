"""One-shot language-model runs: their forward tokens, counted before they run, and their
setup phase priced at a measured tokens/s."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmark.config.parse import config_to_dict, replace_section
from benchmark.experiments import get_experiment
from benchmark.training.forward_tokens import oneshot_tokens


def _smoke(tmp_path: Path, row: str):
    runs = get_experiment("llm-oneshot-wikitext2").runs("smoke", tmp_path)
    return next(r.cfg for r in runs if r.row == row and r.budget == "unstructured")


def test_smoke_runs_count_calibration_and_evaluation_tokens_by_hand(tmp_path) -> None:
    from pydoc_data.topics import topics

    wanda, magnitude, dense = (_smoke(tmp_path, r) for r in ("Wanda", "Magnitude", "Dense"))
    length = wanda.data.max_length
    assert wanda.data.name == "pydoc" and wanda.data.tokenizer in ("", "bytes")
    # By hand: every 10th topic (sorted) is test, the 6th of each ten validation, joined by a
    # blank line; one byte a token; non-overlapping windows, the tail dropped.
    keys = sorted(topics)
    text = {k: "\n\n".join(topics[key] for i, key in enumerate(keys) if i % 10 == r)
            for k, r in (("test", 0), ("val", 5))}  # fmt: skip
    windows = {k: len(t.encode("utf-8")) // length for k, t in text.items()}
    evaluation = (2 * windows["test"] + windows["val"]) * length
    calibration = wanda.method.params.calibration_samples * length
    assert oneshot_tokens(wanda).as_dict() == {"calibration": calibration, "evaluation": evaluation}
    # Magnitude reads no calibration windows; the dense reference prunes nothing.
    assert oneshot_tokens(magnitude).as_dict() == {"calibration": 0, "evaluation": evaluation}
    assert oneshot_tokens(dense).calibration == 0
    owl = replace_section(
        wanda,
        method=dataclasses.replace(
            wanda.method, params=dataclasses.replace(wanda.method.params, allocation="owl")
        ),  # fmt: skip
    )
    assert oneshot_tokens(owl).calibration == 2 * calibration  # OWL's pass, then the prune's


def _record(cfg, tokens: dict | None, seconds: float) -> dict:
    ppl = {"ppl": 9.0, "neg_ppl": -9.0, "top1": 0.5}
    metrics = {"test": ppl, "val": ppl, "setup_seconds": seconds, "wall_seconds": 0.0}
    if tokens is not None:
        metrics["forward_tokens"] = tokens
    return {"run_id": cfg.run_id, "status": "finished", "method": cfg.method.name,
            "config": config_to_dict(cfg), "metrics": metrics,
            "environment": {"device": "cuda:0", "device_name": "H100"}}  # fmt: skip


def _with_samples(cfg, n: int):
    params = dataclasses.replace(cfg.method.params, calibration_samples=n)
    return replace_section(cfg, method=dataclasses.replace(cfg.method, params=params))


@pytest.mark.parametrize("recorded", [True, False])
def test_a_measured_token_rate_prices_twice_the_calibration_higher(tmp_path, recorded) -> None:
    from benchmark.cli.costs import cost_text
    from benchmark.store.results import Store

    wanda = _smoke(tmp_path, "Wanda")
    measured = oneshot_tokens(wanda)
    store = tmp_path / "store"
    tokens = measured.as_dict() if recorded else None  # a record from before tokens were kept
    Store(store).write(_record(wanda, tokens, seconds=100.0))
    more = _with_samples(wanda, 2 * wanda.method.params.calibration_samples)
    assert more.run_id != wanda.run_id
    groups = {"same": [(wanda.run_id, wanda)], "more": [(more.run_id, more)]}
    text, est = cost_text(groups, set(), str(store))
    lines = {ln.label: ln for ln in est.lines}
    assert lines["same"].hours == pytest.approx(100 / 3600)
    if recorded:  # its own tokens over the measured tokens/s
        rate = measured.total / 100.0
        assert lines["more"].hours == pytest.approx(oneshot_tokens(more).total / rate / 3600)
        assert lines["more"].hours > lines["same"].hours
        assert "seconds per run" not in text
    else:  # no rate: seconds per run, as before, and said so
        assert lines["more"].hours == pytest.approx(lines["same"].hours)
        assert "priced at finished runs' seconds per run" in text
    assert lines["more"].tokens == oneshot_tokens(more).total > measured.total
    assert "tok" in text


def test_missing_evaluation_files_give_not_counted(tmp_path) -> None:
    from benchmark.cli.costs import cost_text

    runs = get_experiment("llm-oneshot-wikitext2").runs("paper", tmp_path)
    paper = next(r.cfg for r in runs if r.row == "Wanda")
    data = dataclasses.replace(paper.data, root=str(tmp_path / "none"), tokenizer="bytes")
    cfg = replace_section(paper, data=data)
    found = oneshot_tokens(cfg)
    assert found.evaluation is None and found.total is None
    assert found.calibration == 128 * 4096
    text, est = cost_text({"Wanda": [(cfg.run_id, cfg)]}, set(), str(tmp_path / "store"))
    assert est.total.tokens == 0 and est.total.uncounted
    assert "not counted" in text
    # With the files there (small stand-ins), the windows are counted from them.
    root = tmp_path / "files"
    (root / "wikitext-2-raw").mkdir(parents=True)
    for name in ("wiki.train.raw", "wiki.valid.raw", "wiki.test.raw"):
        (root / "wikitext-2-raw" / name).write_text("x" * 3 * 4096 + "\n")
    (root / "c4-train.00000-of-01024.json.gz").write_bytes(b"")
    counted = oneshot_tokens(replace_section(cfg, data=dataclasses.replace(data, root=str(root))))
    assert counted.evaluation == (2 * 3 + 3) * 4096
