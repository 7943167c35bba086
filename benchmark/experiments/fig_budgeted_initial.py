"""ResNet-56 on CIFAR-10: IMP after budgeted (linear-decay) initial training, ALLR and LLR."""

import dataclasses

from benchmark.experiments.figure_specs import BudgetedInitialFigure, InitialBudgetGrid
from benchmark.experiments.problems import RESNET56_CIFAR10, SMOKE

PAPER_PROBLEM = dataclasses.replace(
    RESNET56_CIFAR10, schedule={"name": "linear", "lr": 0.1}, weight_decays=(5e-4,)
)
PAPER_T0 = (10, 25, 50, 75, 100, 125, 150, 175, 200)
PAPER_SETTINGS = (("One Shot (30 epochs)", 1, 30), ("Iterative (3 x 15 epochs)", 3, 15))
SMOKE_T0 = (2, 5, 10, 20)
SMOKE_SETTINGS = (("One Shot (3 epochs)", 1, 3), ("Iterative (3 x 1 epochs)", 3, 1))


def spec(schedule: str) -> BudgetedInitialFigure:
    """The figure for retraining with ``schedule``."""
    return BudgetedInitialFigure(
        f"appendix-cifar10-budgeted-initial-{schedule}",
        f"ResNet-56/CIFAR-10: IMP+{schedule} after budgeted initial training (deviation)",
        smoke=InitialBudgetGrid(SMOKE, (90, 95), schedule, SMOKE_T0, SMOKE_SETTINGS),
        paper=InitialBudgetGrid(PAPER_PROBLEM, (90, 95, 98), schedule, PAPER_T0, PAPER_SETTINGS),
    )


SPECS = (spec("ALLR"), spec("LLR"))
