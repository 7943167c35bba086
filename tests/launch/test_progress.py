"""Local grids show progress and where their workers log; status: one running run per job."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from benchmark.launch import LaunchSettings, prepare, submit_grid
from benchmark.launch.grid import grid_from_dict
from benchmark.launch.status import RunStatus, _one_running_run_per_job
from benchmark.store.frame import load_store


@pytest.mark.slow  # a worker process starts Python and imports torch
def test_local_submit_shows_progress_and_where_the_logs_are(tmp_path: Path) -> None:
    grid = grid_from_dict(
        {
            "name": "progress",
            "base": {
                "data": {"name": "digits", "batch_size": 128},
                "budget": {"epochs": 1},
                "logging": {"progress": False},
            },
            "axes": {"seed": [0, 1]},
        }
    )
    store = tmp_path / "runs"
    settings = LaunchSettings(executor="local", workers=1, threads=1)
    out = io.StringIO()
    result = submit_grid(prepare(grid, store, settings), store, settings, out=out)
    text = out.getvalue()
    (pid,) = result.jobs
    logs = store.resolve() / "grids" / "progress" / "local"
    assert f"[local] level 0: 2 runs in 1 local worker (pids {pid}; logs in {logs})" in text
    assert f"[local]   worker {pid}: {logs}/{pid}_0_log.err" in text
    lines = [line for line in text.splitlines() if "runs done" in line]
    assert lines[0] == "[local] level 0: 0/2 runs done (0 failed), 1 running"
    assert lines[-1] == "[local] level 0: 2/2 runs done (0 failed), 0 running"
    assert "logs in" in result.summary()
    frame = load_store(store)
    assert list(frame["grid"]) == ["progress", "progress"]  # which grid each run came from


def test_a_job_running_its_runs_one_after_the_other_counts_one_running() -> None:
    runs = [
        RunStatus("a", "dense", "finished", "7"),
        RunStatus("b", "dense", "running", "7"),
        RunStatus("c", "dense", "running", "7"),
        RunStatus("d", "dense", "running", "8"),
    ]
    _one_running_run_per_job(runs)
    assert [r.state for r in runs] == ["finished", "running", "pending", "running"]
    assert runs[2].detail == "after the running run of job 7"
