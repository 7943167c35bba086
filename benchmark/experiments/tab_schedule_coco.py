"""DeepLabV3 on COCO, One Shot and iterative IMP: the translation schemes (mIoU)."""

from benchmark.experiments.problems import DEEPLAB_COCO, DEEPLAB_SMOKE
from benchmark.experiments.schedule_tables import oneshot_and_iterative

SPECS = oneshot_and_iterative(
    "appendix-schedule-comparison-coco-deeplab",
    "DeepLabV3/COCO",
    (DEEPLAB_COCO, DEEPLAB_SMOKE),
    (50, 60, 70, 80),
    (("3.33%", "6.66%", "16.66%"), ("2x6.66%", "2x10%", "3x6.66%", "3x10%")),
    "iou",
)
