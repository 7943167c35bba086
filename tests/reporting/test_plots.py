"""The figures, checked from the matplotlib objects (axes labels, lines, bands, legends)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from benchmark.bench.tables import synthetic_store
from benchmark.experiments import EXPERIMENTS, get_experiment
from benchmark.reporting.figure_text import figure_text
from benchmark.reporting.plots import FIGURES, draw, style


def _words(fig) -> str:
    """The figure's full text, its wrapped lines joined again."""
    return " ".join(figure_text(fig).split())


def _figure(experiment_id: str, tmp_path: Path, store: pd.DataFrame | None = None):
    experiment = get_experiment(experiment_id)
    plan = experiment.plan("smoke", tmp_path)
    if store is None:
        store = synthetic_store(plan)
    return FIGURES[experiment.plot](experiment, "smoke", plan, store), plan


def _labels(fig) -> list[str]:
    """The entries of the figure's one shared legend."""
    (legend,) = fig.legends
    return [t.get_text() for t in legend.get_texts()]


def test_envelope_has_one_panel_per_sparsity_with_imp_band_and_both_references(tmp_path):
    fig, plan = _figure("cifar10-envelope", tmp_path)
    goals = sorted(plan["goal"].unique())
    assert [ax.get_title() for ax in fig.axes] == [f"{g:g}% sparsity" for g in goals]
    for ax in fig.axes:
        assert ax.get_xlabel() == "total retraining epochs"
        assert ax.get_ylabel() == "test accuracy (%)"
        assert len(ax.get_lines()) == 3
        assert _labels(fig) == ["IMP + ALLR", "dense model", "Renda et al."]
        assert len(ax.collections) == 1  # the max-min band over seeds
        imp = ax.get_lines()[0]
        # One point per distinct total E * J of the smoke grid (E in {1, 2, 4, 8, 16}, J in
        # {1, 2, 4}): budgets that double.
        totals = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
        assert list(imp.get_xdata()) == totals


def test_budgeted_initial_draws_deviation_lines_that_end_at_zero(tmp_path):
    fig, _ = _figure("appendix-cifar10-budgeted-initial-ALLR", tmp_path)
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert ax.get_xlabel() == "initial training epochs"
        assert ax.get_ylabel() == "deviation from full budget (pp)"
        lines = ax.get_lines()
        assert len(lines) == 3  # two sparsities and the zero line
        assert _labels(fig) == ["90%", "95%"]
        for line in lines[:2]:
            assert line.get_xdata()[-1] == 40.0 and line.get_ydata()[-1] == pytest.approx(0.0)


def test_selection_criteria_tradeoffs_have_sparsity_and_speedup_rows(tmp_path):
    fig, _ = _figure("appendix-confidence-cifar10-oneshot", tmp_path)
    assert len(fig.axes) == 4
    top, bottom = fig.axes[:2], fig.axes[2:]
    # At smoke scale each panel also says what trained there (the section names the paper's).
    assert [ax.get_title() for ax in top] == [
        f"{s} (smoke: digits, cnn_wide)" for s in ("FT", "SLR")
    ]
    assert all(ax.get_xlabel() == "sparsity (%)" for ax in top)
    assert all(ax.get_xlabel() == "theoretical speedup (x)" for ax in bottom)
    for ax in fig.axes:
        assert _labels(fig) == ["global", "uniform", "uniform+", "erk", "lamp"]
        assert len(ax.get_lines()) == 5 and len(ax.collections) == 5


def test_lr_schedule_figure_uses_the_shared_schedule_colours(tmp_path):
    fig, _ = _figure("lr-schedules", tmp_path, store=pd.DataFrame())
    (ax,) = fig.axes
    assert ax.get_ylabel() == "learning rate"
    lines = ax.get_lines()
    assert [line.get_label().split(" ")[0] for line in lines] == [
        "FT", "LRW", "SLR", "CLR", "LLR", "ALLR",
    ]  # fmt: skip
    assert lines[-1].get_color() == style("ALLR")[0]
    assert len({line.get_color() for line in lines}) == 6


