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
