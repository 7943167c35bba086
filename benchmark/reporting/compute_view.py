"""Equal-compute view: accuracy against measured training cost, with a Pareto front per method.

The paper compares methods at equal epochs; some methods cost more per epoch (extra forward
passes, dense parents, regrowth). Here every configuration of a spec is placed by

* **cost**: device-hours = (the run's wall time + its dense parent's wall time, when it starts
  from one) x devices / 3600, averaged over its seeds. Devices = the record's
  ``environment.devices`` (1 when absent: every run of this harness uses one device). On a GPU
  these are GPU-hours; CPU runs are labelled as CPU-hours;
* **accuracy**: mean test top-1 over its seeds (percent).

Per (section, method, goal sparsity) the Pareto front keeps the configurations that no other
configuration beats on both (cheaper or equal and more accurate). Runs timed on different
devices are never pooled: each device gets its own panel and table section, and the title says
that devices differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from benchmark.experiments.base import Experiment, Scale
from benchmark.store.results import FINISHED, Store

CONFIG = ["section", "row", "goal", "budget", "x", "tuned"]


def run_cost(record: dict[str, Any], store: Store) -> float | None:
    """Device-hours of one finished run, its dense parent's included (None without a timing)."""
    seconds = (record.get("metrics") or {}).get("wall_seconds")
    if seconds is None:
        return None
    parent_id = record.get("parent_run_id")
    if parent_id:
        parent = store.read(parent_id) or {}
        seconds += (parent.get("metrics") or {}).get("wall_seconds") or 0.0
    devices = (record.get("environment") or {}).get("devices", 1)
    return seconds * devices / 3600.0


def device_label(record: dict[str, Any]) -> str:
    """The device a run was timed on, e.g. "cuda (NVIDIA H100)" or "cpu (x86_64)"."""
    env = record.get("environment") or {}
    kind = str(env.get("device", "unknown")).split(":")[0]
    name = env.get("device_name") or env.get("platform", "")
    return f"{kind} ({name})" if name else kind


def cost_frame(experiment: Experiment, scale: Scale, store_dir: str | Path) -> pd.DataFrame:
    """Per configuration and device: mean accuracy, mean cost, seeds, and Pareto membership."""
    plan = experiment.plan(scale, store_dir)
    store = Store(store_dir)
    rows = []
    for planned in plan.to_dict("records"):
        record = store.read(planned["run_id"])
        if record is None or record.get("status") != FINISHED:
            continue
        cost = run_cost(record, store)
        accuracy = ((record.get("metrics") or {}).get("test") or {}).get("top1")
        if cost is None or accuracy is None:
            continue
        rows.append(planned | {"cost": cost, "accuracy": 100.0 * accuracy,
                               "device": device_label(record)})  # fmt: skip
    columns = [*CONFIG, "device", "accuracy", "cost", "seeds", "pareto"]
    if not rows:
        return pd.DataFrame(columns=columns)
    frame = pd.DataFrame(rows)
    frame["goal"] = frame["goal"].fillna(-1.0)  # methods without a goal sparsity: one group
    grouped = frame.groupby([*CONFIG, "device"], sort=False, dropna=False)
    points = grouped.agg(
        accuracy=("accuracy", "mean"), cost=("cost", "mean"), seeds=("seed", "nunique")
    ).reset_index()
    points["pareto"] = False
    for _, group in points.groupby(["section", "row", "goal", "device"], sort=False):
        points.loc[pareto_front(group), "pareto"] = True
    points["goal"] = points["goal"].replace(-1.0, np.nan)
    return points[columns]


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


def render_markdown(points: pd.DataFrame, title: str) -> str:
    """The Pareto points per device, section, method and goal sparsity as Markdown."""
    out = [f"### {title}: accuracy vs measured training cost", ""]
    note = devices_note(points)
    if note:
        out += [f"Note: {note}.", ""]
    for device, by_device in points.groupby("device", sort=False):
        unit = _unit(str(device))
        out += [f"**{device}**", "", f"| Section | Method | Goal % | Budget | {unit} | Acc. | n |",
                "|:---|:---|---:|:---|---:|---:|---:|"]  # fmt: skip
        for r in by_device[by_device["pareto"]].to_dict("records"):
            goal = "" if pd.isna(r["goal"]) else f"{r['goal']:g}"
            out.append(
                f"| {r['section']} | {r['row']} | {goal} | {r['budget']} | {r['cost']:.4g} | "
                f"{r['accuracy']:.2f} | {r['seeds']} |"
            )
        out.append("")
    out.append("Only Pareto-optimal configurations are listed (no cheaper one is as accurate).")
    out.append("Cost = (wall time + dense parent's wall time) x devices, mean over seeds.")
    return "\n".join(out) + "\n"


def cost_figure(points: pd.DataFrame, title: str) -> Figure:
    """One panel per device and goal sparsity: all configurations, Pareto front per method."""
    from benchmark.reporting.plots import _new_figure, _shared_legend, figure_styles

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
        sparsity = "" if pd.isna(goal) else f"{goal:g}% sparsity, "
        ax.set_title(f"{sparsity}{device}", fontsize=9)
        ax.grid(True, alpha=0.3)
    _shared_legend(fig, fontsize=8)
    note = devices_note(points)
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=9)
    return fig
