"""The paper's tables that no spec rebuilds, each with the reason, so that none is silently absent.

``results/paper/`` holds every numeric table of the paper; each is either an experiment id or
listed here (a test checks that).
"""

from __future__ import annotations

_SEGMENTATION = (
    "semantic segmentation ({}, mean IoU) is not a task of the harness: it trains and scores "
    "image classifiers only; it needs a segmentation dataset loader, the model and an mIoU metric"
)
_TRANSLATION = (
    "neural machine translation (T5-small on WMT16 EN-DE, BLEU) is not a task of the harness: "
    "it needs a tokenised text pipeline, a Hugging Face T5 model and a BLEU metric"
)

NOT_REPRODUCIBLE: dict[str, str] = {
    "appendix-schedule-comparison-coco-deeplab": _SEGMENTATION.format("DeepLabV3 on COCO"),
    "appendix-schedule-comparison-coco-deeplab-iterative": _SEGMENTATION.format(
        "DeepLabV3 on COCO"
    ),
    "appendix-schedule-comparison-cityscapes-pspnet": _SEGMENTATION.format("PSPNet on CityScapes"),
    "appendix-schedule-comparison-cityscapes-pspnet-iterative": _SEGMENTATION.format(
        "PSPNet on CityScapes"
    ),
    "appendix-schedule-comparison-wmt-t5": _TRANSLATION,
    "methods": "an overview of properties, not results: `prunebench methods` prints it from the "
    "registered methods (a test checks them against this table)",
    "problem_config": "the training configurations, inputs rather than results: every spec trains "
    "with them (benchmark/experiments/problems.py, checked against this table by a test), and "
    "their dense accuracies are the 'dense model' reference of the envelope figures",
}
