"""The language-model comparison specs: zero-shot accuracy (Wanda's table), OWL's 70% rows and
RIA's LLaMA-3 rows, what they plan at both scales, the published values they carry (as the
authors' READMEs print them) and ``--paper``'s warning where the runs' settings differ."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from benchmark.experiments.llm_comparison import TASKS
from benchmark.experiments.registry import get_experiment


def test_zero_shot_spec_scores_the_seven_tasks_and_says_why_nothing_is_published(tmp_path):
    spec = get_experiment("llm-zero-shot")
    paper = spec.runs("paper", tmp_path)
    assert len(paper) == 3 * 5  # Llama-2 7B/13B/70B x (dense, magnitude, SparseGPT, Wanda, RIA)
    assert all(tuple(r.cfg.eval.zero_shot) == TASKS for r in paper)
    assert spec.published_numbers() is None and "not reachable as text" in spec.unpublished
    smoke = spec.runs("smoke", tmp_path)
    assert {tuple(r.cfg.eval.zero_shot) for r in smoke} == {("pydoc_cloze",)}
    assert spec.layout("paper").metrics[-1] == "zs_mean"
    assert spec.layout("smoke").metrics == ("ppl", "zs_pydoc_cloze")
    # The dense parent is the one-shot table's: zero-shot tasks score the child only.
    from methods import get_method

    parents = {get_method(r.cfg.method.name)(r.cfg).parent_config().run_id for r in smoke}
    oneshot = get_experiment("llm-oneshot-wikitext2").runs("smoke", tmp_path)
    assert parents == {get_method(r.cfg.method.name)(r.cfg).parent_config().run_id for r in oneshot}


def test_owl_spec_carries_the_readme_table_and_plans_owl_rows(tmp_path):
    spec = get_experiment("llm-owl")
    paper = spec.runs("paper", tmp_path)
    assert len(paper) == 5 * 6 and {r.sparsity for r in paper if r.row != "Dense"} == {70.0}
    owl = [r for r in paper if r.row.startswith("OWL")]
    assert owl and all(r.cfg.method.params.allocation == "owl" for r in owl)
    assert all(r.cfg.data.max_length == 2048 for r in paper)
    cells = spec.published_numbers().set_index(["section", "row"])["mean"]
    assert cells[("LLaMA-7B", "Wanda")] == 85.77 and cells[("LLaMA-7B", "OWL w. Wanda")] == 24.55
    assert cells[("LLaMA-7B", "SparseGPT")] == 26.30
    assert cells[("LLaMA-7B", "OWL w. SparseGPT")] == 19.49
    assert cells[("OPT-6.7B", "OWL w. SparseGPT")] == 22.48  # OWL makes SparseGPT worse here
    assert cells[("tiny Llama (pydoc)", "OWL w. Wanda")] == 24.55  # the smoke reference


def test_ria_spec_carries_the_readme_rows_and_permutes_only_under_nm(tmp_path):
    spec = get_experiment("llm-ria")
    paper = spec.runs("paper", tmp_path)
    permuted = [r for r in paper if r.row == "RIA + channel permutation"]
    assert {r.budget for r in permuted} == {"2:4", "4:8"}
    assert all(r.cfg.method.params.permutation == "lsa" for r in permuted)
    ri = [r for r in paper if r.row == "Relative Importance"]
    assert ri and all(r.cfg.method.params.a == 0.0 for r in ri)
    cells = spec.published_numbers().set_index(["section", "row", "budget"])["mean"]
    eight = "LLaMA-3-8B"
    assert cells[(eight, "Dense", "unstructured")] == 6.14
    assert cells[(eight, "Wanda", "unstructured")] == 10.82
    assert cells[(eight, "SparseGPT", "unstructured")] == 9.40
    assert cells[(eight, "RIA", "unstructured")] == 9.34
    assert cells[(eight, "RIA + channel permutation", "2:4")] == 20.05


def test_paper_flag_warns_where_the_runs_settings_differ_from_the_published(tmp_path, capsys):
    from benchmark.cli import main

    (tmp_path / "runs").mkdir()  # a store with no runs yet
    assert main(["table", "llm-owl", "--scale", "smoke", "--paper",
                 "--store", str(tmp_path / "runs")]) == 0  # fmt: skip
    err = capsys.readouterr().err
    assert "data.max_length = 64, where the published numbers (LLaMA-7B) used 2048" in err
    # At paper scale the planned runs use the published settings: nothing to warn about.
    assert get_experiment("llm-owl").paper_differences("paper") == []
    assert get_experiment("llm-oneshot-wikitext2").paper_differences("paper") == []


def test_the_table_prints_each_zero_shot_task_and_the_mean_from_the_records(tmp_path, capsys):
    from fake_runs import finish

    from benchmark.cli import main

    spec = get_experiment("llm-zero-shot")
    store = tmp_path / "runs"
    for i, run in enumerate(r for r in spec.runs("paper", store) if r.section == "Llama-2-7B"):
        tasks = {t: {"acc": 0.5 + 0.01 * i + 0.001 * k} for k, t in enumerate(TASKS)}
        mean = sum(t["acc"] for t in tasks.values()) / len(tasks)
        finish(store, run.cfg, val=0.0, test=0.0, zero_shot={"tasks": tasks, "mean_acc": mean})
        if run.row == "Wanda":
            wanda_values = (tasks["arc_challenge"]["acc"], mean)
    table = ["table", "llm-zero-shot", "--scale", "paper", "--store", str(store)]
    assert main(table) == 0
    out = capsys.readouterr().out
    for header in ("BoolQ", "RTE", "HellaSwag", "WinoGrande", "ARC-e", "ARC-c", "OBQA", "Mean"):
        assert header in out
    assert "Note: Dense: shown for reference, not ranked" in out
    assert "zero-shot accuracy of the same runs in percent" in out
    # In 100 columns a model's row of tasks stays one table, as the papers print it: the header
    # parts every column shares are said once above it.
    assert main([*table, "--width", "100"]) == 0
    out = capsys.readouterr().out
    tasks = "| Method | PPL | BoolQ | RTE | HellaSwag | WinoGrande | ARC-e | ARC-c | OBQA | Mean |"
    block = out.split("**Llama-2-7B**")[1].split("**Llama-2-13B**")[0]
    assert tasks in block and "*columns" not in block
    assert "*every column: sparsity 50%, pattern unstructured*" in block
    assert main([*table, "--format", "csv"]) == 0
    cells = pd.read_csv(io.StringIO(capsys.readouterr().out))
    wanda = cells[(cells.section == "Llama-2-7B") & (cells.row == "Wanda")].set_index("metric")
    assert wanda.loc["zs_arc_challenge", "mean"] == pytest.approx(100 * wanda_values[0])
    assert wanda.loc["zs_mean", "mean"] == pytest.approx(100 * wanda_values[1])
