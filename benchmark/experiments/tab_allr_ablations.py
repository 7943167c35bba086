"""ALLR ablations: its factors d1/d2 alone and the accuracy-based AccALLR."""

from benchmark.experiments.problems import RESNET50_IMAGENET, RESNET56_CIFAR10
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable, smoke_grid

D1D2 = ("ALLR", "ALLRd1", "ALLRd2", "LLR")
ACC = ("ALLR", "AccALLR")
CIFAR10_BUDGETS = ("2%", "5%", "20%")
# The captions (tab:appendix-ALLR-AccALLR-Comparison, tab:appendix-ALLR-d1d2-Comparison) say
# "2% (2 epochs), 5% (5 epochs), 20% (20 epochs)", which contradicts itself at T = 200 (2% would
# be 4 epochs). The printed numbers fit the epochs: ALLR at 90% gains +0.71 (AccALLR table) and
# +0.83 (d1/d2 table) from the 5% to the 20% column, as the main One Shot table's ALLR from 5 to
# 20 epochs (+0.72), not from 10 to 40 (about +0.45); LLR likewise (+0.83 against +0.63 / +0.3).
# So the columns keep the printed labels and retrain 2, 5 and 20 epochs: the caption's epoch
# counts, the one rule for captions that name them (structured CIFAR-10 follows it too).
CIFAR10_BUDGET_EPOCHS = {"2%": 2, "5%": 5, "20%": 20}

D1D2_TABLE = ScheduleTable(
    "appendix-ALLR-d1d2-Comparison",
    "ResNet-56/CIFAR-10 One Shot: ALLR vs its factors d1 and d2 alone, and LLR",
    smoke=smoke_grid(D1D2),
    paper=ScheduleGrid(
        RESNET56_CIFAR10,
        (80, 90, 98),
        CIFAR10_BUDGETS,
        D1D2,
        budget_epochs=CIFAR10_BUDGET_EPOCHS,
    ),
)
ACC_TABLE = ScheduleTable(
    "appendix-ALLR-AccALLR-Comparison",
    "ResNet-56/CIFAR-10 One Shot: ALLR vs AccALLR",
    smoke=smoke_grid(ACC),
    paper=ScheduleGrid(
        RESNET56_CIFAR10, (80, 90, 98), CIFAR10_BUDGETS, ACC, budget_epochs=CIFAR10_BUDGET_EPOCHS
    ),
)
ACC_IMAGENET_TABLE = ScheduleTable(
    "appendix-ALLR-AccALLR-Comparison-Imagenet",
    "ResNet-50/ImageNet iterative: ALLR vs AccALLR",
    smoke=smoke_grid(ACC, iterative=True),
    paper=ScheduleGrid(
        RESNET50_IMAGENET, (70, 90), ("2x2.22%", "2x3.33%", "3x2.22%", "3x3.33%"), ACC
    ),
)
SPECS = (D1D2_TABLE, ACC_TABLE, ACC_IMAGENET_TABLE)
