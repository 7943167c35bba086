"""The command line's honesty and rough edges: empty stores, smoke-vs-paper, help, pipes."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, env_with_path, tiny_config

from benchmark.cli import main
from benchmark.cli.app import build_parser
from benchmark.cli.demo import demo_configs
from benchmark.cli.summary import format_summary
from benchmark.core.errors import ConfigError
from benchmark.store.frame import load_store
from benchmark.training.runner import execute

SCHEDULE_TABLE = "appendix-schedule-comparison-cifar10-oneshot"


def test_plot_on_an_empty_store_says_so_and_fails(tmp_path: Path, capsys) -> None:
    out = tmp_path / "figures"
    (tmp_path / "runs").mkdir()  # a store without runs (tests/cli/test_helpful_errors.py: none)
    code = main(["plot", "cifar10-envelope", "--store", str(tmp_path / "runs"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert "no finished runs of cifar10-envelope" in err and "prunebench reproduce" in err
    assert not out.exists()  # no empty figure is written


def test_paper_numbers_next_to_smoke_runs_come_with_a_warning(tmp_path: Path, capsys) -> None:
    args = ["table", SCHEDULE_TABLE, "--store", str(tmp_path), "--scale", "smoke", "--paper"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "warning: smoke-scale numbers" in captured.err
    assert "Note: smoke-scale numbers" in captured.out
    # the markdown header says what its columns are
    assert "| Method | sparsity 90%, budget 2.5% |" in captured.out
    # an empty store: no smoke means, so no agreement with the paper is claimed
    assert "Agreement with the paper" not in captured.out


def test_no_warning_without_paper(tmp_path: Path, capsys) -> None:
    assert main(["table", SCHEDULE_TABLE, "--store", str(tmp_path), "--scale", "smoke"]) == 0
    assert "smoke-scale numbers" not in capsys.readouterr().err


def test_a_closed_pipe_ends_quietly() -> None:
    args = ["schedule", "--epochs", "200", "--iters-per-epoch", "2000"]
    args += ["--milestones", "90", "180", "--values", "0.01", "0.001"]
    env = env_with_path(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmark.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10) == b'{"kind": "'
    proc.stdout.close()  # like `| head`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_help_shows_defaults_and_only_accepted_choices(capsys) -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    demo = sub.choices["demo"].format_help()
    assert "(default: 30)" in demo and "--threads" in demo and "--set" in demo
    reproduce = " ".join(sub.choices["reproduce"].format_help().split())
    assert "auto" not in reproduce  # reproduce --scale takes smoke or paper only
    assert "local: worker processes here" in reproduce  # --executor has help
    assert "stdout" not in " ".join(sub.choices["plot"].format_help().split())
    submit = parser.parse_args(["submit", "grid.toml"])
    assert submit.executor == "local"  # as reproduce: local unless told otherwise


def test_an_unknown_figure_id_is_not_called_a_config_error(capsys) -> None:
    assert main(["plot", "no-such-figure"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("prunebench: error: figure id = 'no-such-figure'"), err


def test_show_says_what_the_stability_and_the_images_per_s_measure() -> None:
    record = {
        "run_id": "bimp-x",
        "method": "bimp",
        "status": "finished",
        "metrics": {
            "test": {"top1": 0.5},
            "val": {"top1": 0.5},
            "sparsity": 0.9,
            "sparsity_total": 0.89,
            "speedup": 9.0,
            "speedup_corrected": 8.0,
            "images_per_s": 100.0,
            "stability": {"acc_before": 0.8, "acc_after": 0.4, "pruning_stability": 0.5},
        },
    }
    text = format_summary(record)
    assert "pruning stab.   0.5000 (test top-1 0.8000 before the final prune, 0.4000 after" in text
    assert "  images/s        100\n" in text
    # A run whose epochs are all shorter than their untimed first iterations timed nothing.
    record["metrics"]["images_per_s"] = 0.0
    assert "  images/s        not measured (no epoch had more iterations" in format_summary(record)


def test_demo_takes_threads_and_overrides(tmp_path: Path) -> None:
    configs = demo_configs(tmp_path, 6, 0.9, ["runtime.threads=1", "data.batch_size=32"])
    assert {c.runtime.threads for c in configs.values()} == {1}
    assert {c.data.batch_size for c in configs.values()} == {32}
    args = build_parser().parse_args(["demo", "--threads", "2", "--set", "seed=3"])
    assert (args.threads, args.overrides) == (2, ["seed=3"])


def test_demo_without_threads_keeps_a_set_thread_count(tmp_path: Path) -> None:
    """--threads' default (0) was appended after --set and replaced runtime.threads=1 by 0."""
    from benchmark.cli.app import demo_overrides

    args = build_parser().parse_args(["demo", "--set", "runtime.threads=1"])
    configs = demo_configs(tmp_path, 6, 0.9, demo_overrides(args))
    assert {c.runtime.threads for c in configs.values()} == {1}
    both = build_parser().parse_args(["demo", "--set", "runtime.threads=1", "--threads", "3"])
    assert demo_overrides(both)[-1] == "runtime.threads=3"  # the explicit flag, last


@pytest.mark.parametrize(
    "override", ["budget.epochs=12", "method.sparsity=0.5", "budget={epochs = 12}"]
)
def test_demo_refuses_to_set_what_its_comparison_fixes(
    override: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    # Its budgets follow from --epochs (BIMP's T0 too) and its methods from --sparsity.
    with pytest.raises(ConfigError, match=r"demo --set = .* keys outside \[budget\] and"):
        demo_configs(tmp_path, 6, 0.9, [override])
    assert main(["demo", "--store", str(tmp_path / "runs"), "--set", override]) == 2
    assert "use --epochs N, --sparsity S" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_load_store_keeps_list_fields_and_has_a_grid_column(tmp_path: Path) -> None:
    cfg = tiny_config(
        tmp_path,
        "method.name=dense",
        "budget.epochs=1",
        "schedule.name=stepped",
        "schedule.milestones=[0.5]",
        "schedule.values=[0.01]",
    )
    execute(cfg)
    (row,) = load_store(tmp_path).to_dict("records")
    assert row["config.schedule.milestones"] == (0.5,)
    assert row["config.method.exclude"] == ()
    assert row["grid"] is None  # trained by `prunebench run`, not by a grid


def test_ctrl_c_ends_with_a_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import benchmark.cli.app as cli

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "run", interrupted)
    monkeypatch.setitem(cli.COMMANDS, "list", interrupted)
    assert main(["run"]) == 130
    assert capsys.readouterr().err == (
        "prunebench: interrupted (the same command resumes from the last epoch checkpoint)\n"
    )
    assert main(["list"]) == 130
    assert capsys.readouterr().err == "prunebench: interrupted\n"