def test_styles_are_stable_and_distinct_for_the_papers_names():
    names = ["BIMP", "GMP", "FT", "ALLR", "global", "lamp"]
    assert len({style(n) for n in names}) == len(names)
    assert style("GMP (linear, hard)") == style("GMP (linear, hard)")
    assert style("GMP (linear, hard)")[1] == style("GMP")[1]


def test_draw_writes_png_and_pdf_and_reports_missing_runs(tmp_path):
    experiment = get_experiment("cifar10-envelope")
    paths = draw(experiment, "smoke", tmp_path / "empty-store", tmp_path / "figs")
    assert [p.suffix for p in paths] == [".png", ".pdf", ".txt"]
    assert all(p.stat().st_size > 1000 for p in paths[:2])
    fig, plan = _figure("cifar10-envelope", tmp_path, store=pd.DataFrame())
    assert f"0/{plan['run_id'].nunique()} runs found" in _words(fig)
    assert all(len(ax.get_lines()) == 0 for ax in fig.axes)


def test_imagenet_envelope_has_a_line_per_schedule_and_the_dense_reference(tmp_path):
    fig, plan = _figure("imagenet-IMP-envelope", tmp_path)
    assert [ax.get_title() for ax in fig.axes] == ["90% sparsity", "95% sparsity"]
    schedules = ("FT", "LRW", "SLR", "CLR", "LLR", "ALLR")
    assert _labels(fig) == [f"IMP + {s}" for s in schedules] + ["dense model"]
    for ax in fig.axes:
        assert ax.get_xlabel() == "total retraining epochs"
        assert len(ax.get_lines()) == 7 and len(ax.collections) == 6
        # Totals E * J for E in {1, 2, 4} and J in {1, 2, 3}: the two schedule tables' budgets.
        assert list(ax.get_lines()[0].get_xdata()) == [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0]


def test_layer_collapse_figure_has_one_shot_and_iterative_panels_per_schedule(tmp_path):
    fig, _ = _figure("appendix-distribution-layer-collapse", tmp_path)
    titles = [
        "One Shot, FT",
        "One Shot, SLR",
        "Iterative (3 cycles), FT",
        "Iterative (3 cycles), SLR",
    ]
    from benchmark.reporting.titles import what_ran

    ran = what_ran(get_experiment("appendix-distribution-layer-collapse"), "smoke", tmp_path)
    assert [ax.get_title() for ax in fig.axes[:4]] == [f"{t} (smoke: {ran})" for t in titles]
    assert all(ax.get_xlabel() == "sparsity (%)" for ax in fig.axes[:4])
    assert all(ax.get_xlabel() == "theoretical speedup (x)" for ax in fig.axes[4:])
    for ax in fig.axes:
        # Uniform+ cannot reach the smoke grid's 98% and above on cnn_wide: not run there.
        assert _labels(fig) == ["global", "uniform", "erk", "lamp"]
        assert len(ax.get_lines()) == 4


def test_gmp_vs_bimp_figure_has_a_line_per_variant(tmp_path):
    fig, plan = _figure("gmp-vs-bimp-cifar100", tmp_path)
    assert len(fig.axes) == 2  # sparsity and speedup against accuracy
    for ax in fig.axes:
        assert ax.get_ylabel() == "test accuracy (%)"
        assert _labels(fig) == list(dict.fromkeys(plan["row"]))
        assert len(ax.get_lines()) == plan["row"].nunique() == 7


PLOTTED = [n for n in EXPERIMENTS.names() if EXPERIMENTS.get(n).plot is not None]


@pytest.mark.parametrize("name", PLOTTED)
def test_every_figure_labels_its_axes_and_names_every_line(name, tmp_path):
    fig, plan = _figure(name, tmp_path)
    assert fig.axes
    rows = set(plan["row"]) if len(plan) else set()
    named: dict[str, None] = {}
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_ylabel()
        lines = ax.get_lines()
        assert lines, f"{name}: a panel without lines"
        named |= dict.fromkeys(x.get_label() for x in lines if not x.get_label().startswith("_"))
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == list(named)  # exactly the drawn lines
    if rows:  # every data line is one of the spec's rows (or a reference line)
        allowed = rows | {f"IMP + {r}" for r in rows} | {"dense model", "Renda et al."}
        assert set(named) <= allowed


