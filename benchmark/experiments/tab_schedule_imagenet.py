"""ResNet-50 on ImageNet, One Shot: the translation schemes (main text and appendix)."""

from benchmark.experiments.problems import RESNET50_IMAGENET
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable, smoke_grid

MAIN = ScheduleTable(
    "schedule-comparison-imagenet",
    "ResNet-50/ImageNet One Shot IMP: retraining schedules (main text)",
    smoke=smoke_grid(),
    paper=ScheduleGrid(RESNET50_IMAGENET, (70, 80, 90), ("2.22%", "5.55%", "11.11%")),
)
APPENDIX = ScheduleTable(
    "appendix-schedule-comparison-imagenet",
    "ResNet-50/ImageNet One Shot IMP: retraining schedules, 70-95%",
    smoke=smoke_grid(),
    paper=ScheduleGrid(RESNET50_IMAGENET, (70, 80, 90, 95), ("2.22%", "5.55%", "11.11%", "22.22%")),
)
SPECS = (MAIN, APPENDIX)
