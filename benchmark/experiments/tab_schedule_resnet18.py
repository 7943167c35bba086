"""ResNet-18 on CIFAR-10, One Shot: translation schemes vs tuned schedules."""

from benchmark.experiments.problems import RESNET18_CIFAR10
from benchmark.experiments.schedule_tables import TUNED, ScheduleGrid, ScheduleTable, smoke_grid

SPEC = ScheduleTable(
    "appendix-schedule-comparison-resnet18",
    "ResNet-18/CIFAR-10 One Shot IMP: retraining schedules",
    smoke=smoke_grid(),
    paper=ScheduleGrid(
        RESNET18_CIFAR10,
        (70, 90, 95, 98),
        ("5%", "10%", "25%"),
        tuned=TUNED,
        tuned_lrs=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5),
    ),
)
