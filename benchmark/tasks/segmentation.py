"""Semantic segmentation: pixel-wise cross-entropy, mean intersection over union (mIoU)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.core.precision import autocast_dtype, half_autocast
from benchmark.tasks.base import TASKS, Task

if TYPE_CHECKING:
    from benchmark.data.base import DataSource

IGNORE_INDEX = 255
# Weight of the auxiliary head's loss (PSPNet, Zhao et al. 2017).
AUX_WEIGHT = 0.4


def logits_of(output: Tensor | dict[str, Tensor]) -> Tensor:
    """The main logits of a segmentation model's output (``"out"`` of a torchvision dict)."""
    return output["out"] if isinstance(output, dict) else output


def confusion_matrix(
    pred: Tensor, target: Tensor, num_classes: int, ignore_index: int = IGNORE_INDEX
) -> Tensor:
    """The (num_classes, num_classes) int64 matrix of (target, prediction) pixel counts.

    Pixels whose target is ``ignore_index`` (or outside the class range) are left out.
    """
    valid = (target >= 0) & (target < num_classes) & (target != ignore_index)
    index = target[valid] * num_classes + pred[valid]
    return torch.bincount(index, minlength=num_classes**2).reshape(num_classes, num_classes)


def mean_iou(confusion: Tensor) -> float:
    """Mean IoU over the classes that occur in the targets or the predictions (NaN if none)."""
    confusion = confusion.double()
    hits = confusion.diag()
    union = confusion.sum(0) + confusion.sum(1) - hits
    present = union > 0
    if not present.any():
        return float("nan")
    return float((hits[present] / union[present]).mean())


@torch.no_grad()
def evaluate_segmentation(
    model: nn.Module,
    batches: Iterable[tuple[Tensor, Tensor]],
    num_classes: int,
    *,
    half: torch.dtype | None = None,
) -> dict[str, float]:
    """Return "miou", "top1" (pixel accuracy) and "loss" (mean cross-entropy per labelled pixel).

    Ignored pixels count nowhere; runs in eval mode and restores the modules' modes afterwards.
    """
    from benchmark.measure.metrics import eval_mode, model_device

    device = model_device(model)
    confusion = torch.zeros(num_classes, num_classes, dtype=torch.int64, device=device)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    with eval_mode(model):
        for inputs, targets in batches:
            inputs, targets = inputs.to(device), targets.to(device)
            with half_autocast(device, half):
                logits = logits_of(model(inputs))
            logits = logits.float()
            loss_sum += F.cross_entropy(
                logits, targets, ignore_index=IGNORE_INDEX, reduction="sum"
            ).double()
            confusion += confusion_matrix(logits.argmax(1), targets, num_classes)
    labelled = int(confusion.sum())
    if labelled == 0:
        raise ValueError("evaluate_segmentation() got no labelled pixels")
    return {
        "miou": mean_iou(confusion),
        "top1": float(confusion.diag().sum()) / labelled,
        "loss": loss_sum.item() / labelled,
    }


@TASKS.register("segmentation")
class Segmentation(Task):
    """Images to a class per pixel (255: unlabelled); scored by mean IoU."""

    name = "segmentation"
    metric = "miou"
    metric_label = "mIoU"
    batch = (
        "inputs: float images (N, 3, H, W); targets: int64 class per pixel (N, H, W), "
        f"{IGNORE_INDEX} where unlabelled"
    )
    # The auxiliary head is dropped at inference: its weights are no part of the pruned model.
    default_exclude = ("aux_classifier", "aux_classifier.*")

    def loss(self, model: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
        """Pixel-wise cross-entropy of the main head, plus 0.4 x that of an auxiliary head."""
        output = model(inputs)
        loss = F.cross_entropy(logits_of(output), targets, ignore_index=IGNORE_INDEX)
        if isinstance(output, dict) and "aux" in output:
            aux = F.cross_entropy(output["aux"], targets, ignore_index=IGNORE_INDEX)
            loss = loss + AUX_WEIGHT * aux
        return loss

    def evaluate(self, model: nn.Module, data: DataSource, split: str) -> dict[str, float]:
        """Mean IoU, pixel accuracy and loss on ``split``."""
        return evaluate_segmentation(
            model,
            data.eval_batches(split),
            data.num_classes,
            half=autocast_dtype(self.cfg.optim.precision()),
        )
