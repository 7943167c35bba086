"""The results store on disk: one JSON record per run, checkpoints and final weights, the
submission records of grids, and the store as a pandas DataFrame.

May import: core.
"""

from typing import Any

from benchmark.store.results import Store

__all__ = ["Store", "load_store"]


def __getattr__(name: str) -> Any:
    # load_store needs pandas, which the command line does not load until a command needs it.
    if name == "load_store":
        from benchmark.store.frame import load_store

        return load_store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
