"""The language-model table specs: what they plan at both scales and the published values."""

from __future__ import annotations

import dataclasses

import pytest

from benchmark.config.parse import replace_section
from benchmark.experiments.registry import get_experiment


def test_oneshot_spec_plans_wanda_table_cells_and_shares_the_dense_run(tmp_path) -> None:
    spec = get_experiment("llm-oneshot-wikitext2")
    paper = spec.plan("paper", tmp_path)
    # 3 models x (dense + 3 methods) x 2 patterns, the dense run feeding both columns.
    assert len(paper) == 24 and paper.run_id.nunique() == 21
    assert set(paper.budget) == {"unstructured", "2:4"}
    published = spec.published_numbers()
    assert published is not None
    seven = published.set_index(["section", "row", "budget"])["mean"]
    assert seven[("Llama-2-7B", "Dense", "unstructured")] == 5.12
    assert seven[("Llama-2-7B", "Magnitude", "unstructured")] == 14.89
    assert seven[("Llama-2-7B", "SparseGPT", "unstructured")] == 6.51
    assert seven[("Llama-2-7B", "Wanda", "unstructured")] == 6.42
    assert seven[("Llama-2-70B", "Wanda", "2:4")] == 5.16
    smoke = spec.plan("smoke", tmp_path)
    assert {"tiny Llama (pydoc)", "retrained (MaskLoRA)"} == set(smoke.section)
    assert set(smoke.seed) == {0, 1}


def test_retraining_spec_plans_every_variant_under_both_schedules(tmp_path) -> None:
    spec = get_experiment("llm-retraining-perp")
    paper = spec.plan("paper", tmp_path)
    # 3 OPT models x 6 rows x 3 sparsities x 2 schedules; "None" retrains nothing: one run.
    assert len(paper) == 108 and paper.run_id.nunique() == 108 - 3 * 3
    assert spec.published_numbers() is None  # PERP's cells were not available as text


def test_dry_run_memory_estimates_of_a_7b_model(tmp_path) -> None:
    from methods import get_method

    runs = get_experiment("llm-oneshot-wikitext2").runs("paper", tmp_path)
    seven = {r.row: r.cfg for r in runs if r.section == "Llama-2-7B" and r.budget == "2:4"}
    gib = {row: get_method(c.method.name).memory_estimate(c) / 2**30 for row, c in seven.items()}
    # fp32 weights of 6.74B parameters; calibration adds 128 x 4096 x 4096 hidden states twice.
    assert gib["Dense"] == pytest.approx(6.74e9 * 4 / 2**30)
    assert gib["Magnitude"] == gib["Dense"]  # no calibration
    assert gib["Dense"] + 16 < gib["Wanda"] < gib["SparseGPT"] < 80
    full = dataclasses.replace(seven["Magnitude"].method.params, retrain="full")
    cfg = replace_section(
        seven["Magnitude"], method=dataclasses.replace(seven["Magnitude"].method, params=full)
    )
    assert get_method("oneshot_magnitude").memory_estimate(cfg) == 4 * 4 * 6.74e9


def test_paper_scale_dry_run_prints_runs_memory_and_what_measures_the_hours(tmp_path, capsys):
    from benchmark.cli import main

    assert main(["reproduce", "llm-oneshot-wikitext2", "--scale", "paper", "--dry-run",
                 "--store", str(tmp_path / "runs")]) == 0  # fmt: skip
    out = capsys.readouterr()
    text = out.out + out.err
    assert "21 runs, 21 missing" in text
    seven = next(line for line in text.splitlines() if "Llama-2-7B / SparseGPT" in line)
    assert seven.split()[-1] == "(est.)" and "GiB" in seven  # GPU memory per run, estimated
    assert "device-hours unknown: no measured images/s of causal_lm/wikitext2" in text
    assert "one epoch of a real run (prunebench run with --set budget.epochs=1)" in text
