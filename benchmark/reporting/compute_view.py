"""Equal-compute view: accuracy against measured training cost, with a Pareto front per method.

The paper compares methods at equal epochs; some methods cost more per epoch (extra forward
passes, dense parents, regrowth). Here every configuration of a spec is placed by

* **cost**: device-hours = (the run's wall time x its devices + its dense parent's wall time x
  the parent's devices, when it starts from one) / 3600, averaged over its seeds. Devices = the
  record's ``distributed.devices`` (distinct (host, device) pairs that trained it: N processes
  on one CPU host count once; 1 when absent, as in records older than data-parallel runs). On a
  GPU these are GPU-hours; CPU runs are labelled as CPU-hours;
* **accuracy**: mean test top-1 over its seeds (percent).

Per (section, method, goal sparsity) the Pareto front keeps the configurations that no other
configuration beats on both (cheaper or equal and more accurate). Methods without a goal
sparsity (CS, STR, DST) are grouped in the goal column the table places each configuration in
(by its mean achieved sparsity, :func:`benchmark.reporting.selection.place_unspecified`); a
configuration no column takes is its own group, shown with its achieved sparsity. Runs timed on
different devices are never pooled: each device gets its own panel and table section, and the
title says that devices differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from benchmark.experiments.base import Experiment, Scale
from benchmark.reporting.selection import place_unspecified
from benchmark.store.results import FINISHED, Store

CONFIG = ["section", "row", "goal", "budget", "x", "tuned"]


def record_devices(record: dict[str, Any]) -> int:
    """Devices that trained a run: ``distributed.devices`` of its record (1 when absent)."""
    devices = (record.get("distributed") or {}).get("devices")
    return int(devices) if devices else 1


def run_cost(record: dict[str, Any], store: Store) -> float | None:
    """Device-hours of one finished run, its dense parent's included (None without a timing);
    each run's seconds count with its own devices."""
    seconds = (record.get("metrics") or {}).get("wall_seconds")
    if seconds is None:
        return None
    device_seconds = seconds * record_devices(record)
    parent_id = record.get("parent_run_id")
    if parent_id:
        parent = store.read(parent_id) or {}
        parent_seconds = (parent.get("metrics") or {}).get("wall_seconds") or 0.0
        device_seconds += parent_seconds * record_devices(parent)
    return device_seconds / 3600.0


def device_label(record: dict[str, Any]) -> str:
    """The device a run was timed on, e.g. "cuda (NVIDIA H100)" or "cpu (AMD EPYC 9654)"."""
    env = record.get("environment") or {}
    kind = str(env.get("device", "unknown")).split(":")[0]
    name = env.get("device_name") or env.get("cpu_name")
    if not name and kind == "cpu" and env.get("hostname"):
        # Older records hold no CPU model: the host keeps machines apart (the kernel's
        # platform string said nothing about the processor).
        name = f"host {env['hostname']}, model not recorded"
    return f"{kind} ({name})" if name else kind


