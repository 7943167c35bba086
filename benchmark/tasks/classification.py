"""Image classification: cross-entropy loss, top-1 (and top-5) accuracy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor, nn

from benchmark.core.precision import autocast_dtype
from benchmark.tasks.base import TASKS, Task

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig
    from benchmark.data.base import DataSource


@TASKS.register("classification")
class Classification(Task):
    """Images to one class each; scored by top-1 accuracy (top-5 too from 100 classes)."""

    name = "classification"
    metric = "top1"
    metric_label = "Acc."
    batch = "inputs: float images (N, C, H, W); targets: int64 class indices (N,)"

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.loss_fn = nn.CrossEntropyLoss(label_smoothing=cfg.optim.label_smoothing)

    def loss(self, model: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
        """Cross-entropy (with the configured label smoothing) of the model's logits."""
        return self.loss_fn(model(inputs), targets)

    def evaluate(self, model: nn.Module, data: DataSource, split: str) -> dict[str, float]:
        """Top-1 (top-5) accuracy and mean cross-entropy on ``split``."""
        from benchmark.measure.metrics import evaluate

        return evaluate(
            model,
            data.eval_batches(split),
            data.num_classes,
            half=autocast_dtype(self.cfg.optim.precision()),
        )
