"""WideResNet on CIFAR-100, One Shot: translation schemes vs tuned schedules."""

from benchmark.experiments.problems import WRN_CIFAR100
from benchmark.experiments.schedule_tables import TUNED, ScheduleGrid, ScheduleTable, smoke_grid

SPEC = ScheduleTable(
    "appendix-schedule-comparison-cifar100",
    "WRN-28-10/CIFAR-100 One Shot IMP: retraining schedules",
    smoke=smoke_grid(),
    paper=ScheduleGrid(
        WRN_CIFAR100,
        (90, 95, 99),
        ("2.5%", "5%", "10%"),
        tuned=TUNED,
        tuned_lrs=(0.0008, 0.004, 0.02, 0.05, 0.1, 0.5),
    ),
)
