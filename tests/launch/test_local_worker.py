"""A local worker of ``submit --executor local`` (issue 36): stopping it (``kill PID`` or
``kill -9 PID``, PID the one ``submit`` prints) stops its task too, and the next ``status`` and
``submit`` say that the worker died."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from benchmark.cli import main


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait(what: str, ready: object, timeout_s: float = 120.0) -> None:
    deadline = time.time() + timeout_s
    while not ready():  # type: ignore[operator]
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "kill"])
def test_stopping_a_local_worker_stops_its_task_and_the_next_submit_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sig: signal.Signals
) -> None:
    store = tmp_path / "runs"
    grid = tmp_path / "w.toml"
    # One dense run that trains far longer than the test waits.
    grid.write_text(
        'name = "w"\n[base]\ndata.name = "digits"\ndata.batch_size = 128\n'
        'method.name = "dense"\nbudget.epochs = 10000\nlogging.progress = false\n'
        "runtime.threads = 1\n"
    )
    submit = ["submit", str(grid), "--store", str(store), "--executor", "local", "--workers", "1"]
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(main(submit)))
    thread.start()
    task = 0
    try:
        record = store / "grids" / "w.json"
        _wait("the submission record", record.exists)
        (worker,) = json.loads(record.read_text())["submissions"][0]["jobs"]
        locks = store / ".locks"
        _wait("the run to start", lambda: any(locks.glob("run-*.lockfile")))
        (lock,) = locks.glob("run-*.lockfile")
        task = json.loads(lock.read_text())["pid"]
        assert task != int(worker) and _running(task)

        os.kill(int(worker), sig)
        _wait("the task to stop with its worker", lambda: not _running(task), timeout_s=30)
        thread.join(60)
        assert codes == [1]  # submit does not say "done" about runs without a result
        assert "have no result" in capsys.readouterr().out
        _wait("the run lock to go", lambda: not lock.exists(), timeout_s=10)

        assert main(["status", str(grid), "--store", str(store)]) == 0
        out = capsys.readouterr().out
        assert f"local worker {worker}" in out and "killed or stopped" in out
        assert main([*submit, "--dry-run"]) == 0
        out = capsys.readouterr().out
        assert f"note: local worker {worker} (1 run) ended without a result" in out
        assert "would submit 1 run" in out
    finally:
        if task and _running(task):
            os.kill(task, signal.SIGKILL)  # the orphan of a worker that did not stop it
        thread.join(60)
