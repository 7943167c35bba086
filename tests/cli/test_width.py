"""Output that fits: every command's lines within the terminal's width (100 columns when not
printing to one, ``--width N`` to choose), tables folded so that a row's label stays with its
cells, and ``table --paper`` keeping a cell's value, the paper's value and the difference in one
column."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fake_runs import finish_all

from benchmark.cli import main
from benchmark.core.textwidth import DEFAULT_WIDTH, fit_table

ROWS = [
    ["method", "sparsity specifiable", "pruning stable", "own keys", "summary"],
    ["bimp", "yes", "yes", "7", "budgeted IMP: T0 epochs of training, then J prune-retrain cycles"],
    ["gmp", "no", "yes", "12", "gradual magnitude pruning over the whole budget"],
]


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


@pytest.mark.parametrize("width", [30, 40, 60, 80, 100, 200])
def test_a_table_fits_and_each_label_stays_with_its_cells(width: int) -> None:
    text = fit_table(ROWS, width, align="lllrl", prose=True)
    assert _widest(text) <= width
    lines = text.splitlines()
    for label, value in (("bimp", "7"), ("gmp", "12")):
        # The row's own cells follow its label before the next row's label.
        at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == [label])
        below = lines[at : at + 3]
        assert any(re.search(rf"\b{value}\b", ln) for ln in below), (width, below)
    if width >= 200:  # wide enough: one line per row, as the table is
        assert len(lines) == len(ROWS)


def test_a_table_without_a_width_is_as_wide_as_it_is() -> None:
    assert fit_table(ROWS, None).splitlines()[1].startswith("bimp  ")
    assert _widest(fit_table(ROWS, None)) > 100


def _lines(capsys: pytest.CaptureFixture) -> list[str]:
    captured = capsys.readouterr()
    return (captured.out + captured.err).splitlines()


@pytest.mark.parametrize(
    "args",
    [
        ["list"],
        ["methods"],
        ["methods", "bimp"],
        ["reproduce", "appendix-cifar10-results", "--scale", "paper", "--dry-run"],
        ["grid", "show", "slurm/grids/example.toml"],
        ["run", "--set", "optim.lr=0.05"],
        ["reproduce", "appendix-cifar10-resluts"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
@pytest.mark.parametrize("width", [None, 80])
def test_every_line_of_a_command_fits_the_width(
    args: list[str],
    width: int | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Not a terminal (captured) and no COLUMNS: 100 columns, unless --width says otherwise.
    monkeypatch.delenv("COLUMNS", raising=False)
    store = ["--store", str(tmp_path / "store")] if args[0] in ("list", "reproduce") else []
    asked = [] if width is None else ["--width", str(width)]
    main([*args, *store, *asked])
    lines = _lines(capsys)
    assert lines and max(len(ln) for ln in lines) <= (width or DEFAULT_WIDTH)


def test_width_before_the_command_and_zero_for_no_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["--width", "60", "methods"]) == 0
    assert max(len(ln) for ln in _lines(capsys)) <= 60
    assert main(["methods", "--width", "0"]) == 0
    lines = _lines(capsys)
    assert max(len(ln) for ln in lines) > 100  # the summaries on the rows' own lines
    assert lines[2].startswith("bimp ") and "budgeted IMP" in lines[2]


@pytest.fixture(scope="module")
def smoke_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The finished smoke runs of stable-unstable-results (random accuracies, no training)."""
    from benchmark.experiments import get_experiment

    store = tmp_path_factory.mktemp("store")
    runs = get_experiment("stable-unstable-results").runs("smoke", store)
    finish_all(store, [r.cfg for r in runs])
    return store


def test_table_paper_keeps_value_paper_and_difference_in_one_column(
    smoke_store: Path, capsys: pytest.CaptureFixture
) -> None:
    args = ["table", "stable-unstable-results", "--paper", "--store", str(smoke_store)]
    assert main([*args, "--width", "100"]) == 0
    lines = _lines(capsys)
    assert max(len(ln) for ln in lines) <= 100
    pipes = [ln for ln in lines if ln.startswith("|")]
    headers = [ln for ln in pipes if ln.startswith("| Method")]
    # Each part holds several columns (not one column per table), every row of a method is
    # followed by the paper's values in the same columns, then the differences.
    assert 1 < len(headers) <= 4
    assert all(ln.count("|") >= 4 for ln in headers)
    at = pipes.index(next(ln for ln in pipes if ln.startswith("| BIMP |")))
    assert pipes[at + 1].startswith("| ↳ paper |") and pipes[at + 2].startswith("| ↳ Δ |")
    cells = [c.strip() for c in pipes[at + 1].strip("|").split("|")]
    assert all("paper" not in c and "Δ" not in c for c in cells[1:])
    # Unsplit (no limit), the published values stay inline, as before.
    assert main([*args, "--width", "0"]) == 0
    assert "(paper " in "\n".join(_lines(capsys))


def test_reproduce_prints_its_table_fitted_too(
    smoke_store: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # its figure goes to results/figures here
    args = ["reproduce", "stable-unstable-results", "--store", str(smoke_store), "--paper"]
    assert main([*args, "--width", "80"]) == 0
    lines = _lines(capsys)
    assert max(len(ln) for ln in lines) <= 80
    assert any(ln.startswith("| ↳ paper |") for ln in lines)


def test_help_fits_a_100_column_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from benchmark.cli.fast_parser import terminal_width

    monkeypatch.setenv("COLUMNS", "100")
    terminal_width.cache_clear()
    try:
        with pytest.raises(SystemExit):
            main(["--help"])
    finally:
        terminal_width.cache_clear()  # the next test's COLUMNS
    out = capsys.readouterr().out
    assert "COMMAND" in out and "reproduce" in out
    assert _widest(out) <= 100  # the line of every command's name was 170 columns
