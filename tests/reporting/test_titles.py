"""Smoke-scale honesty: tables and figures name the data and model that really trained."""

from __future__ import annotations

from benchmark.experiments import get_experiment
from benchmark.reporting.plots import build_figure
from benchmark.reporting.render import render_latex, render_markdown
from benchmark.reporting.tables import rebuild
from benchmark.reporting.titles import scale_text, title

TABLE = "appendix-schedule-comparison-cifar10-oneshot"
FIGURE = "cifar10-envelope"


def test_smoke_table_header_names_digits_and_the_wide_cnn(tmp_path):
    table = rebuild(get_experiment(TABLE), "smoke", tmp_path)
    assert f"### {TABLE} (smoke scale: digits, cnn_wide)" in render_markdown(table)
    assert "(smoke scale: digits, cnn_wide)" in render_latex(table)


def test_smoke_figure_title_names_what_ran(tmp_path):
    fig = build_figure(get_experiment(FIGURE), "smoke", tmp_path)
    assert "smoke scale: digits, cnn_wide" in fig.get_suptitle()
    assert fig.get_suptitle().startswith("ResNet-56/CIFAR-10")


def test_paper_scale_says_paper_scale_without_expanding_anything(tmp_path):
    experiment = get_experiment(TABLE)
    assert scale_text(experiment, "paper", tmp_path) == "paper scale"
    assert title(experiment, "paper", tmp_path).endswith("(paper scale)")
