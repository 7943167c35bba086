"""Perplexity where people look: run/show, a grid file's table, export and the spec tables print
perplexity (lower is better) and tokens/s for causal-LM runs, the spec tables name the pattern,
and the dense model is shown for reference, not ranked."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from benchmark.cli import main
from benchmark.config.parse import config_to_dict
from benchmark.config.run import RunConfig
from benchmark.store.results import Store

GRID = """
name = "lm"
seeds = [0, 1]

[base]
data.name = "pydoc"
data.max_length = 32
model.name = "llama_tiny"
optim.name = "adamw"
optim.weight_decay = 0.0
output.dir = "{store}"

[methods.wanda]
set = {{ calibration_samples = 8 }}
axes = {{ "method.sparsity" = [0.5, 0.6] }}

[methods.oneshot_magnitude]
axes = {{ "method.sparsity" = [0.5, 0.6] }}
"""


def finish_lm(store: Path, cfg: RunConfig, ppl: float, tokens_per_s: float | None) -> None:
    """A finished causal-LM record (perplexities, no training unless ``tokens_per_s``)."""
    metrics = {
        "val": {"ppl": ppl + 1, "neg_ppl": -(ppl + 1), "top1": 0.9},
        "test": {"ppl": ppl, "neg_ppl": -ppl, "top1": 0.9},
        "sparsity": cfg.method.sparsity,
        "sparsity_total": cfg.method.sparsity / 2,
        "speedup": 2.0,
        "speedup_corrected": 2.0,
        "images_per_s": (tokens_per_s or 0.0) / cfg.data.max_length,
        "tokens_per_s": tokens_per_s,
        "wall_seconds": 1.0,
        "setup_seconds": 3.0,
        "oneshot": {"test_after_prune": {"ppl": ppl + 5}},
    }
    record = {
        "run_id": cfg.run_id,
        "status": "finished",
        "method": cfg.method.name,
        "config": config_to_dict(cfg),
        "metrics": metrics,
        "environment": {"device": "cpu"},
    }
    Store(store).write(record)


def prepared_grid(tmp_path: Path) -> tuple[Path, Path, list]:
    """The store, the grid file and the planned runs of GRID under ``tmp_path``."""
    from benchmark.launch import prepare
    from benchmark.launch.grid import load_grid

    store = tmp_path / "runs"
    grid = tmp_path / "lm.toml"
    grid.write_text(GRID.format(store=store))
    return store, grid, prepare(load_grid(grid), store).runs


def test_grid_of_language_models_tabulates_perplexity_and_tokens_per_s(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store, grid, runs = prepared_grid(tmp_path)
    for run in runs:
        ppl = (20.0 if run.cfg.method.name == "wanda" else 30.0) + run.cfg.seed
        finish_lm(store, run.cfg, ppl, 5000.0 if run.cfg.method.name == "wanda" else None)
    assert main(["table", str(grid), "--format", "csv"]) == 0
    frame = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert set(frame["metric"]) == {"ppl", "sparsity", "tok_per_s"}
    ppl = frame[frame["metric"].eq("ppl")].set_index(["row", "sparsity"])
    assert ppl.loc[("wanda", 50.0), "mean"] == pytest.approx(20.5)
    assert ppl.loc[("wanda", 50.0), "highlight"] == "first"  # the lowest perplexity
    tokens = frame[frame["metric"].eq("tok_per_s")].set_index("row")["mean"]
    assert tokens["wanda"] == pytest.approx(5000.0)
    assert main(["table", str(grid)]) == 0
    text = capsys.readouterr().out
    assert "PPL" in text and "tokens/s" in text
    assert "Acc." not in text and "img/s" not in text


def test_run_summary_leads_with_perplexity(tmp_path: Path, capsys) -> None:
    from benchmark.cli.summary import format_summary
    from benchmark.config.parse import config_from_dict

    cfg = config_from_dict(
        {
            "data": {"name": "pydoc"},
            "model": {"name": "llama_tiny", "dtype": "bfloat16"},
            "method": {"name": "wanda", "sparsity": 0.5, "pattern": "unstructured"},
        }
    )
    finish_lm(tmp_path, cfg, 12.5, None)
    text = format_summary(Store(tmp_path).read(cfg.run_id))
    assert "test PPL        12.50" in text and "bfloat16" in text
    assert "top-1" not in text and "images/s" not in text
    assert "budget          none (one-shot prune, no retraining)" in text
    # A CPU run has no device peak, and says why rather than a bare "-".
    assert "peak memory: device none (ran on cpu" in text
    record = Store(tmp_path).read(cfg.run_id)
    record["environment"]["device"] = "cuda:0"
    assert "device not measured (runs packed" in format_summary(record)
    record["metrics"]["peak_memory_bytes"] = 3 * 2**30
    assert "peak memory: device 3.2 GB" in format_summary(record)


def test_spec_table_names_the_pattern_and_ranks_pruned_rows_only(tmp_path: Path) -> None:
    from benchmark.experiments.registry import get_experiment
    from benchmark.reporting.render import render_markdown
    from benchmark.reporting.tables import rebuild

    spec = get_experiment("llm-oneshot-wikitext2")
    store = tmp_path / "runs"
    ppl = {"Dense": 8.0, "Magnitude": 11.0, "SparseGPT": 9.5, "Wanda": 9.0}
    runs = {r.cfg.run_id: r for r in spec.runs("smoke", store)}  # the dense run feeds 2 cells
    for run in runs.values():
        finish_lm(store, run.cfg, ppl.get(run.row, 9.0) + run.cfg.seed / 10, None)
    table = rebuild(spec, "smoke", store, paper=True)
    text = render_markdown(table)
    assert "pattern 2:4" in text and "budget 2:4" not in text
    # Dense (best by construction) is shown but neither highlighted nor in the agreement.
    dense = next(ln for b in table.blocks for g in b.groups for ln in g if ln.label == "Dense")
    assert all(v.highlight == "" for v in dense.values)
    assert table.agreement and all(c.rows == 3 for c in table.agreement)
    assert all(c.best == "Wanda" for c in table.agreement if "unstructured" in c.where)
    assert "Dense, is" not in text


def test_export_of_a_language_model_table_has_perplexity_columns(tmp_path: Path) -> None:
    from benchmark.experiments.registry import get_experiment
    from benchmark.reporting.export import export_frame

    spec = get_experiment("llm-oneshot-wikitext2")
    store = tmp_path / "runs"
    for cfg in {r.cfg.run_id: r.cfg for r in spec.runs("smoke", store)}.values():
        finish_lm(store, cfg, 10.0, None)
    frame = export_frame(spec, "smoke", store)
    assert {"test_ppl", "val_ppl", "ppl_after_prune", "tokens_per_s"} <= set(frame.columns)
    assert "test_top1" not in frame.columns and "images_per_s" not in frame.columns
    assert set(frame.loc[frame["status"].eq("finished"), "test_ppl"]) == {10.0}


def test_status_of_a_language_model_grid_shows_the_best_perplexity(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store, grid, runs = prepared_grid(tmp_path)
    for run in runs[:-1]:  # one run left missing
        ppl = (20.0 if run.cfg.method.name == "wanda" else 30.0) + run.cfg.seed
        finish_lm(store, run.cfg, ppl, None)
    assert main(["status", str(grid)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-2:] == ["best", "PPL"]
    best = {line.split()[0]: line.split()[-1] for line in lines[3:] if line[:1].isalpha()}
    assert best["wanda"] == "20.00" and best["oneshot_magnitude"] == "30.00"
    assert best["all"] == "20.00"
    assert any("lower is better" in line for line in lines)
