"""The language-model table specs: what they plan at both scales and the published values."""

from __future__ import annotations

import dataclasses
import re

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
    # Retraining as PERP's code: clipped gradients everywhere, a LoRA on the head in PERP's rows,
    # truncated documents at paper scale only (the smoke text's 63 topics would run out).
    trained = [r.cfg for r in spec.runs("paper", tmp_path) if r.row != "None"]
    assert {(c.optim.grad_clip, c.data.train_windows) for c in trained} == {(1.0, "documents")}
    perp = {c.method.params.head for c in trained if c.method.params.retrain == "perp"}
    assert perp == {"lora"}
    smoke = [r.cfg for r in spec.runs("smoke", tmp_path) if r.row != "None"]
    assert {(c.optim.grad_clip, c.data.train_windows) for c in smoke} == {(1.0, "random")}


def test_retraining_spec_s_docstring_names_its_own_smoke_parent(tmp_path) -> None:
    import benchmark.experiments.tab_llm_retraining as module
    from methods import get_method

    def parents(spec_id: str) -> set[str]:
        runs = get_experiment(spec_id).runs("smoke", tmp_path)
        return {get_method(r.cfg.method.name)(r.cfg).parent_config().run_id for r in runs}

    # Not the one-shot table's parent: trained for fewer iterations, as the docstring says.
    assert not parents("llm-retraining-perp") & parents("llm-oneshot-wikitext2")
    parent = next(iter(get_experiment("llm-retraining-perp").runs("smoke", tmp_path))).cfg
    epochs, iters = parent.method.params.parent_epochs, parent.data.epoch_iters
    doc = " ".join((module.__doc__ or "").split())
    assert f"{epochs} epochs of {iters} iterations" in doc and "of its own" in doc


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


def test_paper_scale_dry_run_prints_runs_memory_disk_and_what_measures_the_hours(tmp_path, capsys):
    from benchmark.cli import main

    assert main(["reproduce", "llm-oneshot-wikitext2", "--scale", "paper", "--dry-run",
                 "--store", str(tmp_path / "runs")]) == 0  # fmt: skip
    out = capsys.readouterr()
    text = out.out + out.err
    assert "21 runs, 21 missing\n" in text  # pretrained models: no dense parent to train
    seven = next(line for line in text.splitlines() if "Llama-2-7B / SparseGPT" in line)
    assert seven.split()[-1] == "(est.)" and "GiB" in seven  # GPU memory per run, estimated
    unknown = next(line for line in text.splitlines() if "no finished one-shot run of" in line)
    assert "hf:meta-llama/Llama-2-7b-hf/wikitext2 (fp16)" in unknown  # each model its own
    # ... and the run that measures each model's one-shot seconds is named, with its command:
    # a pruned row without retraining, one seed.
    flat = " ".join(text.split())  # as wide as the terminal: lines wrap anywhere
    named = re.search(
        r"Llama-2-7b-hf/wikitext2 \(fp16\): run (\S+) \(.*?\) measures its one-shot seconds: "
        r"(prunebench reproduce .*? --seeds \d+)",
        flat,
    )
    assert named is not None
    plan = get_experiment("llm-oneshot-wikitext2").plan("paper", tmp_path / "runs")
    row = plan[plan["run_id"].eq(named[1])].iloc[0]
    assert (row["section"], row["row"], row["seed"]) == ("Llama-2-7B", "Magnitude", 0)
    assert named[2] == (
        "prunebench reproduce llm-oneshot-wikitext2 --scale paper --section Llama-2-7B "
        "--methods oneshot_magnitude --seeds 0"
    )
    # Disk: the models' weights in float16, the pruned ones at their density.
    disk = next(line for line in text.splitlines() if "[reproduce] disk:" in line)
    assert "not sized" not in disk and " GB" in disk


def _record(cfg, device: str, **metrics) -> dict:
    from benchmark.config.parse import config_to_dict

    return {
        "run_id": cfg.run_id,
        "status": "finished",
        "method": cfg.method.name,
        "config": config_to_dict(cfg),
        "metrics": {
            "test": {"ppl": 9.0, "neg_ppl": -9.0, "top1": 0.5},
            "val": {"ppl": 9.0, "neg_ppl": -9.0, "top1": 0.5},
            **metrics,
        },
        "environment": {"device": "cuda:0", "device_name": device},
    }


def test_one_shot_runs_are_priced_at_measured_seconds_and_stored_parents_count(tmp_path):
    from benchmark.cli.costs import cost_text
    from benchmark.store.results import Store

    spec = get_experiment("llm-oneshot-wikitext2")
    runs = spec.runs("paper", tmp_path)
    seven = [r for r in runs if r.section == "Llama-2-7B"]
    store = Store(tmp_path)
    groups = {r.row: [(r.cfg.run_id, r.cfg)] for r in seven if r.budget == "2:4"}
    wanda = groups["Wanda"][0][1]
    # A finished Wanda run of 7B: 600 s of loading, prune and evaluation (no epochs).
    store.write(_record(wanda, "H100", setup_seconds=590.0, wall_seconds=10.0))
    text, est = cost_text(groups, {wanda.run_id}, str(tmp_path))
    lines = {ln.label: ln for ln in est.lines}
    assert lines["Wanda"].all_hours == pytest.approx(600 / 3600) and lines["Wanda"].hours == 0
    # SparseGPT has no run of its own yet: priced at Wanda's seconds, marked "about".
    assert lines["SparseGPT"].hours == pytest.approx(600 / 3600)
    assert lines["SparseGPT"].setup_from_other == {"sparsegpt"}
    assert "~ = about" in text

    smoke = spec.runs("smoke", tmp_path / "smoke")
    child = next(r.cfg for r in smoke if r.row == "Wanda")
    from methods import get_method

    parent = get_method(child.method.name)(child).parent_config()
    assert parent is not None
    groups = {"Wanda": [(child.run_id, child)]}
    _, before = cost_text(groups, set(), str(tmp_path / "smoke"))
    Store(tmp_path / "smoke").write(_record(parent, "H100", images_per_s=10.0, wall_seconds=1.0))
    _, after = cost_text(groups, set(), str(tmp_path / "smoke"))
    parents = {ln.label: ln for ln in after.lines}["dense parents"]
    assert {ln.label: ln for ln in before.lines}["dense parents"].missing == 1
    assert parents.missing == 0  # a stored dense parent is stored, not missing


def test_the_reproduce_header_counts_the_dense_parents_the_submission_trains(tmp_path, capsys):
    from benchmark.cli import main
    from methods import get_method

    runs = get_experiment("llm-oneshot-wikitext2").runs("smoke", tmp_path / "runs")
    own = {r.cfg.run_id for r in runs}
    parents = set()
    for r in runs:
        parent = get_method(r.cfg.method.name)(r.cfg).parent_config()
        if parent is not None and parent.run_id not in own:
            parents.add(parent.run_id)
    assert parents  # the smoke models are trained here first
    assert main(["reproduce", "llm-oneshot-wikitext2", "--dry-run",
                 "--store", str(tmp_path / "runs")]) == 0  # fmt: skip
    header = capsys.readouterr().err.splitlines()[0]
    n = len(parents)
    assert header.endswith(f"missing; + {n} dense parents they start from ({n} missing)")
