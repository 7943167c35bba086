"""Outside method plugins: they never break the suite or other methods, and the contract ships.

Each test installs plugins into a temporary site folder (a module plus dist-info, as pip does)
and runs prunebench or pytest in a fresh process with that folder on the path.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, env_with_path, install_plugin, readme_plugin_source

FIXTURE = ROOT / "tests" / "fixtures" / "plugin" / "prunebench_example_plugin.py"


def _run(args: list[str], *paths: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = env_with_path(*paths)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600
    )


def test_suite_collects_with_the_readme_plugin_and_a_same_named_plugin_installed(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    source, name = readme_plugin_source()
    install_plugin(site, "readme-plugin", "readme_plugin", source, [name])
    # Another package registering the name the suite's own fixture plugin uses.
    install_plugin(site, "copycat", "copycat_plugin", FIXTURE.read_text(), ["copycat"])
    out = _run(
        [
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/training/test_contract.py",
        ],
        site,
        ROOT,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # the suite's own methods are collected; the copy of the fixture is skipped, the README's
    # plugin is left to `prunebench check-method`
    assert "test_contract[fixture-prune-at-end]" in out.stdout
    assert "test_contract[bimp]" in out.stdout
    assert name not in out.stdout


def test_a_broken_plugin_leaves_the_other_methods_usable(tmp_path: Path) -> None:
    site = tmp_path / "site"
    broken = "import missing_dependency_of_this_plugin\n"
    install_plugin(site, "broken-plugin", "broken_plugin", broken, ["broken"])

    ok = _run(["-m", "benchmark.cli", "run", "--print-config"], site, ROOT)
    assert ok.returncode == 0, ok.stderr
    assert 'name = "bimp"' in ok.stdout
    assert "method plugin 'broken'" in ok.stderr and "skipped" in ok.stderr
    assert "Traceback" not in ok.stderr

    asked = _run(
        ["-m", "benchmark.cli", "run", "--print-config", "--set", "method.name=broken"], site, ROOT
    )
    assert asked.returncode == 2, asked.stderr
    assert "method.name = 'broken'" in asked.stderr
    assert "missing_dependency_of_this_plugin" in asked.stderr
    assert "Traceback" not in asked.stderr


@pytest.mark.slow
def test_contract_runs_from_the_installed_package_against_an_outside_plugin(
    tmp_path: Path,
) -> None:
    # The package as pip installs it: benchmark/ and methods/ only, no tests/ anywhere.
    pkg = tmp_path / "site-packages"
    for package in ("benchmark", "methods"):
        shutil.copytree(ROOT / package, pkg / package, ignore=shutil.ignore_patterns("__pycache__"))
    plugins = tmp_path / "plugins"
    source, name = readme_plugin_source()
    install_plugin(plugins, "readme-plugin", "readme_plugin", source, [name])
    # The same plugin, but pruning to half the goal sparsity: its failure must be readable.
    half = source.replace(f'"{name}"', '"half-prune"').replace(
        "self.cfg.method.sparsity)", "self.cfg.method.sparsity / 2)"
    )
    assert half != source
    install_plugin(plugins, "half-plugin", "half_plugin", half, ["half-prune"])

    work = tmp_path / "elsewhere"
    work.mkdir()
    args = ["-m", "benchmark.cli", "check-method", name, "half-prune", "--workdir", str(work)]
    out = _run(args, pkg, plugins, cwd=work)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    good = [line for line in lines if f" {name}: " in line]
    # It prunes at the end: the step-by-step mask check had nothing to check and says so.
    (masks,) = [line for line in good if "hard masks hold after every step" in line]
    assert masks.startswith("SKIP") and "prunes at the end" in masks, masks
    assert len(good) == 7 and all(line.startswith("PASS") for line in good if line != masks)
    (sparsity,) = [line for line in lines if "half-prune: exact goal sparsity" in line]
    assert sparsity.startswith("FAIL"), out.stdout
    assert "expected round(0.8 * " in sparsity and "(sparsity 0.4000)" in sparsity, sparsity
    assert "check(s) failed (2 skipped" in out.stdout.splitlines()[-1]  # both mask checks
