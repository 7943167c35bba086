"""The paper's figures from a results store, as PNG, PDF and text (matplotlib, Agg, no pyplot).

Every method, schedule and criterion has one colour and marker across all figures (:func:`style`);
within a figure each line also gets its own line style and marker fill, so lines that coincide
stay visible. Points are the configuration selected per cell by mean validation accuracy (as in
the tables); bands span the min and max test accuracy over that configuration's seeds. Budgets
that span three doublings or more sit on a log-2 axis. The words stay off the panels: a short
title, a caption under them and the full text beside the PNG (:mod:`.figure_text`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator, ScalarFormatter

from benchmark.experiments.base import Experiment, Scale
from benchmark.experiments.figure_specs import DENSE_ROW, RENDA_ROW
from benchmark.experiments.slices import Slice
from benchmark.reporting.figure_style import DASHES, figure_styles, style
from benchmark.reporting.figure_text import add_notes, finish, set_parts
from benchmark.reporting.selection import aggregate

ACCURACY_LABEL = "test accuracy (%)"


def _new_figure(rows: int, cols: int, width: float = 4.2, height: float = 3.3) -> Figure:
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    fig.subplots(rows, cols, squeeze=False)
    return fig


def _line(
    ax: Axes,
    frame: pd.DataFrame,
    label: str,
    x: str,
    look: tuple[str, str],
    y: str = "accuracy",
    index: int = 0,
    lines: int = 1,
) -> None:
    """A line with markers and a min-max band over seeds, sorted by ``x``, in ``look``; the figure's
    ``index``-th line (of ``lines``) gets its own dash pattern, and every other one hollow
    (see-through), smaller markers, so that a line drawn over an equal one leaves it visible. The
    more lines, the fainter the bands, so that overlapping bands do not hide the lines."""
    frame = frame.sort_values(x)
    color, marker = look
    hollow = index % 2 == 1
    ax.plot(
        frame[x],
        frame[y],
        color=color,
        marker=marker or None,
        label=label,
        linewidth=1.5,
        linestyle=DASHES[index % len(DASHES)],
        markersize=5 if hollow else 6.5,
        markerfacecolor="none" if hollow else color,
    )
    ax.fill_between(
        frame[x],
        frame[f"{y}_min"],
        frame[f"{y}_max"],
        color=color,
        alpha=min(0.2, 0.5 / lines),
        linewidth=0,
    )


def _shared_legend(fig: Figure, **kwargs: object) -> None:
    """One legend for all panels, below them, so that no legend hides data or the title.

    Every label drawn in any panel appears once, in first-drawn order; an empty store draws none.
    Rows whose lines coincide in every panel (the same points: e.g. rows sharing their runs)
    share one entry that says so, so the legend never names more lines than it shows.
    """
    entries: dict[str, object] = {}
    drawn: dict[str, list[tuple[int, tuple, tuple]]] = {}
    for i, ax in enumerate(fig.axes):
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
            if isinstance(handle, Line2D):
                xy = (_rounded(handle.get_xdata()), _rounded(handle.get_ydata()))
                drawn.setdefault(label, []).append((i, *xy))
    entries = _merge_same_lines(entries, drawn)
    if entries:
        # As many columns (up to 4) as the figure's width holds for its longest label (8-point
        # text: about 15 characters to the inch, and the line sample beside each label).
        longest = max(len(label) for label in entries) + 6
        fits = int(fig.get_figwidth() * 15 // longest)
        fig.legend(
            list(entries.values()),
            list(entries),
            loc="outside lower center",
            ncols=max(1, min(len(entries), 4, fits)),
            **kwargs,
        )


def _rounded(values: Iterable[float]) -> tuple[float, ...]:
    """``values`` to 4 significant digits: points that close print as one on any figure."""
    return tuple(float(f"{float(v):.4g}") for v in values)


def _merge_same_lines(
    entries: dict[str, object], drawn: dict[str, list[tuple[int, tuple, tuple]]]
) -> dict[str, object]:
    """``entries`` with the labels whose lines are the same in every panel (to 4 significant
    digits) joined into one ("A = B (same line)"), keeping the handle drawn last (on top)."""
    by_points: dict[tuple, list[str]] = {}
    for label in entries:
        key = tuple(drawn[label]) if label in drawn else (label,)
        by_points.setdefault(key, []).append(label)
    out: dict[str, object] = {}
    for labels in by_points.values():
        name = labels[0] if len(labels) == 1 else " = ".join(labels) + " (same line)"
        out[name] = entries[labels[-1]]
    return out


def _reference(ax: Axes, value: float, row: str) -> None:
    """A horizontal reference line: the dense model (black, dotted, wider) or Renda et al. (red,
    dashed, drawn over it), so that both stay visible when their values are equal: the red
    dashes leave the black dots between them."""
    color, _ = style(row)
    dense = row == DENSE_ROW
    # axhline does not take part in autoscaling; without this the line can sit on the frame.
    ax.update_datalim([(0.0, value)], updatex=False)
    ax.autoscale_view()
    ax.axhline(
        value,
        color=color,
        linestyle=":" if dense else (0, (5, 4)),
        linewidth=2.2 if dense else 1.3,
        zorder=2.1 if dense else 2.2,
        label="dense model" if dense else row,
    )


def _budget_axis(ax: Axes, xs: Iterable[float], label: str) -> None:
    """``label`` on the x axis; budgets that span three doublings or more (1, 2, 4, ..., 64) on a
    log-2 axis, ticked at the budgets themselves when there are few, else at powers of 2."""
    ax.set_xlabel(label)
    values = sorted({float(v) for v in xs if pd.notna(v)})
    if len(values) < 3 or values[0] <= 0 or values[-1] / values[0] < 8:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        return
    ax.set_xscale("log", base=2)
    ticks = values if len(values) <= 10 else [2.0**k for k in range(-4, 16)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(ScalarFormatter())


def _footer(
    fig: Figure,
    experiment: Experiment,
    scale: Scale,
    plan: pd.DataFrame,
    missing: int,
    best: pd.DataFrame,
    store: pd.DataFrame,
) -> None:
    """What ran, how many seeds each point averages, how many planned runs the store holds,
    what the marks mean; at smoke scale what ran comes first and the paper's figure second.

    Nothing is left out silently: rows of the plan without a single point are named, and so
    are the paper's sections a smoke grid does not run.
    """
    from benchmark.reporting.titles import scale_text, sections_not_run

    total = plan["run_id"].nunique()
    notes = [f"Points: {_seeds_text(best, plan, store)}; shaded bands: min to max over them."]
    images = _test_images(plan, store)
    if images:
        notes.append(f"One test image = {100 / images:.2g} accuracy points ({images} test images).")
    rows = list(dict.fromkeys(plan["row"].astype(str)))
    if DENSE_ROW in rows:
        notes.append("Dotted black line: the dense model.")
    if RENDA_ROW in rows:
        notes.append(
            f"Dashed red line: {RENDA_ROW}, its own budget (T_orig retraining epochs per "
            "cycle), not on the x axis."
        )
    drawn = set(best["row"].astype(str)) if "row" in best else set()
    absent = [r for r in rows if r not in drawn]
    if absent:
        notes.append(f"Not shown (no finished run at a plotted sparsity): {', '.join(absent)}.")
    ran = scale_text(experiment, scale, ".")
    found = f"{total - missing}/{total} runs found"
    if scale == "smoke":
        # The data and model that trained lead; the paper's figure is what they stand in for.
        head = [f"{ran[0].upper()}{ran[1:]} ({found})", f"stand-in for: {experiment.description}"]
        skipped = sections_not_run(experiment, scale)
        if skipped:
            head.append(f"not run at smoke scale: {', '.join(skipped)}")
    else:
        head = [experiment.description, f"({ran}; {found})"]
    set_parts(fig, head, notes)


def _point_seeds(best: pd.DataFrame, plan: pd.DataFrame, store: pd.DataFrame) -> list[int]:
    """The distinct seeds of finished runs behind each drawn point (a run planned in several
    cells, like a dense reference, counts once)."""
    if best.empty or "status" not in store:
        return []
    done = set(store.loc[store["status"].eq("finished"), "run_id"])
    runs = plan[plan["run_id"].isin(done)]
    keys = ["section", "row", "budget", "x", "tuned"]
    joined = best[[*keys, "goal"]].merge(runs, on=keys, suffixes=("", "_plan"))
    # A method without a goal sparsity is planned with goal NaN and placed by the table.
    joined = joined[joined["goal_plan"].isna() | joined["goal_plan"].eq(joined["goal"])]
    return [int(n) for n in joined.groupby([*keys, "goal"], dropna=False)["seed"].nunique()]


def _seeds_text(best: pd.DataFrame, plan: pd.DataFrame, store: pd.DataFrame) -> str:
    """How many seeds the drawn points average (from the points, not the plan: a slice or a
    partly finished store draws means over fewer), e.g. ``mean over 2 seeds (of the plan's 8)``."""
    planned = plan["seed"].nunique()
    counts = sorted(set(_point_seeds(best, plan, store)))
    if not counts:
        return f"no point drawn yet (the plan has {planned} seed{'' if planned == 1 else 's'})"
    low, high = counts[0], counts[-1]
    seeds = f"{low}" if low == high else f"{low}-{high}"
    text = f"mean over {seeds} seed{'' if high == 1 else 's'}"
    return text if low == high == planned else f"{text} (of the plan's {planned})"


def _test_images(plan: pd.DataFrame, store: pd.DataFrame) -> int | None:
    """The test-set size of the plan's finished runs (records keep ``test.n``), if one."""
    if "test.n" not in store or "run_id" not in store:
        return None
    sizes = store.loc[store["run_id"].isin(plan["run_id"]), "test.n"].dropna().unique()
    return int(sizes[0]) if len(sizes) == 1 else None


def _panel_title(experiment: Experiment, scale: Scale, section: str) -> str:
    """A panel's section, and at smoke scale what really trained there ("CIFAR-10 (smoke:
    digits, cnn_wide)": the section names the paper's data, not the smoke run's); the default
    section has no name of its own."""
    named = "" if section == "comparison" else section
    if scale != "smoke":
        return named
    from benchmark.reporting.titles import what_ran

    ran = f"smoke: {what_ran(experiment, scale, '.', section)}"
    return f"{named} ({ran})" if named else ran


# --------------------------------------------------------------------------- figures


def envelope_figure(
    experiment: Experiment, scale: Scale, plan: pd.DataFrame, store: pd.DataFrame
) -> Figure:
    """Best test accuracy per total retraining epochs; dense and Renda et al. as references."""
    best, missing = _aggregate(plan, store)
    looks = figure_styles(plan["row"].astype(str))
    goals = sorted(plan["goal"].dropna().unique())
    fig = _new_figure(1, len(goals))
    order = list(looks)
    budgets = plan.loc[plan["section"] != "reference", "x"]
    for ax, goal in zip(fig.axes, goals, strict=True):
        at = best[best["goal"] == goal]
        for row, frame in _by_row(at[at["section"] != "reference"], plan):
            _line(
                ax, frame, f"IMP + {row}", "x", looks[row], index=order.index(row), lines=len(order)
            )
        for row in (DENSE_ROW, RENDA_ROW):
            ref = at[at["row"] == row]
            if len(ref):
                _reference(ax, float(ref["accuracy"].iloc[0]), row)
        ax.set_title(f"{goal:g}% sparsity")
        _budget_axis(ax, budgets, "total retraining epochs")
        ax.set_ylabel(ACCURACY_LABEL)
        ax.grid(True, alpha=0.3)
    _shared_legend(fig, fontsize=8)
    _footer(fig, experiment, scale, plan, missing, best, store)
    return fig


def budgeted_initial_figure(
    experiment: Experiment, scale: Scale, plan: pd.DataFrame, store: pd.DataFrame
) -> Figure:
    """Deviation from the full-initial-budget accuracy against the initial training length."""
    best, missing = _aggregate(plan, store)
    looks = figure_styles(plan["row"].astype(str))
    sections = list(dict.fromkeys(plan["section"]))
    fig = _new_figure(len(sections), 1, width=5.5)
    order = list(looks)
    for ax, section in zip(fig.axes, sections, strict=True):
        for row, frame in _by_row(best[best["section"] == section], plan):
            full = frame.loc[frame["x"].idxmax(), "accuracy"]
            shifted = frame.assign(
                **{c: frame[c] - full for c in ("accuracy", "accuracy_min", "accuracy_max")}
            )
            _line(ax, shifted, str(row), "x", looks[row], index=order.index(row), lines=len(order))
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_title(_panel_title(experiment, scale, section), fontsize=9)
        _budget_axis(ax, plan["x"], "initial training epochs")
        ax.set_ylabel("deviation from full budget (pp)")
        ax.grid(True, alpha=0.3)
    _shared_legend(fig, title="goal sparsity", fontsize=8)
    _footer(fig, experiment, scale, plan, missing, best, store)
    return fig


def tradeoff_figure(
    experiment: Experiment, scale: Scale, plan: pd.DataFrame, store: pd.DataFrame
) -> Figure:
    """Per section: achieved sparsity vs accuracy (top) and theoretical speedup vs accuracy."""
    layout = experiment.layout(scale)
    goals = {s: b.sparsities for b in layout.blocks for s, _ in b.groups} if layout else None
    best, missing = _aggregate(plan, store, goals)
    looks = figure_styles(plan["row"].astype(str))
    sections = list(dict.fromkeys(plan["section"]))
    # One section alone gets a wider panel so the title fits.
    fig = _new_figure(2, len(sections), width=max(4.2, 7.0 / len(sections)))
    axes = np.array(fig.axes).reshape(2, len(sections))
    for j, section in enumerate(sections):
        at = best[best["section"] == section]
        for ax, x, xlabel in (
            (axes[0, j], "sparsity", "sparsity (%)"),
            (axes[1, j], "speedup", "theoretical speedup (x)"),
        ):
            for row, frame in _by_row(at, plan):
                _line(ax, frame, row, x, looks[row], index=list(looks).index(row), lines=len(looks))
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ACCURACY_LABEL)
            ax.set_title(_panel_title(experiment, scale, section), fontsize=9)
            ax.grid(True, alpha=0.3)
    _shared_legend(fig, fontsize=8)
    _footer(fig, experiment, scale, plan, missing, best, store)
    return fig


