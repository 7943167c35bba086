"""The command line's honesty and rough edges: empty stores, smoke-vs-paper, help, pipes."""

from __future__ import annotations

from pathlib import Path

from benchmark.cli import main

SCHEDULE_TABLE = "appendix-schedule-comparison-cifar10-oneshot"


def test_plot_on_an_empty_store_says_so_and_fails(tmp_path: Path, capsys) -> None:
    out = tmp_path / "figures"
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
    assert "| Method | sparsity 50%, budget 10% |" in captured.out


def test_no_warning_without_paper(tmp_path: Path, capsys) -> None:
    assert main(["table", SCHEDULE_TABLE, "--store", str(tmp_path), "--scale", "smoke"]) == 0
    assert "smoke-scale numbers" not in capsys.readouterr().err
