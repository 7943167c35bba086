"""Errors that help: "did you mean" for spec ids, method names, config keys and grid keys; an
unknown key called unknown; ``--paper`` on a table without published numbers says which tables
have them and why this one has none; reading commands in a folder without a store say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.cli import main
from benchmark.core.errors import close_matches


def _err(args: list[str], capsys: pytest.CaptureFixture, code: int = 2) -> str:
    assert main(args) == code
    captured = capsys.readouterr()
    return " ".join(captured.err.split())  # the width may fold a message: read it as one line


def test_close_matches_prefers_the_same_key_in_another_section() -> None:
    keys = ["optim.name", "optim.momentum", "schedule.lr", "schedule.name"]
    assert close_matches("optim.lr", keys) == ["schedule.lr"]
    assert close_matches("optim.momentun", keys) == ["optim.momentum"]
    assert close_matches("zzz", keys) == []


def test_a_misspelt_spec_id_is_answered_with_the_closest_not_all_ids(
    capsys: pytest.CaptureFixture,
) -> None:
    err = _err(["reproduce", "appendix-cifar10-resluts", "--dry-run"], capsys)
    assert "did you mean appendix-cifar10-results" in err
    assert "stable-unstable-results" not in err and len(err) < 400
    err = _err(["table", "stable-unstabel-results"], capsys)
    assert "did you mean stable-unstable-results?" in err


def test_a_misspelt_method_name_is_answered_with_the_closest(
    capsys: pytest.CaptureFixture,
) -> None:
    assert "did you mean bimp?" in _err(["run", "--set", "method.name=bmip"], capsys)
    assert "did you mean gmp" in _err(["methods", "gmpp"], capsys)
    slice_of = ["reproduce", "stable-unstable-results", "--scale", "smoke", "--dry-run"]
    assert "did you mean gmp?" in _err([*slice_of, "--methods", "bimp,gmpp"], capsys)
    assert "did you mean CIFAR-10?" in _err([*slice_of, "--section", "cifar-10"], capsys)


def test_an_unknown_config_key_is_called_unknown_and_points_to_the_key_meant(
    capsys: pytest.CaptureFixture,
) -> None:
    err = _err(["run", "--set", "optim.lr=0.05", "--print-config"], capsys)
    assert "the key optim.lr is unknown" in err and "is invalid" not in err
    assert "did you mean schedule.lr?" in err
    err = _err(["run", "--set", "method.sparsty=0.5", "--print-config"], capsys)
    assert "the key method.sparsty is unknown" in err and "did you mean method.sparsity?" in err
    assert "did you mean optim?" in _err(["run", "--set", "optm.momentum=0.5"], capsys)


def _grid(tmp_path: Path, text: str) -> str:
    path = tmp_path / "grid.toml"
    path.write_text('name = "g"\n' + text + '\n[base]\ndata.name = "digits"\n')
    return str(path)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("seed = 2\n", "the key seed is unknown (value 2); did you mean seeds?"),
        ('[axes]\n"optim.lr" = [0.1]\n', "did you mean schedule.lr?"),
        ('[axes]\n"optm.momentum" = [0.5]\n', "did you mean optim.momentum?"),
        ("[methods.bmip]\npreset = true\n", "did you mean bimp?"),
        ("[methods.bimp]\npresets = true\n", "did you mean methods.bimp.preset"),
    ],
    ids=["grid key", "axis key", "axis section", "method", "method table key"],
)
def test_a_misspelt_grid_key_is_answered_with_the_closest(
    text: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    err = _err(["grid", "show", _grid(tmp_path, text), "--store", str(tmp_path)], capsys)
    assert said in err


@pytest.mark.parametrize("command", ["table", "reproduce"])
def test_paper_numbers_of_a_table_without_them_say_why_and_which_tables_have_them(
    command: str, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    store = tmp_path / "runs"
    store.mkdir()
    args = [command, "llm-retraining-perp", "--paper", "--store", str(store)]
    err = _err([*args, "--scale", "smoke"], capsys)
    # reproduce refuses before its runs train (they would be lost time: no table follows).
    assert list(store.iterdir()) == []
    assert "--paper = True" not in err
    assert "this one has none: PERP's cell values" in err
    assert "every other table of prunebench list" in err


@pytest.mark.parametrize(
    "args",
    [
        ["table", "stable-unstable-results"],
        ["plot", "cifar10-envelope"],
        ["status", "GRID"],
    ],
    ids=lambda a: a[0],
)
def test_reading_commands_in_a_folder_without_a_store_say_so_and_name_store(
    args: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    grid = Path(_grid(tmp_path, "[methods.bimp]\n")).resolve()
    monkeypatch.chdir(tmp_path)
    assert main([str(grid) if a == "GRID" else a for a in args]) == 2
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "there is none at results/runs" in err and "--store DIR" in err
    assert "missing" not in captured.out  # no table of missing cells
    assert not (tmp_path / "results").exists()


def test_a_grid_path_not_found_says_where_it_was_read_and_names_the_shipped_grid(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmark.launch.grid import SHIPPED_GRIDS

    monkeypatch.chdir(tmp_path)  # a newcomer's folder outside the checkout
    err = _err(["grid", "show", "slurm/grids/example.toml"], capsys)
    assert f"a relative path is read from {tmp_path}" in err
    assert f"did you mean {SHIPPED_GRIDS / 'example.toml'}?" in err
    assert "did you mean" not in _err(["status", "mine.toml"], capsys)


def test_a_misspelt_command_or_choice_is_answered_with_the_closest_in_the_width(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    for args, said in ((["rnu"], "did you mean run?"), (["list", "--scale", "smok"], "smoke?")):
        with pytest.raises(SystemExit) as exit_:
            main(args)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert said in " ".join(err.split())
        assert max(len(line) for line in err.splitlines()) <= 100