def lr_schedules_figure(
    experiment: Experiment, scale: Scale, plan: pd.DataFrame, store: pd.DataFrame
) -> Figure:
    """The paper's Figure 1 (no runs needed), recoloured with the shared schedule styles."""
    from benchmark.reporting.schedule_figure import plot_retraining_schedules

    fig = plot_retraining_schedules(None)
    fig.set_size_inches(6.4, 4.2)  # room for the legend and caption under the panel
    ax = fig.axes[0]
    ax.get_legend().remove()
    # Schedules share their values in parts (FT and LRW end on the same level): each keeps a
    # dash pattern of its own, so none hides another.
    for i, line in enumerate(ax.get_lines()):
        color, _ = style(line.get_label().split(" ")[0])
        line.set(color=color, linestyle=DASHES[i % len(DASHES)])
    _shared_legend(fig, fontsize=8)
    set_parts(
        fig,
        [experiment.description],
        [
            "The learning rate of each retraining schedule over its 60 retraining epochs, after "
            "an original stepped schedule of 200 epochs (0.1; 0.01 from epoch 90; 0.001 from "
            "epoch 180). ALLR's discount d = d2 = 60/200; no runs are needed."
        ],
    )
    return fig


def _by_row(best: pd.DataFrame, plan: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The selected points of each row, rows in the spec's order (legends stay stable)."""
    order = list(dict.fromkeys(plan["row"]))
    groups = dict(tuple(best.groupby("row", sort=False)))
    return [(str(row), groups[row]) for row in order if row in groups]


def _aggregate(
    plan: pd.DataFrame, store: pd.DataFrame, goals: dict | None = None
) -> tuple[pd.DataFrame, int]:
    best, counts = aggregate(plan, store, goals)
    done = (
        plan.merge(store[["run_id", "status"]], on="run_id", how="left")
        if "status" in store
        else plan.assign(status=None)
    )
    missing = plan["run_id"].nunique() - done.loc[done["status"].eq("finished"), "run_id"].nunique()
    return best, missing


FIGURES: dict[str, Callable[[Experiment, Scale, pd.DataFrame, pd.DataFrame], Figure]] = {
    "envelope": envelope_figure,
    "budgeted_initial": budgeted_initial_figure,
    "criteria": tradeoff_figure,
    "methods": tradeoff_figure,
    "lr_schedules": lr_schedules_figure,
}


def build_figure(
    experiment: Experiment,
    scale: Scale,
    store_dir: str | Path,
    *,
    within: Slice | None = None,
    plan: pd.DataFrame | None = None,
    labels: Sequence[str] = (),
) -> Figure:
    """The figure of ``experiment`` from the store in ``store_dir`` (not saved).

    ``within``: a slice; only its runs count as found (the others as missing, and rows without
    a point are named in the footer). ``plan``: another plan of it (staged tuning's);
    ``labels`` say how it was built, under the title.
    """
    from benchmark.core.errors import ConfigError
    from benchmark.store.frame import load_store

    if experiment.plot is None:
        raise ConfigError("figure id", experiment.id, "the id of a figure (prunebench list)")
    store = load_store(store_dir)
    plan = experiment.plan(scale, store_dir) if plan is None else plan
    labels = list(labels)
    if within is not None and not within.everything:
        if len(store):
            store = store[store["run_id"].isin(within.apply(plan)["run_id"])]
        labels.append(f"slice: {within.label()}; runs outside it count as missing")
    fig = FIGURES[experiment.plot](experiment, scale, plan, store)
    verdict: list[str] = []
    if len(plan):  # whether it shows the paper's shape closes the text
        from benchmark.reporting.figure_agreement import figure_agreement

        verdict = figure_agreement(experiment, plan, store)
    add_notes(fig, head=["; ".join(labels)] if labels else [], verdict=verdict)
    finish(fig)
    return fig


def draw(
    experiment: Experiment,
    scale: Scale,
    store_dir: str | Path,
    out_dir: Path,
    *,
    within: Slice | None = None,
    plan: pd.DataFrame | None = None,
    labels: Sequence[str] = (),
) -> list[Path]:
    """Build the figure of ``experiment`` and save it as ``out_dir/<id>.png`` and ``.pdf``, with
    its full text in ``out_dir/<id>.txt``."""
    from benchmark.reporting.figure_text import figure_text

    fig = build_figure(experiment, scale, store_dir, within=within, plan=plan, labels=labels)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{experiment.id}{suffix}" for suffix in (".png", ".pdf", ".txt")]
    fig.savefig(paths[0], dpi=130)
    fig.savefig(paths[1])
    paths[2].write_text(figure_text(fig), encoding="utf-8")
    return paths
