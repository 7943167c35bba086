"""The launcher against a real single-node SLURM cluster (``slurm/dev-cluster.sh``).

The ``cluster`` fixture starts the cluster once for this module (installing SLURM on a fresh
Debian machine) and stops it afterwards, also when a test fails. With ``CI`` set these tests must
run, and a cluster that cannot start fails them loudly; elsewhere they are skipped only without
root or apt. ``python -m pytest -m "not slurm"`` deselects them.

Runs are tiny digits configs; the tests poll the store instead of sleeping. The time-limit run
is submitted first and trains in the background while the other tests use the second CPU.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from helpers import comparable, run_uninterrupted

from benchmark.cli import main
from benchmark.launch import LaunchSettings, load_profile, prepare, submit_grid
from benchmark.launch.expansion import Expansion, expand
from benchmark.launch.grid import load_grid
from benchmark.launch.status import grid_status
from benchmark.store.results import Store
from benchmark.training.trainer import Trainer

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "slurm" / "dev-cluster.sh"
SMOKE = ROOT / "slurm" / "grids" / "smoke.toml"
# Seconds of training the time-limit run should need: more than the most that one 1-minute slot
# allows before its USR2 (about 50 s with a 5 s delay), less than two slots. Its first
# interruption does not depend on it (the test sends the time-out signal itself, see
# time_limit_run); the work only makes a second one, by SLURM's own time limit, likely.
TIME_LIMIT_WORK_S = 70.0
# Seconds of training of the cancelled and the requeued run: they must still be training when
# SLURM's SIGKILL comes, KillWait = 5 s after the SIGTERM that submitit ignores.
RUN_S = 15.0
T = TypeVar("T")


def _skip_reason() -> str | None:
    if os.environ.get("CI"):
        return None  # CI must run them: a cluster that cannot start is a failure
    if os.geteuid() != 0:
        return "the dev SLURM cluster needs root (slurm/dev-cluster.sh installs and starts daemons)"
    if not Path("/etc/debian_version").exists() or shutil.which("apt-get") is None:
        return "the dev SLURM cluster needs Debian with apt-get"
    return None


def _script(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), command], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A running dev cluster for this module; stopped at the end unless it was up before."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    was_up = not os.environ.get("CI") and _script("status", 60).returncode == 0
    started = time.monotonic()
    try:
        start = _script("start", 900)
    except subprocess.TimeoutExpired as err:
        _script("stop", 180)
        pytest.fail(f"slurm/dev-cluster.sh start timed out: {err}")
    print(f"dev cluster started in {time.monotonic() - started:.1f} s")
    try:
        if start.returncode != 0:
            pytest.fail(
                f"slurm/dev-cluster.sh start failed ({start.returncode}):\n"
                f"{start.stdout}\n{start.stderr}"
            )
        yield
    finally:
        if not was_up:
            stop = _script("stop", 180)
            assert stop.returncode == 0, stop.stdout + stop.stderr


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("slurm")


def wait_until(check: Callable[[], T], timeout_s: float, what: str, poll_s: float = 0.5) -> T:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}\n{_queue()}")
        time.sleep(poll_s)


def _queue() -> str:
    out = subprocess.run(["squeue", "-r"], capture_output=True, text=True, timeout=30)
    return out.stdout + out.stderr


def finished_record(store: Path, run_id: str) -> Callable[[], dict[str, Any] | None]:
    def check() -> dict[str, Any] | None:
        record = Store(store).read(run_id)
        if record is not None and record["status"] == "failed":
            pytest.fail(f"run {run_id} failed: {record.get('error')}\n{record.get('log_tail')}")
        return record if record is not None and record["status"] == "finished" else None

    return check


def slurm(**overrides: Any) -> LaunchSettings:
    """Settings of the dev cluster's profile with ``overrides``."""
    return LaunchSettings(executor="slurm", profile=load_profile("dev", overrides))


def long_grid(work: Path, name: str, seed: int, epochs: int) -> Path:
    """A one-run grid: a ResNet-20 on digits (about a second per epoch on one core)."""
    path = work / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nseeds = [{seed}]\n[base]\nmodel.name = "resnet20"\n'
        f'method.name = "dense"\ndata.batch_size = 128\nbudget.epochs = {epochs}\n'
    )
    return path


def job_log(store: Path, grid: str, job: str) -> str:
    folder = store / "grids" / grid / job
    return "".join(p.read_text() for p in sorted(folder.glob("*_log.*")))


@dataclass
class Background:
    """The time-limit run, submitted before the other tests."""

    exp: Expansion
    store: Path
    job: str
    epochs: int
    submitted: float


@pytest.fixture(scope="module")
def seconds_per_epoch(work: Path) -> float:
    """How long an epoch of :func:`long_grid`'s run takes on one core of this machine."""
    probe = prepare(load_grid(long_grid(work, "probe", seed=9, epochs=3)), work / "probe")
    (run,) = probe.runs
    run.cfg.runtime.threads = 1
    return Trainer(run.cfg, None, None).fit()["wall_seconds"] / 3


