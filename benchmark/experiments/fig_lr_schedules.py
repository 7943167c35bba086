"""Figure 1: the retraining schedules after 200 stepped epochs, retraining for 60 epochs."""

from benchmark.experiments.figure_specs import LRScheduleFigure

SPEC = LRScheduleFigure(
    "lr-schedules", "Figure 1: FT/LRW/SLR/CLR/LLR/ALLR learning rates (no runs)"
)
