"""The logged training loss of CS and DST is the paper's code's (issue 25.8): with the paper's
doubled decay (``method.decay = "reference"``) its loss adds 1/2 wd ||w||^2 over P, whose
gradient prunebench applies as the optimizer group's doubled decay; ``train_loss`` includes the
term, computed at the weights the forward pass used. With ``decay = "once"`` there is none."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.training.trainer import Trainer


@pytest.mark.parametrize(
    ("method", "extra"),
    [("cs", ["method.l1=1e-4"]), ("dst", ["method.alpha=1e-4"])],
)
@pytest.mark.parametrize("decay", ["reference", "once"])
def test_the_logged_loss_of_one_step_is_the_paper_codes_loss(
    tmp_path: Path, method: str, extra: list[str], decay: str
) -> None:
    cfg = tiny_config(
        tmp_path,
        f"method.name={method!r}",
        "optim.weight_decay=0.005",
        f"method.decay={decay!r}",
        *extra,
    )
    trainer = Trainer(cfg)
    x, y = next(iter(trainer.data.train_batches(0, cfg.seed)))
    trainer.set_lr(0.1)
    trainer.method.on_iteration_start(0)
    trainer.model.train()
    with torch.no_grad():
        task = trainer.task.loss(trainer.model, x, y)
        penalty = trainer.method.extra_loss(0)
        weights = sum(float((p.detach() ** 2).sum()) for p in trainer.ctx.masks.params)
    expected = float(task) + float(penalty)
    if decay == "reference":
        expected += 0.5 * 0.005 * weights
    trainer.loss_sum.zero_()
    trainer._train_step(x, y, 0)
    logged = float(trainer.loss_sum) / x.shape[0]
    assert logged == pytest.approx(expected, rel=1e-5)
    if decay == "reference":
        assert logged - float(task) - float(penalty) > 1e-3  # the term is there, and visible
