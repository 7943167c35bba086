"""ResNet-56 on CIFAR-10, One Shot: translation schemes vs tuned schedules (CI at smoke scale)."""

from benchmark.experiments.problems import RESNET56_CIFAR10
from benchmark.experiments.schedule_tables import TUNED, ScheduleGrid, ScheduleTable, smoke_grid

SPEC = ScheduleTable(
    "appendix-schedule-comparison-cifar10-oneshot",
    "ResNet-56/CIFAR-10 One Shot IMP: FT/LRW/SLR/CLR/LLR/ALLR vs tuned schedules",
    smoke=smoke_grid(),
    paper=ScheduleGrid(
        RESNET56_CIFAR10,
        (50, 90, 95, 99),
        ("2.5%", "5%", "10%", "25%"),
        tuned=TUNED,
        tuned_lrs=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5),
    ),
    ci=True,
)