def test_lines_of_one_figure_never_share_a_colour(tmp_path):
    fig, plan = _figure("gmp-vs-bimp-cifar100", tmp_path)
    colours = [line.get_color() for line in fig.axes[0].get_lines()]
    assert len(set(colours)) == len(colours) == 7
    # The paper's names keep their colour.
    assert fig.axes[0].get_lines()[-1].get_color() == style("BIMP")[0]


def test_figures_explain_bands_references_and_rows_left_out(tmp_path):
    fig, plan = _figure("cifar10-envelope", tmp_path)
    title = _words(fig)
    assert "Points: mean over 8 seeds; shaded bands: min to max over them" in title
    assert "Renda et al., its own budget" in title
    assert "Not shown" not in title  # every row has points in the synthetic store
    fig, plan = _figure("stable-unstable-results", tmp_path, store=pd.DataFrame())
    rows = list(dict.fromkeys(plan["row"].astype(str)))
    assert f"Not shown (no finished run at a plotted sparsity): {', '.join(rows)}." in (_words(fig))


def test_the_footer_counts_the_seeds_of_the_points_not_of_the_plan(tmp_path):
    experiment = get_experiment("cifar10-envelope")
    plan = experiment.plan("smoke", tmp_path)
    store = synthetic_store(plan)
    fig = FIGURES[experiment.plot](experiment, "smoke", plan, store)
    seeds = plan["seed"].nunique()
    assert seeds > 1
    assert f"Points: mean over {seeds} seeds; shaded" in _words(fig)
    # Only seed 0 has finished (a slice, or a store still filling): 1-seed means.
    first = store[store["run_id"].isin(plan.loc[plan["seed"].eq(0), "run_id"])]
    fig = FIGURES[experiment.plot](experiment, "smoke", plan, first)
    assert f"Points: mean over 1 seed (of the plan's {seeds}); shaded" in _words(fig)


def test_rows_that_draw_the_same_line_share_one_legend_entry_that_says_so():
    from matplotlib.figure import Figure

    from benchmark.reporting.plots import _shared_legend

    fig = Figure()
    for ax in fig.subplots(1, 2):
        ax.plot([1, 2], [3, 4], label="GMP (linear, hard)")
        ax.plot([1, 2], [3, 4], label="GMP (linear, soft)")
        ax.plot([1, 2], [3, 5], label="BIMP")
    _shared_legend(fig)
    assert _labels(fig) == ["GMP (linear, hard) = GMP (linear, soft) (same line)", "BIMP"]
    # Equal in one panel only: two lines, two entries.
    fig = Figure()
    left, right = fig.subplots(1, 2)
    for ax, y in ((left, 4), (right, 6)):
        ax.plot([1, 2], [3, 4], label="A")
        ax.plot([1, 2], [3, y], label="B")
    _shared_legend(fig)
    assert _labels(fig) == ["A", "B"]
    # Equal to 4 significant digits (a speedup measured as 10.598 and as 10.5997): one line.
    fig = Figure()
    for ax in fig.subplots(1, 2):
        ax.plot([10.598, 21.75], [98.75, 98.19], label="GMP (cyclic, hard)")
        ax.plot([10.5997, 21.75], [98.75, 98.19], label="GMP (cyclic, soft)")
    _shared_legend(fig)
    assert _labels(fig) == ["GMP (cyclic, hard) = GMP (cyclic, soft) (same line)"]


# --- The words leave the panels; budgets that double; lines that coincide stay visible --------


def _finished(experiment_id: str, tmp_path: Path):
    """The smoke figure of ``experiment_id`` on a synthetic store, laid out as it is saved."""
    from benchmark.reporting.figure_text import finish

    fig, plan = _figure(experiment_id, tmp_path)
    finish(fig)
    return fig, plan


