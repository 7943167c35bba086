"""The COCO, CityScapes and WMT16 schedule tables: problems and smoke reproductions end to end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmark.cli import main
from benchmark.experiments import get_experiment
from benchmark.experiments import problems as P
from benchmark.experiments.paper_numbers import load_paper_table

SPECS = [
    "appendix-schedule-comparison-coco-deeplab",
    "appendix-schedule-comparison-coco-deeplab-iterative",
    "appendix-schedule-comparison-cityscapes-pspnet",
    "appendix-schedule-comparison-cityscapes-pspnet-iterative",
    "appendix-schedule-comparison-wmt-t5",
]
ROWS = ["FT", "LRW", "SLR", "CLR", "LLR", "ALLR"]


def test_t5_trains_as_the_configuration_table_says() -> None:
    row = load_paper_table("problem_config").set_index("network").loc["T5-small"]
    p = P.T5_WMT16
    per_pass = P.WMT_EPOCHS_PER_PASS
    assert p.data["epoch_fraction"] * p.epochs == row["epochs"] == 5
    assert p.data["batch_size"] == row["batch_size"] and p.model == "t5_small"
    # 0.1 t over the first pass, 0.1 until pass 2, then 0.01 / 0.001 / 0.0001 from passes 2/3/4.
    assert p.schedule["lr"] == 0.1 and p.schedule["warmup_epochs"] == per_pass
    assert p.schedule["milestones"] == [2 * per_pass, 3 * per_pass, 4 * per_pass]
    assert p.schedule["values"] == [0.01, 0.001, 0.0001]
    assert p.weight_decays == (1e-5,) == P.DEEPLAB_COCO.weight_decays  # Appendix C


@pytest.mark.parametrize(
    ("name", "budget", "epochs"),
    [
        ("appendix-schedule-comparison-coco-deeplab", "3.33%", 1),
        ("appendix-schedule-comparison-cityscapes-pspnet", "1.66%", 5),
        ("appendix-schedule-comparison-wmt-t5", "2%", 2),  # 0.1 passes = 2 twentieths
    ],
)
def test_paper_budgets_become_the_papers_retraining_epochs(name, budget, epochs, tmp_path):
    runs = [r for r in get_experiment(name).runs("paper", tmp_path) if r.budget == budget]
    assert runs and {r.cfg.budget.epochs for r in runs} == {epochs}
    assert {r.cfg.method.params.parent_epochs for r in runs} == {get_problem(name).epochs}


def get_problem(name: str):
    return get_experiment(name).grids["paper"].problem


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory shared by the reproductions: stand-ins go to data/standin/ there."""
    return tmp_path_factory.mktemp("task-reproduce")


@pytest.mark.slow
@pytest.mark.parametrize("name", SPECS)
def test_smoke_reproduction_prints_a_complete_table(name, workdir: Path, capsys) -> None:
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        args = ["reproduce", name, "--store", "runs", "--out", "out", "--executor", "debug"]
        assert main(args) == 0
        capsys.readouterr()
        assert main(["table", name, "--store", "runs", "--format", "latex"]) == 0
        tex = capsys.readouterr().out
    finally:
        os.chdir(cwd)
    md = (workdir / "out" / f"{name}.md").read_text()
    assert "12 of 12 planned runs found" in md and "missing: 0" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and "±" in line]
    assert [r.split(" | ")[0][2:] for r in rows] == ROWS
    metric = "BLEU" if "wmt" in name else "mIoU"
    assert f"Values: test {metric}" in md and f"Values: test {metric}" in tex
    assert (workdir / "data" / "standin").is_dir()