def epochs_for(seconds: float, seconds_per_epoch: float) -> int:
    """Epochs of :func:`long_grid`'s run that take about ``seconds``."""
    return min(400, max(12, math.ceil(seconds / seconds_per_epoch)))


@pytest.fixture(scope="module")
def time_limit_run(cluster: None, work: Path, seconds_per_epoch: float) -> Background:
    """Submit a run that needs longer than a 1-minute slot, and interrupt it as SLURM's time
    limit does once it trains: it must checkpoint, requeue, resume and finish."""
    epochs = epochs_for(TIME_LIMIT_WORK_S, seconds_per_epoch)
    store = work / "time-limit-runs"
    # USR2 5 s before the 1-minute limit: slurmctld sends it on its 30 s tick, 25-55 s into
    # each slot. Whether that comes before the run ends depends on the machine's speed at
    # that moment (the epochs are sized from a timing taken before), so it is not relied on.
    settings = slurm(time_min=1, signal_delay_s=5)
    settings.max_requeues = 8
    exp = prepare(load_grid(long_grid(work, "timelimit", seed=3, epochs=epochs)), store, settings)
    result = submit_grid(exp, store, settings)
    (job,) = result.jobs
    (run,) = exp.runs
    submitted = time.monotonic()
    interrupt_once_training(store, run.run_id, job)
    return Background(exp, store, job, epochs, submitted)


def interrupt_once_training(store: Path, run_id: str, job: str) -> None:
    """Send ``job`` the time-limit signal (USR2, as ``submitit``'s ``_interrupt(timeout=True)``)
    as soon as its run has written its first epoch checkpoint: the run is then certainly
    interrupted, with at least 11 of its 12 or more epochs (seconds of work) still to train,
    and it resumes from a checkpoint, whatever the machine's speed."""
    checkpoint = Store(store).checkpoint_path(run_id)
    wait_until(checkpoint.exists, 300, "the time-limited run's first epoch checkpoint", 0.05)
    signal = subprocess.run(
        ["scancel", job, "--signal", "USR2"], capture_output=True, text=True, timeout=30
    )
    assert signal.returncode == 0, signal.stdout + signal.stderr
    assert Store(store).read(run_id) is None  # still training when the signal went out


