"""ResNet-56 on CIFAR-10, iterative IMP: translation schemes vs tuned schedules."""

from benchmark.experiments.problems import RESNET56_CIFAR10
from benchmark.experiments.schedule_tables import TUNED, ScheduleGrid, ScheduleTable, smoke_grid

SPEC = ScheduleTable(
    "appendix-schedule-comparison-cifar10-iterative",
    "ResNet-56/CIFAR-10 iterative IMP (2-3 cycles): retraining schedules",
    smoke=smoke_grid(iterative=True),
    paper=ScheduleGrid(
        RESNET56_CIFAR10,
        (90, 95, 99),
        ("2x2.5%", "2x5%", "2x10%", "3x2.5%", "3x5%", "3x10%"),
        tuned=TUNED,
        tuned_lrs=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5),
    ),
)
