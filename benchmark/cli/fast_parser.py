"""An argument parser that measures the terminal once per process, not once per option.

argparse builds a help formatter for every ``add_argument`` (to check the option's metavar), and
each formatter asks ``shutil.get_terminal_size``: with ~170 options that was ~0.1 s of CPU time
of every command, a twentieth of ``table``'s. The width is the one argparse computes itself.
"""

from __future__ import annotations

import argparse
import functools
import shutil


@functools.cache
def terminal_width() -> int:
    """The help text's width, as argparse's formatter computes it (terminal columns less 2)."""
    return shutil.get_terminal_size().columns - 2


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with the terminal width read once; its sub-command parsers
    are of this class too (argparse makes them of the parent's class)."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=terminal_width())
