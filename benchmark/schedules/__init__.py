"""Learning-rate schedules as pure functions of the step: the original (dense) schedules and the
paper's retraining translations (FT, LRW, SLR, CLR, LLR, ALLR and its ablations).

May import: core, config.
"""

from benchmark.schedules.original import original_lrs
from benchmark.schedules.retraining import retrain_lrs

__all__ = ["original_lrs", "retrain_lrs"]
