"""An argument parser that measures the terminal once per process, not once per option.

argparse builds a help formatter for every ``add_argument`` (to check the option's metavar), and
each formatter asks ``shutil.get_terminal_size``: with ~170 options that was ~0.1 s of CPU time
of every command, a twentieth of ``table``'s. The width is the one argparse computes itself.
Its usage errors wrap to the output's width and say the closest choice to a misspelt one.
"""

from __future__ import annotations

import argparse
import functools
import re
import shutil
from typing import NoReturn

from benchmark.core.errors import close_matches


@functools.cache
def terminal_width() -> int:
    """The help text's width, as argparse's formatter computes it (terminal columns less 2)."""
    return shutil.get_terminal_size().columns - 2


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with the terminal width read once; its sub-command parsers
    are of this class too (argparse makes them of the parent's class)."""

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=terminal_width())

    def error(self, message: str) -> NoReturn:
        """argparse's usage error, wrapped to the width of stderr, with the closest choice to a
        misspelt one (a command's name, ``--scale smok``) said first."""
        import sys

        from benchmark.core.textwidth import width_of, wrap

        found = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        near = close_matches(found[1], re.findall(r"'([^']*)'", found[2]), n=1) if found else []
        if near:
            message = message.replace(" (choose from", f"; did you mean {near[0]}? (choose from")
        self.print_usage(sys.stderr)
        self.exit(2, wrap(f"{self.prog}: error: {message}", width_of(sys.stderr)) + "\n")
