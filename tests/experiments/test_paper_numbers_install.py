"""The paper's numbers are package data: found from any folder and from a wheel install."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT, env_with_path

from benchmark.cli import main
from benchmark.experiments import paper_numbers

TABLE = "appendix-schedule-comparison-cifar10-oneshot"
PAPER_COLUMNS = ("paper_mean", "paper_std", "diff")


def table_paper_csv(cwd: Path, python_path: Path) -> subprocess.CompletedProcess[str]:
    """``table TABLE --scale smoke --paper --format csv`` in a fresh interpreter at ``cwd``."""
    # PYTHONPATH first: this interpreter may also have another checkout installed editable.
    (cwd / "runs").mkdir(exist_ok=True)  # an empty store: every cell missing, the paper's shown
    env = env_with_path(python_path)
    command = [sys.executable, "-m", "benchmark.cli", "table", TABLE, "--scale", "smoke"]
    command += ["--paper", "--format", "csv", "--store", str(cwd / "runs")]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def assert_has_paper_columns(proc: subprocess.CompletedProcess[str]) -> None:
    """The CSV carries the published value of the first cell (FT, 90%, 2.5%: 90.72 ± 0.22)."""
    assert proc.returncode == 0, proc.stderr
    header, first = proc.stdout.splitlines()[:2]
    assert all(column in header.split(",") for column in PAPER_COLUMNS), header
    assert ",90.72,0.22," in first, first


def test_table_paper_from_a_folder_outside_the_checkout(tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(ROOT.resolve())
    assert_has_paper_columns(table_paper_csv(tmp_path, ROOT))


@pytest.mark.slow
def test_table_paper_from_a_built_wheel(tmp_path: Path) -> None:
    # Build from a copy: an in-tree build would leave build/ and *.egg-info in the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("benchmark", "methods"):
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(ROOT / package, source / package, ignore=ignore)
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    build += ["--no-index", "--quiet", "-w", str(wheels), str(source)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (wheel,) = wheels.glob("prunebench-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        assert f"benchmark/experiments/paper/{TABLE}.csv" in archive.namelist()
        archive.extractall(site)
    where = tmp_path / "elsewhere"
    where.mkdir()
    probe = [sys.executable, "-c", "import benchmark; print(benchmark.__file__)"]
    env = env_with_path(site)
    imported = subprocess.run(probe, capture_output=True, text=True, cwd=where, env=env)
    assert Path(imported.stdout.strip()).is_relative_to(site), imported.stdout + imported.stderr
    assert_has_paper_columns(table_paper_csv(where, site))


def test_paper_without_its_numbers_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(paper_numbers, "PAPER_DIR", tmp_path / "no-paper")
    (tmp_path / "runs").mkdir()
    args = ["table", TABLE, "--store", str(tmp_path / "runs"), "--scale", "smoke", "--paper"]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "published numbers are missing" in captured.err
    assert str(tmp_path / "no-paper") in captured.err
    assert captured.out == ""  # no table without the columns it promised
