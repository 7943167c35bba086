"""The commands that train nothing run with the cyclic garbage collector paused, and leave it as
they found it; commands that train never pause it. The CPU time saved is printed by
``python -m benchmark.bench.cli_times``, not asserted here."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from benchmark.cli.app import COMMANDS, build_parser, main
from benchmark.cli.collector import TRAIN_NOTHING, paused_collector, trains_nothing


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["table", "appendix-cifar10-results"], True),
        (["grid", "show", "slurm/grids/smoke.toml"], True),
        (["methods"], True),
        (["reproduce", "appendix-cifar10-results", "--scale", "paper", "--dry-run"], True),
        (["submit", "slurm/grids/smoke.toml", "--dry-run"], True),
        (["reproduce", "appendix-cifar10-results"], False),
        (["submit", "slurm/grids/smoke.toml"], False),
        (["run"], False),
        (["free"], False),
    ],
)
def test_only_commands_that_train_nothing_pause_the_collector(
    argv: list[str], expected: bool
) -> None:
    assert trains_nothing(build_parser().parse_args(argv)) is expected


def test_every_command_named_exists() -> None:
    assert TRAIN_NOTHING <= set(COMMANDS)


class Node:
    """An object that can hold itself."""

    self: Any = None


def test_the_collector_is_paused_inside_and_running_after() -> None:
    assert gc.isenabled()
    with paused_collector(True):
        assert not gc.isenabled()
        node = Node()
        node.self = node  # a cycle only the collector frees
        alive = weakref.ref(node)
        del node
    assert gc.isenabled()
    # Nothing stays frozen in a process that goes on: the cycle is collected.
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert alive() is None
    with paused_collector(False):
        assert gc.isenabled()


def test_a_collector_paused_by_the_caller_stays_paused() -> None:
    gc.disable()
    try:
        with paused_collector(True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_inside_leaves_the_collector_running() -> None:
    with pytest.raises(ValueError), paused_collector(True):
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_read_only_command_in_process_leaves_the_collector_running(tmp_path: Path) -> None:
    assert main(["list", "--store", str(tmp_path / "runs")]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0
