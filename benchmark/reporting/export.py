"""``prunebench export ID``: every run of a table or figure as one tidy CSV or JSON.

One row per planned run and cell it feeds: the cell (section, row, goal sparsity, budget, x),
the tuned configuration and seed, whether it is the configuration the table selects for that
cell (``selected``; ``selected_goal`` names the goal column(s), which for methods without a
goal sparsity is where the table placed the configuration), its status and metrics (test/val
accuracy, achieved sparsity, theoretical and measured speedup, images/s, wall time), and where
it came from (run id, dense parent, code commit, device, library versions). Planned runs missing
from the store are rows with status ``missing``, never left out; those whose record cannot be
used (damaged, or of the wrong shape: named on stderr) have status ``unusable``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.experiments.base import CELL, Experiment, Scale
from benchmark.store.results import Store

FORMATS = ("csv", "json")
# A planned run whose record exists but cannot be used (named in a warning; see
# benchmark.store.records): no metrics are exported for it.
UNUSABLE = {"status": "unusable"}
METRIC_COLUMNS = {
    "test_top1": ("test", "top1"),
    "test_top5": ("test", "top5"),
    "val_top1": ("val", "top1"),
    "sparsity": ("sparsity",),
    "speedup": ("speedup",),
    "speedup_corrected": ("speedup_corrected",),
    "measured_speedup": ("measured_speedup",),
    "images_per_s": ("images_per_s",),
    "wall_seconds": ("wall_seconds",),
    "compile_seconds": ("compile_seconds",),
    "warmup_seconds": ("warmup_seconds",),
    "step_mode": ("step", "mode"),
}
# A causal language model's columns in place of accuracy and images/s: perplexities (lower is
# better), the one right after the prune, tokens/s, and what the run was and needed.
LM_COLUMNS = {
    "test_ppl": ("test", "ppl"),
    "val_ppl": ("val", "ppl"),
    "ppl_after_prune": ("oneshot", "test_after_prune", "ppl"),
    "sparsity": ("sparsity",),
    "speedup": ("speedup",),
    "speedup_corrected": ("speedup_corrected",),
    "tokens_per_s": ("tokens_per_s",),
    "setup_seconds": ("setup_seconds",),
    "wall_seconds": ("wall_seconds",),
    "offloaded": ("offloaded",),
    "peak_memory_bytes": ("peak_memory_bytes",),
    "peak_host_memory_bytes": ("peak_host_memory_bytes",),
    "step_mode": ("step", "mode"),
}
ENVIRONMENT_COLUMNS = (
    "git_commit",
    "device",
    "device_name",
    "cpu_name",
    "threads",
    "python",
    "torch",
    "torchvision",
    "numpy",
    "hostname",
)


def _get(data: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def run_row(record: dict[str, Any] | None) -> dict[str, Any]:
    """The exported columns of one stored record (None: a missing run)."""
    if record is None:
        return {"status": "missing"}
    metrics = record.get("metrics") or {}
    env = record.get("environment") or {}
    row: dict[str, Any] = {
        "status": record.get("status"),
        "parent_run_id": record.get("parent_run_id"),
        "model": _get(record, ("config", "model", "name")),
        "data": _get(record, ("config", "data", "name")),
    }
    lm = isinstance(metrics.get("test"), dict) and "ppl" in metrics["test"]
    if lm:
        row["model_dtype"] = _get(record, ("config", "model", "dtype"))
        row["pretrained"] = _get(record, ("config", "model", "pretrained"))
    columns = LM_COLUMNS if lm else METRIC_COLUMNS
    row |= {name: _get(metrics, path) for name, path in columns.items()}
    row["latency_device"] = _get(metrics, ("latency", "device_name"))
    row |= {f"env_{key}": env.get(key) for key in ENVIRONMENT_COLUMNS}
    return row


def export_frame(
    experiment: Experiment,
    scale: Scale,
    store_dir: str | Path,
    *,
    plan: pd.DataFrame | None = None,
    procedure: str = "full",
) -> pd.DataFrame:
    """The tidy frame of ``experiment`` at ``scale`` against the store in ``store_dir``.

    ``plan``/``procedure``: another plan of it and how it was tuned (staged tuning's: its
    ``procedure`` column says "staged", and ``selected`` marks the configurations it chose).
    """
    from benchmark.reporting.tables import select_cells
    from benchmark.store.frame import load_store

    plan = experiment.plan(scale, store_dir) if plan is None else plan
    store = Store(store_dir)
    rows = []
    for planned in plan.to_dict("records"):
        record = store.read(planned["run_id"])
        unusable = store.result_path(planned["run_id"]) in store.skipped
        rows.append(planned | (UNUSABLE if unusable else run_row(record)))
    frame = pd.DataFrame(rows)
    frame.insert(0, "experiment", experiment.id)
    frame.insert(1, "scale", scale)
    frame.insert(2, "procedure", procedure)
    best, _ = select_cells(experiment.layout(scale), plan, load_store(store_dir))
    frame["selected"], frame["selected_goal"] = _selection(frame, best)
    frame.attrs["skipped"] = list(store.skipped.values())
    return frame


def _selection(frame: pd.DataFrame, best: pd.DataFrame) -> tuple[list[bool], list[str]]:
    """Per exported row: whether the table selects its configuration for its cell, and the goal
    column(s) it is selected at ("90", "90;95"; "" when not selected).

    A configuration is a cell's choice at one goal sparsity only: the key includes the goal.
    Rows of methods without a goal sparsity (CS, STR, DST; goal NaN) are placed by the table,
    so they match at whichever column(s) their configuration was placed in.
    """
    placed: dict[tuple, set[float]] = {}
    for r in best.to_dict("records"):
        placed.setdefault(_cell_key(r), set()).add(float(r["goal"]))
    selected, goals = [], []
    for r in frame.to_dict("records"):
        at = placed.get(_cell_key(r), set())
        goal = r["goal"]
        if not (isinstance(goal, float) and math.isnan(goal)):
            at = {g for g in at if math.isclose(g, float(goal))}
        selected.append(bool(at))
        goals.append(";".join(f"{g:g}" for g in sorted(at)))
    return selected, goals


def _cell_key(r: dict[str, Any]) -> tuple:
    """(section, row, budget, x, tuned): a configuration of a row, whatever its goal column
    (methods without a goal sparsity get theirs from the table's placement)."""
    return tuple(r[c] for c in CELL if c != "goal") + (r["tuned"],)


def render(frame: pd.DataFrame, fmt: str) -> str:
    """``frame`` as CSV or as a JSON list of records (NaN as null)."""
    if fmt == "csv":
        return frame.to_csv(index=False)
    records = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in frame.to_dict("records")
    ]
    return json.dumps(records, indent=2, default=str) + "\n"
