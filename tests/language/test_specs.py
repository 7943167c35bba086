"""The language-model table specs: what they plan at both scales and the published values."""

from __future__ import annotations

import dataclasses

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


def _with(cfg, **sections):
    """``cfg`` with fields of its sections replaced: ``model={"dtype": "float32"}``."""
    changed = {k: dataclasses.replace(getattr(cfg, k), **v) for k, v in sections.items()}
    return replace_section(cfg, **changed)


def test_memory_estimates_count_half_precision_offload_and_activations(tmp_path) -> None:
    from methods import get_method

    runs = get_experiment("llm-oneshot-wikitext2").runs("paper", tmp_path)
    cells = {(r.section, r.row): r.cfg for r in runs if r.budget == "2:4" and r.cfg.seed == 0}
    sparsegpt = get_method("sparsegpt")
    seven = cells[("Llama-2-7B", "SparseGPT")]
    # The references load the models in float16: 2 bytes per weight, a byte per keep mask.
    assert seven.model.dtype == "float16"
    memory = sparsegpt.memory(seven)
    assert memory.weights == int(6.74e9 * 2) and memory.masks < 6.74e9
    gib = {row: get_method(cells[("Llama-2-7B", row)].method.name).memory_estimate(
        cells[("Llama-2-7B", row)]) / 2**30 for row in ("Dense", "Wanda", "SparseGPT")}  # fmt: skip
    assert gib["Dense"] < gib["Wanda"] < gib["SparseGPT"] < 80  # 7B is pruned whole
    in_fp32 = sparsegpt.memory_estimate(_with(seven, model={"dtype": "float32"}))
    assert in_fp32 > 1.5 * sparsegpt.memory_estimate(seven)
    # 70B fits no GPU whole; offloaded, one layer and the calibration working set do.
    seventy = cells[("Llama-2-70B", "SparseGPT")]
    whole, offloaded = sparsegpt.memory(seventy).peak(False), sparsegpt.memory(seventy).peak(True)
    assert whole > 180 * 2**30 and offloaded < 40 * 2**30
    assert sparsegpt.memory_estimate(seventy) == offloaded  # "auto" offloads it
    assert sparsegpt.memory_estimate(_with(seventy, runtime={"offload": "off"})) == whole


def test_retraining_memory_counts_activations(tmp_path) -> None:
    from methods import get_method

    runs = get_experiment("llm-retraining-perp").runs("paper", tmp_path)
    perp = next(r.cfg for r in runs if r.section == "OPT-13B" and r.row == "PERP + MaskLoRA")
    method = get_method(perp.method.name)
    assert perp.model.dtype == "bfloat16"
    # Without gradient checkpointing every layer's activations (and adapted weights) are kept:
    # 40 layers x 2 x 2048 tokens x (10 h + 4 ffn) values.
    on = method.memory(_with(perp, runtime={"grad_checkpointing": "on"}))
    off = method.memory(_with(perp, runtime={"grad_checkpointing": "off"}))
    assert off.retraining - on.retraining > 40 * 2 * 2048 * (10 * 5120 + 4 * 20480) * 2 * 0.9
    assert method.memory_estimate(perp) < 80 * 10**9  # PERP on OPT-13B fits one 80 GB GPU
    fp32 = _with(perp, model={"dtype": "float32"}, runtime={"grad_checkpointing": "off"})
    assert method.memory_estimate(fp32) > 100 * 2**30  # the hand count: ~105 GB in fp32
    full = next(r.cfg for r in runs if r.section == "OPT-13B" and r.row == "Full")
    # Full retraining: float32 weights, gradients and AdamW's moments of every weight.
    assert method.memory_estimate(full) > 16 * 12.85e9


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
