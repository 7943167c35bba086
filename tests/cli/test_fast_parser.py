"""The command line measures the terminal once per process, and its help keeps argparse's
width (terminal columns less 2)."""

from __future__ import annotations

import argparse
import os

import pytest

from benchmark.cli import fast_parser
from benchmark.cli.app import build_parser


def test_building_every_command_asks_the_terminal_size_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = []

    def size(*_args: object) -> os.terminal_size:
        calls.append(1)
        return os.terminal_size((70, 24))

    monkeypatch.setattr(fast_parser.shutil, "get_terminal_size", size)
    fast_parser.terminal_width.cache_clear()
    try:
        build_parser()
        assert len(calls) == 1
        assert fast_parser.terminal_width() == 68
        # The help reads as argparse's own at the same terminal size.
        fast, plain = fast_parser.Parser(prog="x"), argparse.ArgumentParser(prog="x")
        for parser in (fast, plain):
            parser.add_argument("--alpha-option", help="a long help text " * 8)
            parser.add_argument("--beta", choices=["one", "two"], default="one")
        assert fast.format_help() == plain.format_help()
    finally:
        fast_parser.terminal_width.cache_clear()
