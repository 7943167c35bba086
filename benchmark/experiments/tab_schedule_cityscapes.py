"""PSPNet on CityScapes, One Shot and iterative IMP: the translation schemes (mIoU)."""

from benchmark.experiments.problems import PSPNET_CITYSCAPES, PSPNET_SMOKE
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable, task_smoke_grid

SPARSITIES = (60, 70, 80, 90)
ONESHOT = ScheduleTable(
    "appendix-schedule-comparison-cityscapes-pspnet",
    "PSPNet/CityScapes One Shot IMP: retraining schedules (mIoU)",
    smoke=task_smoke_grid(PSPNET_SMOKE, "iou"),
    paper=ScheduleGrid(
        PSPNET_CITYSCAPES, SPARSITIES, ("0.66%", "1.66%", "3.33%", "5%"), metric="iou"
    ),
)
ITERATIVE = ScheduleTable(
    "appendix-schedule-comparison-cityscapes-pspnet-iterative",
    "PSPNet/CityScapes iterative IMP (2-3 cycles): retraining schedules (mIoU)",
    smoke=task_smoke_grid(PSPNET_SMOKE, "iou", iterative=True),
    paper=ScheduleGrid(
        PSPNET_CITYSCAPES, SPARSITIES, ("2x0.66%", "2x1.66%", "3x0.66%", "3x1.66%"), metric="iou"
    ),
)
SPECS = (ONESHOT, ITERATIVE)
