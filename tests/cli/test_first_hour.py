"""A newcomer's first hour: the command line answers at once, and its rough edges are gone.

Help, argument errors and ``list`` load no torch; a figure asked of an empty store suggests the
smoke scale; a table id asked for a figure names the ids that have one; ``--set KEY VALUE`` gets
a hint; ``show`` says what the run was; Ctrl-C during ``reproduce`` ends with one line; a SLURM
dry run counts as the real submit does; ``--wait`` in a log prints progress and a summary;
``reproduce`` refuses a bad ``--workers`` or ``--profile`` before its store exists.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, env_with_path, loads_torch, tiny_config

from benchmark.cli import main
from benchmark.experiments.catalog import load


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run", "--help"],
        ["table", "--help"],
        ["reproduce", "--help"],
        ["submit", "--help"],
        ["list"],
        ["run", "--nproc", "0"],
        ["run", "--set", "method.sparsity", "0.9"],
        ["table", "no-such-table"],
        ["plot", "no-such-figure"],
        ["reproduce", "no-such-id", "--dry-run"],
    ],
    ids=lambda a: " ".join(a),
)
def test_help_argument_errors_and_list_load_no_torch(args: list[str], tmp_path: Path) -> None:
    assert not loads_torch(args, tmp_path)


def test_the_probe_sees_torch_when_a_command_loads_it(tmp_path: Path) -> None:
    # The check above can fail: a command that needs the methods (and so torch) is seen.
    assert loads_torch(["methods"], tmp_path)


def test_list_shows_what_each_id_draws_and_its_paper_scale_size(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["list", "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "paper-scale runs" in out.splitlines()[0]
    entry = load()["appendix-cifar10-results"]
    line = next(line for line in out.splitlines() if line.startswith(entry.id + " "))
    assert f"{entry.paper_runs:,}" in line and f"0/{len(entry.smoke_runs)}" in line


def test_a_figure_of_an_empty_store_suggests_the_smoke_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["plot", "cifar10-envelope", "--store", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "prunebench reproduce cifar10-envelope --scale smoke" in err
    assert "--scale paper" not in err
    smoke = len(load()["cifar10-envelope"].smoke_runs)
    assert f"({smoke} runs, minutes on a CPU)" in err


def test_plot_on_a_table_without_figure_names_the_command_that_builds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    entries = load().values()
    table_only = next(e.id for e in entries if e.table and not e.figure)
    assert main(["plot", table_only, "--store", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    figures = sum(e.figure for e in entries)
    assert f"an id with a figure (prunebench list shows the {figures})" in err
    assert f"{table_only} is a table only: prunebench table {table_only} builds it" in err
    assert len(err) < 300  # the command that fits, not every id with a figure


def test_set_with_a_space_instead_of_equals_gets_a_hint(capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "--set", "method.sparsity", "0.9"]) == 2
    err = capsys.readouterr().err
    assert "--set method.sparsity=0.9" in err and "no spaces" in err
    # The one form of every bad input: "config error: FIELD = VALUE is invalid; allowed: ...".
    assert err.startswith("prunebench: config error: --set = 'method.sparsity' is invalid")
    assert main(["run", "--set", "seed"]) == 2
    err = capsys.readouterr().err
    assert "config error: --set = 'seed' is invalid; allowed:" in err and "seed=VALUE" in err


def test_show_says_the_method_settings_data_budget_and_whether_it_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from benchmark.training.runner import execute

    cfg = tiny_config(tmp_path, "method.name=gmp", "budget.epochs=2", "method.interval=1")
    execute(cfg)
    capsys.readouterr()
    assert main(["show", cfg.run_id, "--store", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "method          gmp: sparsity=" in out and "interval=1" in out
    assert "data, model     digits" in out
    assert "budget          epochs 2\n" in out  # GMP reads no other budget field
    assert "ran             from the start" in out


@pytest.mark.slow
def test_ctrl_c_during_reproduce_ends_with_one_line(tmp_path: Path) -> None:
    # Ctrl-C reaches the whole foreground process group: prunebench and its local workers.
    command = [sys.executable, "-m", "benchmark.cli", "reproduce", "appendix-cifar10-results"]
    proc = subprocess.Popen(
        [*command, "--scale", "smoke", "--store", str(tmp_path / "store")],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env=env_with_path(ROOT),
    )
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if "worker" in line and "logs" not in line:  # a worker has started training
            break
    time.sleep(2.0)
    os.killpg(proc.pid, signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    assert err.count("prunebench: interrupted") == 1, err
    assert err.rstrip().endswith("resumes from the last epoch checkpoint)"), err


class FakeJob:
    """What submitit returns for one array task."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id


class FakeSlurmExecutor:
    """submitit.SlurmExecutor without a cluster: numbered arrays, one job per task."""

    arrays = 0

    def __init__(self, folder: object, **_kwargs: object) -> None:
        pass

    def update_parameters(self, **_kwargs: object) -> None:
        pass

    def submit_array(self, fns: list[object]) -> list[FakeJob]:
        FakeSlurmExecutor.arrays += 1
        return [FakeJob(f"{FakeSlurmExecutor.arrays}_{i}") for i in range(len(fns))]


@pytest.mark.parametrize("runs_per_task", [1, 2])
def test_a_slurm_dry_run_counts_as_the_real_submit(
    runs_per_task: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmark.launch.submit as submit
    from benchmark.launch import LaunchSettings, load_profile, prepare
    from benchmark.launch.grid import load_grid

    monkeypatch.setattr(submit.submitit, "SlurmExecutor", FakeSlurmExecutor)
    monkeypatch.setattr(submit.shutil, "which", lambda name: f"/usr/bin/{name}")
    grid = load_grid(ROOT / "slurm" / "grids" / "smoke.toml")
    settings = LaunchSettings(
        executor="slurm", runs_per_task=runs_per_task, profile=load_profile("dev")
    )
    expansion = prepare(grid, tmp_path, settings)
    dry = submit.submit_grid(expansion, tmp_path, settings, dry_run=True).summary()
    real = submit.submit_grid(expansion, tmp_path, settings).summary()
    planned = dry.splitlines()[0].removeprefix("dry run: would submit ")
    done = real.splitlines()[0].removeprefix("submitted ")
    assert planned == done, (dry, real)


def test_wait_in_a_log_prints_progress_and_a_summary(tmp_path: Path) -> None:
    from benchmark.launch.submit import wait_for
    from benchmark.store.results import Store

    store = Store(tmp_path)
    store.write({"run_id": "a", "status": "finished"})
    store.write({"run_id": "b", "status": "failed", "error": "x"})
    out = io.StringIO()  # not a terminal: lines, not a bar
    status = wait_for(["a", "b"], tmp_path, poll_s=0.01, out=out)
    assert status == {"a": "finished", "b": "failed"}
    lines = out.getvalue().splitlines()
    assert lines[0] == "[wait] 2/2 runs done (1 failed), 0 running, 0 pending"
    assert lines[-1] == "[wait] done: 1 finished, 1 failed"


@pytest.mark.parametrize(
    ("flag", "value", "named"),
    [("--workers", "0", "--workers"), ("--profile", "no-such-profile", "--profile")],
)
def test_reproduce_refuses_a_bad_launch_flag_before_the_store_exists(
    flag: str, value: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    store = tmp_path / "store"
    assert main(["reproduce", "lr-schedules", "--store", str(store), flag, value]) == 2
    assert named in capsys.readouterr().err
    assert not store.exists()  # no folders made for a command that never starts
