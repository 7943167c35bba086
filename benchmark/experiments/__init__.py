"""The paper's tables and figures as experiment specs, registered by id (the paper's labels).

``get_experiment(ID)`` and ``EXPERIMENTS`` (:mod:`~benchmark.experiments.registry`) load every spec,
which needs torch (the methods' presets); :mod:`~benchmark.experiments.catalog` answers what the
command line asks before any run (which ids exist, which have a table or a figure, what each
plans) from a small generated file, without loading them.

May import: core, config, data, methods, training.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "EXPERIMENTS": "registry",
    "NOT_REPRODUCIBLE": "not_reproducible",
    "get_experiment": "registry",
    "Experiment": "base",
    "PlannedRun": "base",
    "Scale": "base",
    "TableLayout": "base",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    # The specs load on first use, so that importing the catalog (or this package) stays light.
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