def cost_frame(experiment: Experiment, scale: Scale, store_dir: str | Path) -> pd.DataFrame:
    """Per configuration and device: mean accuracy, achieved sparsity and cost, seeds, and
    Pareto membership (methods without a goal sparsity placed in the table's goal columns)."""
    plan = experiment.plan(scale, store_dir)
    store = Store(store_dir)
    rows = []
    for planned in plan.to_dict("records"):
        record = store.read(planned["run_id"])
        if record is None or record.get("status") != FINISHED:
            continue
        cost = run_cost(record, store)
        metrics = record.get("metrics") or {}
        accuracy = (metrics.get("test") or {}).get("top1")
        if cost is None or accuracy is None:
            continue
        sparsity = metrics.get("sparsity")
        rows.append(planned | {"cost": cost, "accuracy": 100.0 * accuracy,
                               "achieved": np.nan if sparsity is None else 100.0 * sparsity,
                               "device": device_label(record)})  # fmt: skip
    columns = [*CONFIG, "device", "achieved", "accuracy", "cost", "seeds", "pareto"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    grouped = frame.groupby([*CONFIG, "device"], sort=False, dropna=False)
    points = grouped.agg(
        accuracy=("accuracy", "mean"),
        achieved=("achieved", "mean"),
        cost=("cost", "mean"),
        seeds=("seed", "nunique"),
    ).reset_index()
    points = _place_goal_less(points, _goal_columns(experiment, scale, plan))
    points["pareto"] = False
    # An unplaced configuration (goal NaN) is its own group: its achieved sparsity is unlike
    # any other's, so nothing there is comparable.
    # (Built with numpy: pandas 2.x's Series.where asserts on an Index as its "other".)
    goal = points["goal"]
    placed = np.where(goal.notna(), goal.to_numpy(dtype=object), points.index.to_numpy(object))
    group = pd.Series(placed, index=points.index, dtype=object)
    for _, by_group in points.groupby(["section", "row", group, "device"], sort=False):
        points.loc[pareto_front(by_group), "pareto"] = True
    return points[columns]


def _goal_columns(experiment: Experiment, scale: Scale, plan: pd.DataFrame) -> dict:
    """Section -> goal sparsities: the table's columns, else (figures) the plan's goals."""
    layout = experiment.layout(scale)
    if layout is not None:
        return {s: b.sparsities for b in layout.blocks for s, _ in b.groups}
    goals = plan.dropna(subset=["goal"]).groupby("section")["goal"].unique()
    return {section: sorted(values) for section, values in goals.items()}


def _place_goal_less(points: pd.DataFrame, goals: dict) -> pd.DataFrame:
    """Points without a goal get the column(s) the table places them in, per device; those no
    column takes keep a NaN goal."""
    free = points["goal"].isna()
    if not free.any():
        return points
    loose = points[free].assign(_point=np.arange(int(free.sum())))
    placed = []
    for _, by_device in loose.groupby("device", sort=False):
        stats = by_device.rename(columns={"achieved": "sparsity"})
        inside = place_unspecified(stats, goals).rename(columns={"sparsity": "achieved"})
        placed += [inside, by_device[~by_device["_point"].isin(inside["_point"])]]
    return pd.concat([points[~free], *placed], ignore_index=True).drop(columns="_point")


def pareto_front(points: pd.DataFrame) -> list:
    """Index labels of the points not dominated in (lower ``cost``, higher ``accuracy``)."""
    ordered = points.sort_values(["cost", "accuracy"], ascending=[True, False], kind="mergesort")
    front, best = [], -np.inf
    for label, accuracy in zip(ordered.index, ordered["accuracy"], strict=True):
        if accuracy > best:
            front.append(label)
            best = accuracy
    return front


def _unit(device: str) -> str:
    return "GPU-hours" if device.startswith("cuda") else "CPU-hours"


def devices_note(points: pd.DataFrame) -> str:
    """ "" for one device, else a sentence saying that devices differ and are not pooled."""
    devices = sorted(set(points["device"]))
    if len(devices) <= 1:
        return ""
    return f"runs were timed on {len(devices)} devices ({', '.join(devices)}); not pooled"


def render_markdown(points: pd.DataFrame, title: str, width: int | None = None) -> str:
    """The Pareto points per device, section, method and goal sparsity as Markdown (each table
    split to ``width`` columns, its section and method repeated, and the prose wrapped)."""
    from benchmark.core.textwidth import pipe_table, wrap

    out = [f"### {title}: accuracy vs measured training cost", ""]
    note = devices_note(points)
    if note:
        out += [f"Note: {note}.", ""]
    for device, by_device in points.groupby("device", sort=False):
        header = ["Section", "Method", "Goal %", "Budget", "Configuration", "Achieved %",
                  _unit(str(device)), "Acc.", "n"]  # fmt: skip
        rows = [header]
        for r in by_device[by_device["pareto"]].to_dict("records"):
            goal = "none reached" if pd.isna(r["goal"]) else f"{r['goal']:g}"
            achieved = "" if pd.isna(r["achieved"]) else f"{r['achieved']:.2f}"
            tuned = r["tuned"] or "(default)"
            rows.append([r["section"], r["row"], goal, r["budget"], tuned, achieved,
                         f"{r['cost']:.4g}", f"{r['accuracy']:.2f}", str(r["seeds"])])  # fmt: skip
        out += [f"**{device}**", "", *pipe_table(rows, "llrllrrrr", width, keep=2), ""]
    out.append("Only Pareto-optimal configurations are listed (no cheaper one is as accurate).")
    out.append(
        "Cost = wall time x devices + the dense parent's wall time x its devices, mean over "
        "seeds. Achieved: mean achieved sparsity; methods without a goal sparsity are grouped "
        "in the goal column the table places them in (none reached: no column takes them)."
    )
    return wrap("\n".join(out), width) + "\n"


def cost_figure(points: pd.DataFrame, title: str) -> Figure:
    """One panel per device and goal sparsity: all configurations, Pareto front per method."""
    from benchmark.reporting.figure_style import figure_styles
    from benchmark.reporting.plots import _new_figure, _shared_legend

    panels = list(points.groupby(["device", "goal"], sort=False, dropna=False)) or [(("", 0), None)]
    fig = _new_figure(1, len(panels))
    looks = figure_styles(points["row"].astype(str))
    for ax, ((device, goal), frame) in zip(fig.axes, panels, strict=True):
        if frame is None:
            ax.set_title("no finished runs")
            continue
        for row, by_row in frame.groupby("row", sort=False):
            color, marker = looks[str(row)]
            ax.scatter(by_row["cost"], by_row["accuracy"], color=color, alpha=0.35,
                       marker=marker or "o", linewidths=0)  # fmt: skip
            front = by_row[by_row["pareto"]].sort_values("cost")
            ax.plot(front["cost"], front["accuracy"], color=color, marker=marker or "o",
                    label=str(row))  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel(f"{_unit(str(device))} (wall time x devices)")
        ax.set_ylabel("test accuracy (%)")
        sparsity = "no goal column reached, " if pd.isna(goal) else f"{goal:g}% sparsity, "
        ax.set_title(f"{sparsity}{device}", fontsize=9)
        ax.grid(True, alpha=0.3)
    _shared_legend(fig, fontsize=8)
    note = devices_note(points)
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=9)
    return fig