def test_the_caption_is_under_the_panels_and_the_panels_take_most_of_the_image(tmp_path):
    from benchmark.reporting.figure_text import caption_artist

    for experiment_id in ("cifar10-envelope", "stable-unstable-results", "lr-schedules"):
        fig, _ = _finished(experiment_id, tmp_path)
        renderer = fig.canvas.get_renderer()
        caption = caption_artist(fig)
        assert caption is not None, f"{experiment_id}: no caption"
        box = caption.get_window_extent(renderer)
        panels = [ax.get_tightbbox(renderer) for ax in fig.axes]  # labels and titles included
        assert all(box.y1 <= panel.y0 for panel in panels), f"{experiment_id}: caption on a panel"
        legend = fig.legends[0].get_window_extent(renderer)
        assert box.y1 <= legend.y0 + 1, f"{experiment_id}: caption over the legend"
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width and box.y0 >= 0  # sized to the figure
        assert fig.get_suptitle().count("\n") <= 2  # a short title, not the text
        axes = [ax.get_window_extent(renderer) for ax in fig.axes]
        height = max(a.y1 for a in axes) - min(a.y0 for a in axes)
        assert height / fig.bbox.height >= 0.5, f"{experiment_id}: panels are small"


def test_the_caption_says_what_the_marks_mean_and_the_text_holds_everything(tmp_path):
    from benchmark.reporting.figure_text import caption_artist

    fig, plan = _finished("cifar10-envelope", tmp_path)
    caption = " ".join(caption_artist(fig).get_text().split())
    assert "shaded bands: min to max" in caption and "Renda et al., its own budget" in caption
    text = figure_text(fig)
    assert text.startswith("Smoke scale: digits, cnn_small")
    assert caption.split(" Dotted")[0] in " ".join(text.split())
    assert max(len(line) for line in text.splitlines()) <= 100


def test_budgets_that_double_sit_on_a_log2_axis_ticked_at_the_budgets(tmp_path):
    fig, _ = _finished("cifar10-envelope", tmp_path)
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert "64" in labels and "$\\mathdefault{2^{6}}$" not in labels  # plain numbers
    # A budget that does not span three doublings keeps a linear axis.
    from matplotlib.figure import Figure

    from benchmark.reporting.plots import _budget_axis

    ax = Figure().subplots()
    _budget_axis(ax, [10, 20, 30, 40], "epochs")
    assert ax.get_xscale() == "linear"


def test_lines_that_coincide_stay_distinguishable(tmp_path):
    fig, _ = _finished("imagenet-IMP-envelope", tmp_path)
    lines = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("IMP")]
    # Two schedules drawn over each other both stay visible: the one on top lets the other
    # through its dashes and its hollow markers.
    assert len({line.get_linestyle() for line in lines}) == 4
    fills = [line.get_markerfacecolor() == "none" for line in lines]
    assert any(fills) and not all(fills)
    fig, _ = _finished("cifar10-envelope", tmp_path)
    refs = [line for line in fig.axes[0].get_lines() if not line.get_label().startswith("IMP")]
    dense, renda = refs
    # Equal values still show both: red dashes over black dots, with gaps between the dashes.
    assert dense.get_linestyle() == ":" and renda.get_linestyle() == "--"
    assert dense.get_color() != renda.get_color() and renda.get_zorder() > dense.get_zorder()
    assert dense.get_linewidth() > renda.get_linewidth()


def test_plot_prints_the_figures_text_and_writes_it_beside_the_png(tmp_path, capsys):
    from fake_runs import finish_all

    from benchmark.cli import main

    experiment_id = "gmp-vs-bimp-imagenet"
    store, out = tmp_path / "runs", tmp_path / "figures"
    finish_all(store, [r.cfg for r in get_experiment(experiment_id).runs("smoke", store)])
    capsys.readouterr()
    assert main(["plot", experiment_id, "--store", str(store), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    text = (out / f"{experiment_id}.txt").read_text()
    assert (out / f"{experiment_id}.png").exists() and text in printed
    assert text.startswith("Smoke scale:") and "Points: mean over" in text
    last = text.rstrip().split("\n")[-1]
    assert "claims neither way" in last or last.startswith("Overall:")  # the verdict closes it
