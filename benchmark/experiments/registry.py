"""The registry of experiment specs: every table and figure of the paper, by id.

Every module of this package named ``tab_*`` or ``fig_*`` defines ``SPEC`` or ``SPECS``; importing
this module registers them all in :data:`EXPERIMENTS`.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from benchmark.core.errors import ConfigError
from benchmark.core.registry import Registry
from benchmark.experiments.base import Experiment, PlannedRun, Scale, TableLayout
from benchmark.experiments.not_reproducible import NOT_REPRODUCIBLE

EXPERIMENTS: Registry[Experiment] = Registry("experiment")


def _register_all() -> None:
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if not info.name.startswith(("tab_", "fig_")):
            continue
        module = importlib.import_module(f"benchmark.experiments.{info.name}")
        specs = getattr(module, "SPECS", None) or (module.SPEC,)
        for spec in specs:
            EXPERIMENTS.add(spec.id, spec)


def get_experiment(experiment_id: str) -> Experiment:
    """The spec registered as ``experiment_id`` (ConfigError listing the ids otherwise).

    A paper table that no spec rebuilds raises a ConfigError that says why.
    """
    if experiment_id in NOT_REPRODUCIBLE:
        raise ConfigError(
            "experiment id",
            experiment_id,
            f"a reproducible id; this table is not: {NOT_REPRODUCIBLE[experiment_id]}",
        )
    return EXPERIMENTS.get(experiment_id, "experiment id")


def unpublished_error(experiment: Experiment) -> ConfigError:
    """The error of ``--paper`` on a table without published numbers: why it has none, and
    which tables have them."""
    tables = [e for e in EXPERIMENTS if EXPERIMENTS.get(e).layout("smoke") is not None]
    without = [e for e in tables if EXPERIMENTS.get(e).published_numbers() is None]
    having = [e for e in tables if e not in without]
    others = [e for e in without if e != experiment.id]
    if len(without) < len(having):
        which = "every other table of prunebench list" + (
            f" but {', '.join(others)}" * bool(others)
        )
    else:
        which = ", ".join(having)
    return ConfigError(
        PAPER_FIELD,
        experiment.id,
        f"a table with published numbers ({which}); this one has none: {experiment.unpublished}",
    )


# The field of the error of --paper on a table without published numbers.
PAPER_FIELD = "table id with --paper"


_register_all()

__all__ = [
    "EXPERIMENTS",
    "NOT_REPRODUCIBLE",
    "Experiment",
    "PlannedRun",
    "Scale",
    "TableLayout",
    "get_experiment",
]
