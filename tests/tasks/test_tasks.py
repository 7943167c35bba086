"""The task layer: every task says its loss, metric, speedup count and default prunable set."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from helpers import tiny_config

from benchmark.tasks import TASKS, Classification, get_task
from benchmark.training.trainer import Trainer


def test_classification_is_the_task_of_the_image_datasets(tmp_path) -> None:
    trainer = Trainer(tiny_config(tmp_path, "method.name=dense", "budget.epochs=1"))
    assert isinstance(trainer.task, Classification)
    assert trainer.task.metric == "top1" and "classification" in TASKS


def test_classification_loss_is_label_smoothed_cross_entropy(tmp_path) -> None:
    task = get_task("classification", tiny_config(tmp_path, "optim.label_smoothing=0.1"))
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    expected = F.cross_entropy(model(x), y, label_smoothing=0.1)
    assert torch.allclose(task.loss(model, x, y), expected)


def test_default_exclusions_of_a_task_leave_those_layers_out_of_p(tmp_path) -> None:
    task = get_task("classification", tiny_config(tmp_path))
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    assert [n for n, _ in task.prunable(model, [])] == ["0.weight", "1.weight"]
    task.default_exclude = ("1",)
    assert [n for n, _ in task.prunable(model, [])] == ["0.weight"]
