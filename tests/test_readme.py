"""The README's examples stay true: its two commands, .ci/run, and its complete TOML config."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from benchmark.config.parse import config_from_dict
from benchmark.training.validation import validate

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_second() -> None:
    setup = [b for b in _blocks("bash") if "python3 -m venv" in b]
    assert len(setup) == 1
    commands = [line for line in setup[0].splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("prunebench demo")
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == commands[1]


def test_readme_complete_config_is_valid() -> None:
    (example,) = [b for b in _blocks("toml") if "[runtime]" in b]
    cfg = config_from_dict(tomllib.loads(example))
    validate(cfg)
    assert cfg.model.name == "resnet56" and cfg.method.name == "bimp"
    assert cfg.budget.initial_epochs == 150


def test_the_quickstart_shows_the_result_its_first_run_stores() -> None:
    from benchmark.training.validation import load_config

    quickstart = README.split("## Quickstart", 1)[1].split("```", 2)[1]
    (shown,) = re.findall(r"prunebench show (\S+)", quickstart)
    assert "prunebench run  " in quickstart  # the first command: the default config, as is
    assert shown == load_config().run_id
