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


# A stand-in for submitit's controller (the pid `submit` prints) that starts a task and waits;
# started as a script's background job would start it: SIGINT ignored, inherited by the task.
CONTROLLER = """
import os, subprocess, sys, time
task = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env={
    **os.environ, "SUBMITIT_EXECUTOR": "local", "SUBMITIT_LOCAL_JOB_ID": str(os.getpid())})
print(task.pid, flush=True)
time.sleep(120)
"""
TASK = """
import sys, time
from benchmark.launch.local_worker import follow_local_worker, watch_parent
{setup}
print("ready", flush=True)
time.sleep(120)
"""


def _orphan_test(setup: str) -> None:
    """Start a controller and its task (which runs ``setup``), kill -9 the controller and
    check that the task ends within seconds."""
    import signal as sig
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    controller = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, TASK.format(setup=setup)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        preexec_fn=lambda: sig.signal(sig.SIGINT, sig.SIG_IGN),  # a script's background job
    )
    assert controller.stdout is not None
    task = int(controller.stdout.readline())
    try:
        assert controller.stdout.readline().strip() == "ready"  # the task's, on the same pipe
        assert _running(task)
        controller.kill()
        controller.wait()
        _wait("the task to end with its worker", lambda: not _running(task), timeout_s=10)
    finally:
        if _running(task):
            os.kill(task, signal.SIGKILL)


def test_a_task_ends_when_its_worker_is_killed_although_the_shell_ignored_sigint() -> None:
    _orphan_test("follow_local_worker()")


def test_a_task_whose_parent_death_signal_never_comes_sees_its_parent_gone() -> None:
    import_only = "import os, signal; signal.signal(signal.SIGTERM, signal.default_int_handler)"
    _orphan_test(f"{import_only}; watch_parent(os.getppid(), 0.1)")


def test_a_task_that_outlived_its_worker_is_named_with_its_pid(tmp_path: Path) -> None:
    import subprocess
    import sys

    from benchmark.launch.local_worker import outlived_note, outliving_tasks
    from benchmark.store.results import Store

    holder = (
        "import sys, time; from benchmark.store.results import Store\n"
        "with Store(sys.argv[1]).lock('run-x'):\n    print('held', flush=True); time.sleep(60)"
    )
    root = Path(__file__).resolve().parents[2]
    store = Store(tmp_path / "s")
    found = {}
    for argv in (["submitit.core._submit"], []):  # a submitit task, then another job
        proc = subprocess.Popen(
            [sys.executable, "-c", holder, str(store.root), *argv],
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
            found[bool(argv)] = outliving_tasks(store, ["x", "y"])
        finally:
            proc.kill()
            proc.wait()
    assert list(found[True]) == ["x"] and found[False] == {}
    note = outlived_note(found[True])
    pid = found[True]["x"].pid
    assert f"run x is still trained by pid {pid}" in note and f"kill {pid}" in note
