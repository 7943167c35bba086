"""Envelopes: best IMP accuracy per total retraining epochs (CIFAR-10 vs Renda et al., ImageNet)."""

import dataclasses

from benchmark.experiments.figure_specs import EnvelopeFigure, EnvelopeGrid
from benchmark.experiments.problems import RESNET50_IMAGENET, RESNET56_CIFAR10, SMOKE_RETRAIN
from benchmark.experiments.schedule_tables import TRANSLATIONS

# Renda et al.'s baseline "requiring the 2000, 2800, and 3600 epochs" at 90/95/98% (Section 4.2):
# 10, 14 and 18 cycles of 200 epochs. 20% per cycle would need ceil(10.3) = 11 cycles at 90%; no
# single rounding of log(1 - s) / log(0.8) gives 10/14/18, so the cycles are the paper's. At 90%
# the 10th cycle prunes the 25.5% of the remaining weights it takes to reach exactly 90%.
RENDA_CYCLES = {90.0: 10, 95.0: 14, 98.0: 18}

# The smoke grids run on the schedule tables' problem (SMOKE_RETRAIN: cnn_small, 40 stepped
# epochs at lr 0.5, 8 seeds, issue 38): there one-shot pruning at 90/95% hurts and retraining
# decides how much comes back, so accuracy rises with the budget; on the earlier cnn_wide grid
# (issue 30's SMOKE) every point was within two test images of the others. Epochs per cycle
# double from 1 to 16 (2.5-40% of the 40 original epochs; the paper's 5-30%) in J = 1, 2 or 4
# cycles (within the paper's 1-6): every total budget (1, 2, 4, ..., 64 epochs) doubles the last,
# so neighbouring points differ by more than the test images' noise, and each has a One Shot
# configuration among those it is selected from. Renda et al. run the paper's 10 and 14 cycles
# of the 40 original epochs. Measured (8 seeds): the earlier grid (1/2/4/10 epochs x J = 1, 2,
# 3, 6) put budgets such as 3 or 6 epochs that only 1-epoch cycles reach (3 x 1 epoch: 61.9% at
# 95%, One Shot 2 epochs: 80.8%) between better ones, and its 90% envelope read Spearman +0.76.
SMOKE_SPARSITIES = (90.0, 95.0)
SMOKE_GRID = EnvelopeGrid(
    SMOKE_RETRAIN,
    SMOKE_SPARSITIES,
    ("ALLR",),
    (1, 2, 4, 8, 16),
    (1, 2, 4),
    renda_cycles=RENDA_CYCLES,
)


def paper_grid(schedule: str) -> EnvelopeGrid:
    """T_rt in {10, 15, ..., 60} and J in {1, ..., 6} at 90/95/98%, weight decay tuned."""
    return EnvelopeGrid(
        RESNET56_CIFAR10,
        (90, 95, 98),
        (schedule,),
        tuple(range(10, 61, 5)),
        tuple(range(1, 7)),
        renda_cycles=RENDA_CYCLES,
    )


MAIN = EnvelopeFigure(
    "cifar10-envelope",
    "ResNet-56/CIFAR-10: IMP+ALLR envelope over total retraining epochs vs Renda et al.",
    smoke=SMOKE_GRID,
    paper=paper_grid("ALLR"),
    ci=True,
)
ALLR = EnvelopeFigure(
    "appendix-cifar10-envelope-ALLR",
    "ResNet-56/CIFAR-10: IMP+ALLR envelope (appendix, weight decay tuned per point)",
    smoke=SMOKE_GRID,
    paper=paper_grid("ALLR"),
)
LLR = EnvelopeFigure(
    "appendix-cifar10-envelope-LLR",
    "ResNet-56/CIFAR-10: IMP+LLR envelope over total retraining epochs vs Renda et al.",
    smoke=dataclasses.replace(SMOKE_GRID, schedules=("LLR",)),
    paper=paper_grid("LLR"),
)
# ResNet-50/ImageNet: the runs of the One Shot and iterative schedule tables (2.22/5.55/11.11% of
# 90 epochs per cycle, 1-3 cycles), so reproducing both tables also draws this figure; at smoke
# scale likewise the runs of the two digits CIFAR-10 schedule tables (1/2/4 epochs, 1-3 cycles).
IMAGENET = EnvelopeFigure(
    "imagenet-IMP-envelope",
    "ResNet-50/ImageNet: every retraining schedule's IMP envelope vs the dense model",
    smoke=EnvelopeGrid(SMOKE_RETRAIN, SMOKE_SPARSITIES, TRANSLATIONS, (1, 2, 4), (1, 2, 3), False),
    paper=EnvelopeGrid(RESNET50_IMAGENET, (70, 80, 90), TRANSLATIONS, (2, 5, 10), (1, 2, 3), False),
)
SPECS = (MAIN, ALLR, LLR, IMAGENET)
