"""PSPNet on CityScapes, One Shot and iterative IMP: the translation schemes (mIoU)."""

from benchmark.experiments.problems import PSPNET_CITYSCAPES, PSPNET_SMOKE
from benchmark.experiments.schedule_tables import oneshot_and_iterative

SPECS = oneshot_and_iterative(
    "appendix-schedule-comparison-cityscapes-pspnet",
    "PSPNet/CityScapes",
    (PSPNET_CITYSCAPES, PSPNET_SMOKE),
    (60, 70, 80, 90),
    (("0.66%", "1.66%", "3.33%", "5%"), ("2x0.66%", "2x1.66%", "3x0.66%", "3x1.66%")),
    "iou",
)
