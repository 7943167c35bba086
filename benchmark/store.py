"""The results store: one JSON file per run, written atomically, loaded into pandas."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.checkpoint import write_json_atomic

FINISHED = "finished"
FAILED = "failed"


class ResultExistsError(RuntimeError):
    """A finished result would be overwritten."""


class Store:
    """A folder of run results (``<run_id>.json``), checkpoints and final weights."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def result_path(self, run_id: str) -> Path:
        """Where the result JSON of ``run_id`` lives."""
        return self.root / f"{run_id}.json"

    def checkpoint_path(self, run_id: str) -> Path:
        """Where the last epoch checkpoint of ``run_id`` lives."""
        return self.root / "checkpoints" / f"{run_id}.pt"

    def weights_path(self, run_id: str) -> Path:
        """Where the final weights of ``run_id`` live (dense parents are loaded from here)."""
        return self.root / "weights" / f"{run_id}.pt"

    def read(self, run_id: str) -> dict[str, Any] | None:
        """The stored record of ``run_id`` or None."""
        path = self.result_path(run_id)
        if not path.exists():
            return None
        return json.loads(path.read_text())

    def status(self, run_id: str) -> str | None:
        """'finished', 'failed' or None (no record)."""
        record = self.read(run_id)
        return None if record is None else record.get("status")

    def is_finished(self, run_id: str) -> bool:
        """Whether ``run_id`` has a finished result."""
        return self.status(run_id) == FINISHED

    def write(self, record: dict[str, Any], *, force: bool = False) -> Path:
        """Atomically write a run record; a finished one is archived, never overwritten."""
        run_id = record["run_id"]
        path = self.result_path(run_id)
        if self.is_finished(run_id):
            if not force:
                raise ResultExistsError(f"run {run_id} has finished; use --force to rerun it")
            archive = self.root / "archive" / f"{run_id}-{time.strftime('%Y%m%d-%H%M%S')}.json"
            archive.parent.mkdir(parents=True, exist_ok=True)
            path.rename(archive)
        write_json_atomic(path, record)
        return path

    def records(self) -> list[dict[str, Any]]:
        """Every run record in the store."""
        if not self.root.exists():
            return []
        return [json.loads(p.read_text()) for p in sorted(self.root.glob("*.json"))]

    def dataframe(self) -> pd.DataFrame:
        """The whole store as one DataFrame: a row per run, config and metrics flattened."""
        rows = []
        for rec in self.records():
            row = {"run_id": rec["run_id"], "status": rec.get("status")}
            row.update(_flatten("config", rec.get("config", {}), keep_lists=True))
            row.update(_flatten("", rec.get("metrics", {})))
            rows.append(row)
        return pd.DataFrame(rows)


def _flatten(prefix: str, data: dict[str, Any], keep_lists: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
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
    None), every ``config.*`` field (lists as tuples) and the scalar metrics.
    """
    from benchmark.launch.records import load_index

    frame = Store(root).dataframe()
    if len(frame):
        index = load_index(Path(root))
        grids = [index[r].grid if r in index else None for r in frame["run_id"]]
        frame.insert(2, "grid", grids)
    return frame
