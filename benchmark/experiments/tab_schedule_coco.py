"""DeepLabV3 on COCO, One Shot and iterative IMP: the translation schemes (mIoU)."""

from benchmark.experiments.problems import DEEPLAB_COCO, DEEPLAB_SMOKE
from benchmark.experiments.schedule_tables import ScheduleGrid, ScheduleTable, task_smoke_grid

SPARSITIES = (50, 60, 70, 80)
ONESHOT = ScheduleTable(
    "appendix-schedule-comparison-coco-deeplab",
    "DeepLabV3/COCO One Shot IMP: retraining schedules (mIoU)",
    smoke=task_smoke_grid(DEEPLAB_SMOKE, "iou"),
    paper=ScheduleGrid(DEEPLAB_COCO, SPARSITIES, ("3.33%", "6.66%", "16.66%"), metric="iou"),
)
ITERATIVE = ScheduleTable(
    "appendix-schedule-comparison-coco-deeplab-iterative",
    "DeepLabV3/COCO iterative IMP (2-3 cycles): retraining schedules (mIoU)",
    smoke=task_smoke_grid(DEEPLAB_SMOKE, "iou", iterative=True),
    paper=ScheduleGrid(
        DEEPLAB_COCO, SPARSITIES, ("2x6.66%", "2x10%", "3x6.66%", "3x10%"), metric="iou"
    ),
)
SPECS = (ONESHOT, ITERATIVE)
