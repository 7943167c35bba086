"""The store as a pandas DataFrame: one row per record, nested fields flattened, with the job each
run was last submitted in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.store.results import Store
from benchmark.store.submissions import load_index


def _flatten(prefix: str, data: dict[str, Any], keep_lists: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(data, dict):
        return out
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            out.update(_flatten(name, value, keep_lists))
        elif isinstance(value, list):
            # Config lists (milestones, exclude) as hashable tuples; histories and per-cycle
            # metric lists stay in the JSON.
            if keep_lists:
                out[name] = tuple(value)
        else:
            out[name] = value
    return out


def load_store(root: str | Path) -> pd.DataFrame:
    """Load a whole results store into a pandas DataFrame (one call).

    One row per run: ``run_id``, ``status``, ``grid`` (the grid that last submitted it, or
    None), every ``config.*`` field (lists as tuples) and the scalar metrics. Records that
    cannot be used are named in warnings and listed in ``frame.attrs["skipped"]``.
    """
    rows = []
    store = Store(root)
    for rec in store.records():
        row = {"run_id": rec["run_id"], "status": rec.get("status")}
        row.update(_flatten("config", rec.get("config", {}), keep_lists=True))
        row.update(_flatten("", rec.get("metrics", {})))
        rows.append(row)
    frame = pd.DataFrame(rows)
    # The records that were named and skipped, for the commands' counts.
    frame.attrs["skipped"] = list(store.skipped.values())
    if len(frame):
        index = load_index(Path(root))
        grids = [index[r].grid if r in index else None for r in frame["run_id"]]
        frame.insert(2, "grid", grids)
    return frame
