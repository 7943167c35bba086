"""The results store on disk: one JSON record per run, checkpoints and final weights, the
submission records of grids, and the store as a pandas DataFrame.

May import: core.
"""

from benchmark.store.frame import load_store
from benchmark.store.results import Store

__all__ = ["Store", "load_store"]