def test_smoke_grid_runs_resubmits_nothing_and_reports_status(
    time_limit_run: Background,
    work: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cwd = work / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    store = work / "smoke-runs"
    args = ["--executor", "slurm", "--profile", "dev", "--store", str(store)]
    started = time.monotonic()
    assert main(["submit", str(SMOKE), *args, "--runs-per-task", "2", "--wait"]) == 0
    out = capsys.readouterr().out
    assert "submitted 7 runs in 4 jobs" in out and "afterok:" in out
    print(f"smoke grid on SLURM: {time.monotonic() - started:.1f} s", file=sys.stderr)

    exp = expand(load_grid(SMOKE))
    st = Store(store)
    records = {r.run_id: st.read(r.run_id) for r in exp.runs}
    assert all(rec is not None and rec["status"] == "finished" for rec in records.values())
    dense = next(r.run_id for r in exp.runs if r.method == "dense")
    imps = [rec for rec in records.values() if rec["method"] == "imp"]
    assert {rec["parent_run_id"] for rec in imps} == {dense}
    assert {rec["environment"]["threads"] for rec in records.values()} == {1}  # cpus_per_task
    # sbatch files and logs live under the store's submitit folder, none in the CWD.
    folder = store / "grids" / "smoke"
    assert len(list(folder.glob("*/*_log.out"))) == 4 and not list(cwd.iterdir())
    script = next(folder.glob("*/*_submission.sh")).read_text()
    assert sys.executable in script  # the jobs run this (the project's) interpreter

    # The IMP runs waited on the dense run's array task.
    record = st.root / "grids" / "smoke.json"
    subs = json.loads(record.read_text())["submissions"]
    pairs = [(j, t) for s in subs for j, t in zip(s["jobs"], s["tasks"], strict=True)]
    dense_job = next(j for j, t in pairs if dense in t)
    assert [s["after"] for s in subs] == [None, dense_job]

    # Re-submitting the finished grid submits nothing.
    before = record.read_text()
    assert main(["submit", str(SMOKE), *args, "--runs-per-task", "2"]) == 0
    assert "submitted 0 jobs: nothing to run" in capsys.readouterr().out
    assert record.read_text() == before

    assert main(["status", str(SMOKE), "--store", str(store)]) == 0
    table = capsys.readouterr().out
    assert [line.split() for line in table.splitlines() if line.startswith("all ")] == [
        ["all", "7", "7", "0", "0", "0", "0"]
    ]


def test_cancelled_job_is_reported_then_completed_by_resubmission(
    cluster: None, work: Path, seconds_per_epoch: float, capsys: pytest.CaptureFixture[str]
) -> None:
    # Long enough to outlast the 5 s between SIGTERM (ignored by submitit) and SIGKILL.
    path = long_grid(work, "cancel", seed=1, epochs=epochs_for(RUN_S, seconds_per_epoch))
    store = work / "cancel-runs"
    args = ["--store", str(store)]
    assert main(["submit", str(path), "--executor", "slurm", *args]) == 0
    exp = expand(load_grid(path))
    (run,) = exp.runs
    ckpt = Store(store).checkpoint_path(run.run_id)
    wait_until(ckpt.exists, 120, "the first epoch checkpoint")
    status = grid_status(exp, store)
    assert status.runs[0].state == "running"
    job = status.runs[0].job_id
    assert job is not None
    subprocess.run(["scancel", job], check=True, timeout=30)

    def cancelled() -> bool:
        (r,) = grid_status(exp, store).runs
        return r.state == "failed" and "CANCELLED" in r.detail

    wait_until(cancelled, 60, f"status to report job {job} as cancelled")
    capsys.readouterr()
    assert main(["status", str(path), *args]) == 0
    out = capsys.readouterr().out
    assert f"{run.run_id}  job {job}  CANCELLED" in out

    # A plain re-submission completes it, resuming from the checkpoint the cancelled job left.
    assert main(["submit", str(path), "--executor", "slurm", *args]) == 0
    assert "submitted 1 run in 1 job" in capsys.readouterr().out
    record = wait_until(finished_record(store, run.run_id), 180, "the resubmitted run")
    assert record["resumed"] is True


def test_scontrol_requeue_resumes_from_checkpoint_with_the_same_result(
    cluster: None, work: Path, seconds_per_epoch: float
) -> None:
    store = work / "requeue-runs"
    settings = slurm()
    epochs = epochs_for(RUN_S, seconds_per_epoch)
    exp = prepare(load_grid(long_grid(work, "requeue", seed=2, epochs=epochs)), store, settings)
    (run,) = exp.runs
    with ThreadPoolExecutor(1) as pool:
        # The uninterrupted reference trains here while the cluster runs the same config.
        reference = pool.submit(run_uninterrupted, run.cfg)
        (job,) = submit_grid(exp, store, settings).jobs
        ckpt = Store(store).checkpoint_path(run.run_id)
        wait_until(ckpt.exists, 120, "the first epoch checkpoint")
        subprocess.run(["scontrol", "requeue", job], check=True, timeout=30)
        record = wait_until(finished_record(store, run.run_id), 240, "the requeued run")
        expected = reference.result()
    assert record["resumed"] is True
    assert comparable(record["metrics"]) == comparable(expected)

    def states() -> list[str] | None:
        cmd = ["sacct", "-n", "-P", "-X", "--duplicates", "-o", "State", "-j", job]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.split()
        return out if out and out[-1] == "COMPLETED" else None  # sacct lags the job's end

    assert "REQUEUED" in wait_until(states, 30, f"sacct to show job {job} completed")
    assert job_log(store, "requeue", job).count("Loading pickle") == 2  # started twice


def test_time_limit_checkpoints_requeues_and_finishes(time_limit_run: Background) -> None:
    bg = time_limit_run
    (run,) = bg.exp.runs
    elapsed = time.monotonic() - bg.submitted
    record = wait_until(
        finished_record(bg.store, run.run_id),
        max(30.0, 420.0 - elapsed),
        f"the time-limited run ({bg.epochs} epochs)",
        poll_s=1.0,
    )
    print(f"time-limit run: {bg.epochs} epochs, {time.monotonic() - bg.submitted:.0f} s")
    log = job_log(bg.store, "timelimit", bg.job)
    assert "this job is timed-out" in log and "Calling checkpoint method" in log
    assert "Requeued job" in log
    assert record["resumed"] is True
    assert len(record["history"]) == bg.epochs


def test_two_task_job_trains_one_run_data_parallel(cluster: None, work: Path) -> None:
    # One run, two SLURM tasks (one CPU each): rendezvous from the SLURM environment, gloo.
    store = work / "data-parallel-runs"
    settings = slurm(tasks_per_node=2, cpus_per_task=1)
    exp = prepare(load_grid(long_grid(work, "dataparallel", seed=4, epochs=2)), store, settings)
    (run,) = exp.runs
    (job,) = submit_grid(exp, store, settings).jobs
    record = wait_until(finished_record(store, run.run_id), 240, "the 2-task run")
    assert record["distributed"]["processes"] == 2
    assert record["distributed"]["backend"] == "gloo"
    assert [r["run_id"] for r in Store(store).records()] == [run.run_id]
