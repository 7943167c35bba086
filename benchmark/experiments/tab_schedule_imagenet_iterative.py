"""ResNet-50 on ImageNet, iterative IMP: the translation schemes."""

from benchmark.experiments.problems import RESNET50_IMAGENET
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable, smoke_grid

SPEC = ScheduleTable(
    "appendix-schedule-comparison-imagenet-iterative",
    "ResNet-50/ImageNet iterative IMP (2-3 cycles): retraining schedules",
    smoke=smoke_grid(iterative=True),
    paper=ScheduleGrid(
        RESNET50_IMAGENET,
        (70, 80, 90),
        ("2x2.22%", "2x5.55%", "2x11.11%", "3x2.22%", "3x5.55%", "3x11.11%"),
    ),
)
