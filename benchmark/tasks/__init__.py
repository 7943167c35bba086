"""Learning tasks: what a batch looks like, the loss, the evaluation metric, the theoretical
speedup count and the default prunable set.

A dataset names its task (``DataSource.task``); the trainer asks that task for the training loss
and the evaluation metrics, so trainer, methods, store and tables work the same for every task.
Every task's evaluation dict holds ``"loss"``, ``"top1"`` (per example, per pixel or per token
top-1 accuracy: methods measure pruning stability with it) and the task's headline metric named by
:attr:`Task.metric`, higher being better.

May import: core, config, data, measure, pruning.
"""

from __future__ import annotations

from benchmark.tasks.base import TASKS, Task, get_task
from benchmark.tasks.causal_lm import CausalLM
from benchmark.tasks.classification import Classification
from benchmark.tasks.segmentation import Segmentation
from benchmark.tasks.translation import Translation

__all__ = ["TASKS", "CausalLM", "Classification", "Segmentation", "Task", "Translation", "get_task"]
