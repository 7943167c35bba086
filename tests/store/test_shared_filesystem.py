"""The store on shared filesystems (issue 29): flock that fails (ENOSYS) or holds on one node
only, lock files of dead owners, and a final result write that loses nothing without a lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import cli_run, tiny_config

from benchmark.cli import main
from benchmark.store.errors import StoreWarning
from benchmark.store.results import Store

FAST = ["method.name=dense", "budget.epochs=1"]


@pytest.fixture
def flock_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    """fcntl's locks fail as on Lustre without ``flock``, BeeGFS by default, some NFS mounts."""

    def enosys(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", enosys)
    monkeypatch.setattr(fcntl, "lockf", enosys)


def finished_results(store: Path) -> list[dict[str, Any]]:
    """Every finished record of ``store``: the current ones and those in archive/."""
    paths = [*store.glob("*.json"), *(store / "archive").glob("*.json")]
    records = [json.loads(p.read_text()) for p in paths]
    return [r for r in records if r.get("status") == "finished"]


# --------------------------------------------------------------------------- flock fails


def run_cli(store: Path, *flags: str) -> int:
    """``prunebench run FLAGS`` of a one-epoch dense digits run into ``store``."""
    sets = [f"output.dir={str(store)!r}", *FAST, "logging.progress=false", "runtime.threads=1"]
    return main(["run", *flags, *(x for kv in sets for x in ("--set", kv))])


@pytest.mark.usefixtures("flock_unsupported")
def test_without_flock_a_run_and_forced_reruns_work_and_lose_nothing(tmp_path: Path) -> None:
    store = tmp_path / "s"
    assert run_cli(store) == 0
    assert run_cli(store, "--force") == 0
    assert run_cli(store, "--force") == 0
    results = finished_results(store)
    assert len({r["started"] for r in results}) == 3  # the first run and both reruns
    assert len(list(store.glob("*.json"))) == 1
    archived = sorted(p.suffix for p in (store / "archive").iterdir())
    assert archived == [".json", ".json", ".pt", ".pt"]  # each replaced result with its weights


@pytest.mark.usefixtures("flock_unsupported")
def test_without_flock_a_grid_with_a_dense_parent_runs(tmp_path: Path) -> None:
    store = tmp_path / "s"
    grid = tmp_path / "g.toml"
    grid.write_text(
        'name = "nfs"\n[base]\ndata.name = "digits"\ndata.batch_size = 128\n'
        "budget.epochs = 1\nlogging.progress = false\nruntime.threads = 1\n"
        '[methods.imp]\nset = { parent_epochs = 1, "budget.cycles" = 1 }\n'
    )
    args = ["submit", str(grid), "--executor", "debug", "--store", str(store)]
    assert main(args) == 0
    records = finished_results(store)
    assert sorted(r["method"] for r in records) == ["dense", "imp"]  # parent, then its child
    assert main(["status", str(grid), "--store", str(store)]) == 0


# --------------------------------------------------------------------------- no lock at all


def _no_lock(self: Store, name: str, *, wait: bool = True) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


def _racing_rerun(store: str, barrier: Any, results: Any) -> None:
    """A ``run --force`` in a process that believes it holds every lock (node-local locks):
    flock does nothing and the store's lock files are skipped. Both processes look at the
    finished result before either writes its own (the barrier), the race that loses one."""
    import benchmark.store.results as results_module
    from benchmark.training.runner import execute

    fcntl.flock = lambda *args, **kwargs: None  # type: ignore[assignment]
    results_module.Store.lock = _no_lock  # type: ignore[method-assign, assignment]
    real_read = results_module.read_record
    state = {"writing": False, "waited": False}

    def read(path: Path, *run_id: str | None) -> dict[str, Any]:
        record = real_read(path, *run_id)
        if state["writing"] and not state["waited"] and path.suffix == ".json":
            state["waited"] = True
            barrier.wait(timeout=120)
        return record

    results_module.read_record = read  # type: ignore[assignment]
    for name in ("write", "write_result"):
        real = getattr(results_module.Store, name, None)
        if real is None:
            continue

        def writing(self: Store, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            state["writing"] = True
            try:
                return _real(self, *args, **kwargs)
            finally:
                state["writing"] = False

        setattr(results_module.Store, name, writing)
    record = execute(tiny_config(Path(store), *FAST), force=True)
    results.put(record["started"])


@pytest.mark.slow  # three spawned processes, each importing torch
def test_two_processes_holding_node_local_locks_racing_force_lose_no_result(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s"
    cfg = tiny_config(store, *FAST)
    # Spawned, not forked: a fork of a test process that trained on a GPU before cannot use
    # CUDA ("Cannot re-initialize CUDA in forked subprocess"; seen on an H200).
    context = multiprocessing.get_context("spawn")
    first = context.Process(target=_run_once, args=(str(store),))
    first.start()
    first.join(120)
    assert first.exitcode == 0
    original = Store(store).read(cfg.run_id)
    assert original is not None and original["status"] == "finished"

    barrier, results = context.Barrier(2), context.Queue()
    procs = [
        context.Process(target=_racing_rerun, args=(str(store), barrier, results)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    assert [p.exitcode for p in procs] == [0, 0]
    reruns = {results.get(timeout=5) for _ in procs}
    assert len(reruns) == 2

    kept = {r["started"] for r in finished_results(store)}
    assert {original["started"], *reruns} <= kept  # nothing lost
    current = Store(store).read(cfg.run_id)
    assert current is not None and current["started"] in reruns  # the first rerun won
    (second,) = reruns - {current["started"]}
    archived = [
        p
        for p in (store / "archive").glob("*.json")
        if json.loads(p.read_text())["started"] == second
    ]
    assert len(archived) == 1 and archived[0].with_suffix(".pt").exists()  # with its weights
    assert Store(store).weights_path(cfg.run_id).exists()


def _run_once(store: str) -> None:
    from benchmark.training.runner import execute

    execute(tiny_config(Path(store), *FAST))


def test_writers_racing_without_any_lock_keep_the_first_and_archive_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Store, "lock", _no_lock)
    store = Store(tmp_path)
    store.write({"run_id": "a", "status": "finished", "started": 0.0, "finished": 1.0})
    start = store.read("a")
    gate = threading.Barrier(8)

    def rerun(i: int) -> None:
        record = {"run_id": "a", "status": "finished", "started": 10.0 + i, "finished": 20.0 + i}
        gate.wait()
        store.write(record, force=True, replaces=start)

    with pytest.warns(StoreWarning, match="finished by another process first"):
        threads = [threading.Thread(target=rerun, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    kept = sorted(r["started"] for r in finished_results(tmp_path))
    assert kept == [0.0, *(10.0 + i for i in range(8))]
    assert len(list(tmp_path.glob("*.json"))) == 1
    assert not list(tmp_path.glob(".*"))  # no staged or temporary file left


def test_a_failed_record_never_replaces_a_finished_one_without_a_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Store, "lock", _no_lock)
    store = Store(tmp_path)
    store.write({"run_id": "a", "status": "failed", "started": 0.0, "finished": 0.5})
    store.write({"run_id": "a", "status": "finished", "started": 1.0, "finished": 2.0})
    with pytest.raises(Exception, match="has finished"):
        store.write({"run_id": "a", "status": "failed", "started": 3.0, "finished": 4.0})
    assert store.read("a")["started"] == 1.0
    assert not list((tmp_path / "archive").glob("*.json"))  # a replaced failure is not kept


# --------------------------------------------------------------------------- stale lock files


def _lock_file(store: Path, name: str) -> Path:
    return store / ".locks" / f"{name}.lockfile"


def _write_owner(path: Path, **fields: Any) -> None:
    """A lock file as a process of ``fields`` (else this one) writes it."""
    boot = Path("/proc/sys/kernel/random/boot_id")
    owner = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "token": uuid.uuid4().hex,
        "boot_id": boot.read_text().strip() if boot.exists() else "",
        "start": "",
        "slurm_job": "",
        "slurm_restarts": 0,
        "since": time.time(),
        **fields,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(owner))


def _set_env(monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_stale_run_lock_of_a_dead_process_is_recovered_with_a_message(tmp_path: Path) -> None:
    store = tmp_path / "s"
    cfg = tiny_config(store, *FAST)
    path = _lock_file(store, f"run-{cfg.run_id}")
    pid = _dead_pid()
    _write_owner(path, pid=pid)
    with pytest.warns(StoreWarning, match=rf"recovered the stale lock .*pid {pid} .*no longer"):
        assert cli_run(store, *FAST) == 0
    assert Store(store).is_finished(cfg.run_id) and not path.exists()


def test_a_lock_of_another_node_is_recovered_when_its_heartbeat_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRUNEBENCH_LOCK_STALE_S", "60")
    store = tmp_path / "s"
    cfg = tiny_config(store, *FAST)
    path = _lock_file(store, f"run-{cfg.run_id}")
    _write_owner(path, host="node-elsewhere", pid=1, boot_id="other", slurm_job="")
    old = time.time() - 3600
    os.utime(path, (old, old))
    with pytest.warns(StoreWarning, match="node-elsewhere.*heartbeat stopped"):
        assert cli_run(store, *FAST) == 0


def test_a_live_lock_of_another_node_says_who_runs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    cfg = tiny_config(store, *FAST)
    path = _lock_file(store, f"run-{cfg.run_id}")
    _write_owner(path, host="node-elsewhere", pid=4242, boot_id="other", slurm_job="991_7")
    assert cli_run(store, *FAST) == 1
    err = capsys.readouterr().err
    assert "already running" in err and "node-elsewhere" in err and "SLURM job 991_7" in err
    assert path.exists()  # a live owner's lock is never taken


def test_a_requeued_slurm_job_takes_over_its_own_earlier_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    array = {"SLURM_ARRAY_JOB_ID": "991", "SLURM_ARRAY_TASK_ID": "7"}
    _set_env(monkeypatch, **array, SLURM_RESTART_COUNT="1")
    store = tmp_path / "s"
    cfg = tiny_config(store, *FAST)
    path = _lock_file(store, f"run-{cfg.run_id}")
    _write_owner(path, host="node-before", boot_id="other", slurm_job="991_7", slurm_restarts=0)
    with pytest.warns(StoreWarning, match="SLURM job 991_7 was requeued"):
        assert cli_run(store, *FAST) == 0


def test_a_held_lock_file_names_its_owner_and_its_heartbeat_goes_on(tmp_path: Path) -> None:
    from benchmark.store.locking import LockFile

    path = tmp_path / "x.lockfile"
    with LockFile(path, heartbeat_s=0.05) as lock:
        owner = json.loads(path.read_text())
        assert owner["host"] == socket.gethostname() and owner["pid"] == os.getpid()
        assert "slurm_job" in owner and owner["token"] == lock.owner.token
        old = time.time() - 100
        os.utime(path, (old, old))
        deadline = time.time() + 5
        while path.stat().st_mtime < old + 50 and time.time() < deadline:
            time.sleep(0.02)
        assert path.stat().st_mtime > old + 50  # refreshed by the heartbeat
    assert not path.exists()


def test_flock_is_never_called(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(fcntl, "flock", lambda *a: calls.append(a))
    from benchmark.store.submissions import store_lock

    with Store(tmp_path).lock("store"), store_lock(tmp_path):
        pass
    assert calls == []


@pytest.mark.parametrize("listed", ["", "RUNNING"])
@pytest.mark.parametrize("heartbeat_age_s", [0.0, 3600.0])
def test_a_lock_of_another_node_is_decided_by_its_heartbeat_whatever_squeue_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listed: str, heartbeat_age_s: float
) -> None:
    """The local squeue may not know the owner's cluster (a store two clusters mount): a fresh
    heartbeat keeps the lock even when squeue does not list the job; a stopped one loses it."""
    import benchmark.store.locking as locking
    import benchmark.store.squeue as squeue_module

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue = bin_dir / "squeue"
    squeue.write_text(f"#!/bin/sh\necho '{listed}'\n")
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(squeue_module, "SEEN", {})
    path = tmp_path / "run-x.lockfile"
    _write_owner(path, host="node-elsewhere", pid=7, boot_id="other", slurm_job="5150_2")
    old = time.time() - heartbeat_age_s
    os.utime(path, (old, old))
    lock = locking.LockFile(path, stale_s=600)
    if heartbeat_age_s > 600:
        with pytest.warns(StoreWarning, match="5150_2.*heartbeat stopped"):
            lock.acquire(wait=False)
        lock.release()
    else:
        with pytest.raises(locking.RunLockedError, match="SLURM job 5150_2"):
            lock.acquire(wait=False)
        assert path.exists()


def test_a_requeued_job_of_another_cluster_does_not_take_a_fresh_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmark.store.locking as locking

    _set_env(monkeypatch, SLURM_JOB_ID="991", SLURM_RESTART_COUNT="1", SLURM_CLUSTER_NAME="beta")
    path = tmp_path / "run-x.lockfile"
    _write_owner(path, host="node-a", boot_id="other", slurm_job="991", slurm_cluster="alpha")
    with pytest.raises(locking.RunLockedError, match="SLURM job 991"):
        locking.LockFile(path).acquire(wait=False)


def test_a_lock_of_a_zombie_process_is_recovered(tmp_path: Path) -> None:
    """An owner that exited but was not reaped yet still has /proc/PID: its state says Z."""
    from benchmark.store.locking import LockFile, _process_start

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        start = _process_start(proc.pid)
        deadline = time.time() + 30
        while Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
            assert time.time() < deadline, "the child never exited"
            time.sleep(0.01)
        path = tmp_path / "run-x.lockfile"
        _write_owner(path, pid=proc.pid, start=start or "")
        lock = LockFile(path)
        with pytest.warns(StoreWarning, match=rf"pid {proc.pid} .*no longer"):
            lock.acquire(wait=False)
        lock.release()
    finally:
        proc.wait()


def test_a_waiter_says_when_the_holder_on_another_node_stopped_its_heartbeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmark.store.locking as locking
    from benchmark.store.locking import LockFile

    monkeypatch.setattr(locking, "slurm_job_active", lambda job: False)  # squeue: job gone
    path = tmp_path / "store.lockfile"
    _write_owner(path, host="node-elsewhere", pid=7, boot_id="other", slurm_job="77")
    old = time.time() - 5
    os.utime(path, (old, old))
    lock = LockFile(path, stale_s=6.0, heartbeat_s=0.5)
    with pytest.warns(StoreWarning) as caught:
        lock.acquire(wait=True)
    lock.release()
    said = [str(w.message) for w in caught]
    assert "waiting for lock" in said[0] and "node-elsewhere" in said[0]
    assert "heartbeat stopped 5 s ago" in said[0] and "in about 1 s" in said[0]
    assert "squeue here no longer lists SLURM job 77" in said[0]
    assert "recovered the stale lock" in said[-1]


def test_the_store_lock_is_not_held_while_a_result_is_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only renames happen under the store lock, so a short stale limit is safe for it."""
    import benchmark.store.results as results_module

    store = Store(tmp_path)
    lock = tmp_path / ".locks" / "store.lockfile"
    seen: list[bool] = []
    for name in ("save_weights", "write_json_atomic"):
        real = getattr(results_module, name)

        def spy(*args: Any, _real: Any = real) -> None:
            seen.append(lock.exists())
            _real(*args)

        monkeypatch.setattr(results_module, name, spy)
    store.write_result({"run_id": "a", "status": "finished"}, {"w": torch.ones(2)})
    assert seen == [False, False] and store.weights_path("a").exists()
