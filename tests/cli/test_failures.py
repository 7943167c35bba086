"""Failures you can see and retry: ``reproduce`` exits 1 when a run failed, prints each distinct
first error line once with the runs it stopped, and takes ``--retry-failed``; what ``run``
checks before any compute, ``reproduce`` and ``submit`` check for the whole plan before the
first run starts; a table's legend does not call failed runs unfinished."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from fake_runs import finish

from benchmark.cli import main
from benchmark.config.parse import config_to_dict
from benchmark.store.results import Store

SPEC = "stable-unstable-results"  # smoke scale: embedded digits, nothing to prepare


def _failed(store: Path, cfg: Any, error: str) -> None:
    record = {"run_id": cfg.run_id, "status": "failed", "method": cfg.method.name,
              "config": config_to_dict(cfg), "error": error, "finished": time.time()}  # fmt: skip
    Store(store).write(record)


def _text(stream: str) -> str:
    return " ".join(stream.split())  # the width may fold a line: read it as one


def test_reproduce_exits_1_and_groups_the_errors_of_its_failed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s"
    calls: list[dict[str, Any]] = []

    def fail_some(configs: list[Any], executor: str, store_dir: Any, **kwargs: Any) -> list[str]:
        calls.append(kwargs)
        for i, cfg in enumerate(configs):
            if cfg.method.name == "gsm":
                _failed(Path(store_dir), cfg, "RuntimeError: out of memory\ntraceback line")
            elif cfg.method.name == "lc" and i % 2:
                _failed(Path(store_dir), cfg, "ValueError: nan loss")
            else:
                finish(Path(store_dir), cfg, val=0.9, test=0.9)
        return [c.run_id for c in configs]

    monkeypatch.setattr("benchmark.cli.submission.submit_missing", fail_some)
    args = ["reproduce", SPEC, "--scale", "smoke", "--store", str(store), "--out", str(tmp_path)]
    assert main(args) == 1
    captured = capsys.readouterr()
    err = _text(captured.err)
    failed = len(list(store.glob("*.json"))) - sum(
        1 for r in Store(store).records() if r["status"] == "finished"
    )
    assert f"[reproduce] {failed} runs failed:" in err
    gsm = err.split("runs: RuntimeError: out of memory")
    assert len(gsm) == 2 and "traceback line" not in err  # one line per distinct first line
    assert "runs: ValueError: nan loss" in err and "--retry-failed" in err
    # The table's legend says they failed, not that they have not finished yet.
    table = _text((tmp_path / f"{SPEC}.md").read_text())
    assert f"{failed} of this table's runs failed" in table
    assert calls[-1]["retry_failed"] is False
    # Skipped as failed on the next call (still exit 1); --retry-failed runs them again.
    assert main(args) == 1
    assert main([*args, "--retry-failed"]) == 1
    assert calls[-1]["retry_failed"] is True


def test_reproduce_checks_every_run_before_the_first_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted: list[Any] = []
    monkeypatch.setattr(
        "benchmark.cli.submission.submit_missing",
        lambda configs, *a, **k: submitted.extend(configs),
    )
    store, empty = tmp_path / "s", tmp_path / "no-data"
    spec = "appendix-schedule-comparison-cifar10-oneshot"
    args = ["reproduce", spec, "--scale", "paper", "--store", str(store), "--data-root", str(empty)]
    assert main(args) == 1
    err = _text(capsys.readouterr().err)
    assert "data error: CIFAR-10 files under data.root" in err
    assert "cifar-10-batches-py/data_batch_1" in err
    assert "checked before any run started: run dense-" in err and "more of the plan" in err
    assert not submitted and not list(store.glob("*.json"))


def test_submit_checks_every_run_before_the_first_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text(
        'name = "g"\nseeds = 2\n[base]\ndata.name = "cifar10"\n'
        f'data.root = "{tmp_path / "none"}"\nmodel.name = "resnet20"\n'
        '[methods.gmp]\naxes = { "method.sparsity" = [0.5, 0.9] }\n'
    )
    store = tmp_path / "s"
    assert main(["submit", str(grid), "--store", str(store), "--executor", "debug"]) == 1
    err = _text(capsys.readouterr().err)
    assert "CIFAR-10 files under data.root" in err and "and 3 more of the plan" in err
    assert not list(store.glob("*.json"))


def test_run_checks_the_data_files_before_it_writes_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "s"
    sets = ["data.name=cifar10", f"data.root={tmp_path}", f"output.dir={store}"]
    assert main(["run", *(a for s in sets for a in ("--set", s))]) == 1
    assert "cifar-10-batches-py" in _text(capsys.readouterr().err)
    assert not store.exists()  # no failed record, not even the store's folder
