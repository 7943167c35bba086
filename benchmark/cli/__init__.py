"""The ``prunebench`` command line: one module per group of subcommands. Parsing imports no
torch: every subcommand imports what it runs only when it runs, so ``--help``, argument errors
and ``list`` answer at once.

May import: core, config, schedules, pruning, data, models, store, measure, tasks, methods,
training, launch, experiments, reporting.
"""

from benchmark.cli.app import main

__all__ = ["main"]
