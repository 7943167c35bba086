"""MaxViT-T on ImageNet: the translation schemes, One Shot and iterative, magnitude and filters."""

from benchmark.experiments.problems import MAXVIT_IMAGENET
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable, smoke_grid

ONE_SHOT_BUDGETS = ("1%", "2.5%", "5%", "10%")  # 2, 5, 10 and 20 of 200 epochs
ITERATIVE_BUDGETS = ("2x1%", "2x2.5%", "3x1%", "3x2.5%")
SPARSITIES = (75, 80, 85, 90)
FILTER_SPARSITIES = (30, 35, 40, 45, 50)

ONE_SHOT = ScheduleTable(
    "appendix-schedule-comparison-imagenet-maxvit",
    "MaxViT-T/ImageNet One Shot IMP: retraining schedules, 75-90%",
    smoke=smoke_grid(),
    paper=ScheduleGrid(MAXVIT_IMAGENET, SPARSITIES, ONE_SHOT_BUDGETS),
)
ITERATIVE = ScheduleTable(
    "appendix-schedule-comparison-imagenet-iterative-maxvit",
    "MaxViT-T/ImageNet iterative IMP (2-3 cycles): retraining schedules",
    smoke=smoke_grid(iterative=True),
    paper=ScheduleGrid(MAXVIT_IMAGENET, SPARSITIES, ITERATIVE_BUDGETS),
)
FILTER = ScheduleTable(
    "appendix-schedule-comparison-imagenet-maxvit-filter",
    "MaxViT-T/ImageNet One Shot filter pruning: retraining schedules, 30-50%",
    smoke=smoke_grid(structured=True, sparsities=(30, 50)),
    paper=ScheduleGrid(MAXVIT_IMAGENET, FILTER_SPARSITIES, ONE_SHOT_BUDGETS, structured=True),
)
ITERATIVE_FILTER = ScheduleTable(
    "appendix-schedule-comparison-imagenet-iterative-maxvit-filter",
    "MaxViT-T/ImageNet iterative filter pruning: retraining schedules",
    smoke=smoke_grid(iterative=True, structured=True, sparsities=(30, 50)),
    paper=ScheduleGrid(MAXVIT_IMAGENET, FILTER_SPARSITIES, ITERATIVE_BUDGETS, structured=True),
)
SPECS = (ONE_SHOT, ITERATIVE, FILTER, ITERATIVE_FILTER)
