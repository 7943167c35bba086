"""The launcher without a cluster: local and debug executors, planning, records, profiles."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import comparable, run_uninterrupted

from benchmark.cli import main
from benchmark.core.errors import ConfigError
from benchmark.launch import (
    GridTask,
    JobRef,
    JobState,
    LaunchSettings,
    SubmissionRecord,
    available_cores,
    classify,
    expand_job_ids,
    grid_nodes,
    job_states,
    load_index,
    load_profile,
    make_plan,
    prepare,
    scheduler,
    slurm_specs,
    submit_grid,
)
from benchmark.launch.expansion import expand
from benchmark.launch.grid import grid_from_dict, load_grid
from benchmark.launch.status import format_status, grid_status
from benchmark.store.results import Store
from benchmark.training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "slurm" / "grids" / "smoke.toml"
TINY = {
    "data": {"name": "digits", "batch_size": 128},
    "budget": {"epochs": 2},
    "logging": {"progress": False},
}


def tiny_grid(name: str, **parts: Any) -> Any:
    return grid_from_dict({"name": name, "base": TINY, **parts})


def test_debug_executor_trains_parents_once_and_resubmitting_submits_nothing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs"
    settings = LaunchSettings(executor="debug", threads=1)
    grid = tiny_grid(
        "dbg",
        methods={
            "dense": {},
            "bimp": {"set": {"budget.initial_epochs": 1}},
            "imp": {"axes": {"method.sparsity": [0.5, 0.8]}, "set": {"parent_epochs": 2}},
        },
    )
    exp = prepare(grid, store, settings)
    result = submit_grid(exp, store, settings)
    st = Store(store)
    assert sorted(result.submitted_runs) == sorted(r.run_id for r in exp.runs)
    assert all(st.is_finished(r.run_id) for r in exp.runs)
    dense = next(r.run_id for r in exp.runs if r.method == "dense")
    imps = [st.read(r.run_id) for r in exp.runs if r.method == "imp"]
    assert {rec["parent_run_id"] for rec in imps} == {dense}  # the grid's dense run, trained once
    assert len(list(store.glob("dense-*.json"))) == 1
    again = submit_grid(exp, store, settings)
    assert again.jobs == [] and len(again.plan.finished) == len(exp.runs)
    assert again.summary().startswith("submitted 0 jobs")


@pytest.mark.slow  # two worker processes start Python and import torch
def test_local_workers_share_cores_and_isolate_a_diverging_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs"
    # schedule.lr = 1e6 makes the loss NaN in the first epoch: a failure of that run only.
    path = tmp_path / "loc.toml"
    path.write_text(
        'name = "loc"\n[base]\ndata.name = "digits"\ndata.batch_size = 128\n'
        'budget.epochs = 2\n[axes]\n"schedule.lr" = [0.1, 1e6]\n'
    )
    settings = LaunchSettings(executor="local", workers=2)
    exp = prepare(load_grid(path), store, settings)
    good, bad = (r.run_id for r in exp.runs)
    result = submit_grid(exp, store, settings)
    assert len(result.jobs) == 2  # one worker process per run
    st = Store(store)
    ok, failed = st.read(good), st.read(bad)
    assert ok["status"] == "finished"
    assert ok["environment"]["threads"] == max(1, available_cores() // 2)
    assert failed["status"] == "failed" and failed["error"].startswith("DivergenceError")
    assert failed["job_id"] in result.jobs
    assert any("DivergenceError" in line for line in failed["log_tail"])
    record = json.loads((store / "grids" / "loc.json").read_text())
    assert sorted(j for s in record["submissions"] for j in s["jobs"]) == sorted(result.jobs)

    status = grid_status(exp, store)
    assert status.counts()["all"] == {"finished": 1, "failed": 1}
    assert "DivergenceError: training loss is nan" in format_status(status)
    # Not resubmitted without --retry-failed; with it, only the failed run is.
    assert submit_grid(exp, store, settings).plan.failed == [bad]
    retry = submit_grid(exp, store, settings, retry_failed=True, dry_run=True)
    assert [n.run_id for n in retry.plan.submit] == [bad] and retry.jobs == []
    capsys.readouterr()
    assert main(["status", str(path), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "failures (1):" in out and bad in out


def test_a_killed_run_resumes_from_its_epoch_checkpoint(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    settings = LaunchSettings(executor="debug", threads=1)
    budget = {"budget.initial_epochs": 2, "budget.epochs": 4}
    # Deterministic kernels: on a GPU the resumed result must equal the uninterrupted one bitwise.
    base = {**TINY, "runtime": {"deterministic": True}}
    grid = grid_from_dict({"name": "resume", "base": base, "methods": {"bimp": {"set": budget}}})
    exp = prepare(grid, store, settings)
    (run,) = exp.runs
    # A job killed outright after 3 epochs leaves only its epoch checkpoint behind.
    ckpt = Store(store).checkpoint_path(run.run_id)
    assert Trainer(run.cfg, ckpt, None).fit(stop_after=3) is None and ckpt.exists()
    submit_grid(exp, store, settings)
    record = Store(store).read(run.run_id)
    assert record["resumed"] is True and not ckpt.exists()
    assert comparable(record["metrics"]) == comparable(run_uninterrupted(run.cfg))


def test_task_is_checkpointable_and_skips_finished_runs(tmp_path: Path) -> None:
    exp = prepare(tiny_grid("ck", axes={"seed": [0, 1]}), tmp_path, LaunchSettings(threads=1))
    task = GridTask([r.cfg for r in exp.runs], threads=1)
    resubmission = task.checkpoint()
    assert resubmission.function is task and resubmission.args == ()
    Store(tmp_path).write({"run_id": exp.runs[0].run_id, "status": "finished"})
    outcome = task()
    assert outcome == {exp.runs[0].run_id: "finished", exp.runs[1].run_id: "finished"}
    assert Store(tmp_path).read(exp.runs[1].run_id)["metrics"]  # trained; the first was skipped


# --------------------------------------------------------------------------- planning


def _ref(job: str, executor: str = "slurm", at: float = 100.0) -> JobRef:
    return JobRef(job, executor, at, "/nowhere/%j", "host", "smoke")


def test_plan_skips_queued_runs_and_chains_children_to_a_queued_parent(tmp_path: Path) -> None:
    exp = expand(load_grid(SMOKE), {"output.dir": str(tmp_path)})
    nodes = grid_nodes(exp)
    dense, bimp1, *_ = [r.run_id for r in exp.runs]
    imps = [r.run_id for r in exp.runs if r.method == "imp"]
    index = {dense: _ref("7_0"), bimp1: _ref("7_1")}
    states = {"7_0": JobState("PENDING", True, "Priority"), "7_1": JobState("RUNNING", True)}
    plan = make_plan(nodes, Store(tmp_path), index, states)
    assert plan.active == {dense: "7_0", bimp1: "7_1"}
    assert {n.run_id for n in plan.submit} == set(r.run_id for r in exp.runs) - {dense, bimp1}
    assert plan.after_job == dict.fromkeys(imps, "7_0")
    levels = slurm_specs(plan, runs_per_task=4)
    afters = {spec.after: sum(len(t) for t in spec.tasks) for lvl in levels for spec in lvl}
    assert afters == {None: 3, "7_0": 2}

    # The parent's job ended without a result (cancelled): it is resubmitted, children wait on it.
    states["7_0"] = JobState("CANCELLED", False)
    plan = make_plan(nodes, Store(tmp_path), index, states)
    assert dense in {n.run_id for n in plan.submit} and plan.after_job == {}
    specs = [s for lvl in slurm_specs(plan, runs_per_task=2) for s in lvl]
    assert [len(t) for t in specs[0].tasks] == [1, 2, 1]  # the parent alone, bimp runs packed
    assert specs[1].after == f"run:{dense}" and [len(t) for t in specs[1].tasks] == [2]

    # The parent failed: its children are blocked until it is retried.
    Store(tmp_path).write({"run_id": dense, "status": "failed", "error": "boom", "finished": 200})
    plan = make_plan(nodes, Store(tmp_path), index, states)
    assert plan.failed == [dense] and set(plan.blocked) == set(imps)
    plan = make_plan(nodes, Store(tmp_path), index, states, retry_failed=True)
    assert dense in {n.run_id for n in plan.submit} and not plan.blocked


@pytest.mark.parametrize(
    ("record", "ref", "state", "expected"),
    [
        ({"status": "finished"}, _ref("1"), JobState("RUNNING", True), ("finished", "")),
        (None, _ref("1"), JobState("RUNNING", True), ("running", "")),
        (None, _ref("1"), JobState("PENDING", True, "Dependency"), ("pending", "Dependency")),
        (
            None,
            _ref("1"),
            JobState("CANCELLED", False),
            ("failed", "CANCELLED: the job ended without a result"),
        ),
        (None, _ref("1"), JobState("COMPLETED", False), ("missing", "")),
        (None, None, None, ("missing", "")),
        (
            {"status": "failed", "error": "E: x\nmore", "finished": 50},
            _ref("1"),
            JobState("RUNNING", True),
            ("running", ""),
        ),
        (
            {"status": "failed", "error": "E: x\nmore", "finished": 150},
            _ref("1"),
            JobState("RUNNING", True),
            ("failed", "E: x"),
        ),
    ],
)
def test_classify(record: Any, ref: Any, state: Any, expected: tuple[str, str]) -> None:
    assert classify(record, ref, state) == expected


# --------------------------------------------------------------------------- records and states


def test_submission_record_keeps_each_runs_latest_job(tmp_path: Path) -> None:
    path = tmp_path / "grids" / "a.json"
    rec = SubmissionRecord(path, "a")
    rec.add("slurm", tmp_path, ["5_0", "5_1"], [["r1", "r2"], ["r3"]])
    time.sleep(0.01)
    rec.add("slurm", tmp_path, ["6"], [["r1", "r2"]])
    rec.save()
    loaded = SubmissionRecord.load(path)
    assert {k: v.job_id for k, v in loaded.latest().items()} == {"r1": "6", "r2": "6", "r3": "5_1"}
    time.sleep(0.01)
    loaded.add("slurm", tmp_path, ["8"], [["r3"]])
    loaded.save()  # the first submission is superseded by now and dropped
    assert [s["jobs"] for s in json.loads(path.read_text())["submissions"]] == [["6"], ["8"]]
    other = SubmissionRecord(tmp_path / "grids" / "b.json", "b")
    other.add("local", tmp_path, ["99"], [["r1"]])
    other.save()
    index = load_index(tmp_path)
    assert index["r1"].job_id == "99" and index["r1"].grid == "b" and index["r3"].job_id == "8"


def test_expand_job_ids() -> None:
    assert expand_job_ids("12_[0-2,5%4]") == ["12_0", "12_1", "12_2", "12_5"]
    assert expand_job_ids("12_3") == ["12_3"] and expand_job_ids("13") == ["13"]


def test_slurm_states_from_squeue_then_sacct(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        if cmd[0] == "squeue":
            out = "7_0|RUNNING|None\n7_2|PENDING|JobArrayTaskLimit\n"
            return subprocess.CompletedProcess(cmd, 0, out, "")
        out = "7_1|COMPLETED\n8|CANCELLED by 0\n9_[0-1]|CANCELLED by 0\n"
        return subprocess.CompletedProcess(cmd, 0, out, "")

    monkeypatch.setattr(scheduler, "_run", fake)
    ids = ["7_0", "7_1", "7_2", "8", "9_1"]
    states = job_states(_ref(j) for j in ids)
    assert states["7_0"].running and states["7_2"].active and not states["7_2"].running
    assert states["7_2"].reason == "JobArrayTaskLimit"
    assert (states["7_1"].state, states["8"].state, states["9_1"].state) == (
        "COMPLETED",
        "CANCELLED",
        "CANCELLED",
    )
    assert not any(states[j].active for j in ("7_1", "8", "9_1"))
    assert [c[0] for c in calls] == ["squeue", "sacct"]  # one call each, however many jobs

    def gone(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        if cmd[0] == "squeue":
            return subprocess.CompletedProcess(cmd, 1, "", "slurm_load_jobs error: Invalid job id")
        return subprocess.CompletedProcess(cmd, 1, "", "accounting disabled")

    monkeypatch.setattr(scheduler, "_run", gone)
    assert job_states([_ref("3")]) == {"3": JobState("UNKNOWN", False)}


# --------------------------------------------------------------------------- profiles, flags


def test_profiles_build_sbatch_parameters_and_reject_bad_values(tmp_path: Path) -> None:
    dev = load_profile("dev")
    params = dev.executor_parameters()
    assert params["partition"] == "debug" and params["mem"] == "1G" and "account" not in params
    gpu = load_profile("example-gpu", {"time_min": 30, "signal_delay_s": 120})
    assert gpu.executor_parameters()["gpus_per_task"] == 1 and gpu.time_min == 30
    with pytest.raises(ConfigError, match=r"^--cpus-per-task = 0 .*>= 1"):
        load_profile("dev", {"cpus_per_task": 0})
    with pytest.raises(ConfigError, match=r"^--mem-gb = inf .*>= 0"):
        load_profile("dev", {"mem_gb": float("inf")})
    delay = r"dev\.toml: signal_delay_s = 60 .*than the time limit \(--time-min = 1 min"
    with pytest.raises(ConfigError, match=delay):
        load_profile("dev", {"time_min": 1})
    (tmp_path / "p.toml").write_text('partition = "x"\n')
    with pytest.raises(ConfigError, match=r"p\.toml: account = None .*required"):
        load_profile(tmp_path / "p.toml")
    with pytest.raises(ConfigError, match=r"^--profile = 'nope' .*dev"):
        load_profile("nope")


def test_submit_flags_are_checked_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs"
    args = ["submit", str(SMOKE), "--store", str(store)]
    assert main([*args, "--executor", "local", "--workers", "0"]) == 2
    assert "--workers = 0 is invalid" in capsys.readouterr().err
    assert main([*args, "--executor", "slurm", "--time-min", "1.5"]) == 2
    assert "--time-min = 1.5 is invalid" in capsys.readouterr().err
    # 3 processes per run cannot share the grid's batch of 128: refused before anything is queued.
    slurm = [*args, "--executor", "slurm", "--profile", "dev", "--dry-run"]
    assert main([*slurm, "--tasks-per-node", "3"]) == 2
    err = capsys.readouterr().err
    assert "data.batch_size = 128 is invalid" in err and "3 processes per run" in err
    assert main([*slurm, "--tasks-per-node", "2"]) == 0
    capsys.readouterr()
    assert main([*args, "--executor", "local", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "dry run: would submit 7 runs" in out and not (store / "grids" / "smoke.json").exists()


def test_one_thread_rule_an_explicit_value_wins_everywhere() -> None:
    """--threads, else the config's runtime.threads, else the executor's derived default."""
    local = LaunchSettings(executor="local", workers=2)
    assert local.run_threads(1) == 1  # the grid's explicit value
    assert local.run_threads(0) == max(1, available_cores() // 2)  # derived: cores per worker
    assert LaunchSettings(executor="local", workers=2, threads=3).run_threads(1) == 3
    assert LaunchSettings(executor="debug").run_threads(0) == 0  # torch's default


def test_submit_keeps_a_grids_explicit_thread_count(tmp_path: Path) -> None:
    """submit replaced a grid's runtime.threads = 1 by cores / workers (2 on a 2-core machine:
    an 8-run grid took 2 minutes instead of 20 s); reproduce kept it."""
    store = tmp_path / "runs"
    explicit = available_cores() + 1  # never what cores / workers derives
    grid = tiny_grid(
        "thr", base={**TINY, "budget": {"epochs": 1}, "runtime": {"threads": explicit}},
        methods={"dense": {}},
    )  # fmt: skip
    settings = LaunchSettings(executor="debug")
    exp = prepare(grid, store, settings)
    assert {r.cfg.runtime.threads for r in exp.runs} == {explicit}
    submit_grid(exp, store, settings)
    (record,) = [Store(store).read(r.run_id) for r in exp.runs]
    assert record is not None and record["environment"]["threads"] == explicit


def test_threads_flag_overrides_a_grid_value_and_says_so(tmp_path: Path) -> None:
    import io

    store = tmp_path / "runs"
    grid = tiny_grid(
        "thr2", base={**TINY, "budget": {"epochs": 1}, "runtime": {"threads": 1}},
        methods={"dense": {}},
    )  # fmt: skip
    settings = LaunchSettings(executor="debug", threads=2)
    out = io.StringIO()
    exp = prepare(grid, store, settings)
    submit_grid(exp, store, settings, out=out)
    (record,) = [Store(store).read(r.run_id) for r in exp.runs]
    assert record is not None and record["environment"]["threads"] == 2
    assert "--threads 2 replaces runtime.threads = 1 of 1 run" in out.getvalue()
