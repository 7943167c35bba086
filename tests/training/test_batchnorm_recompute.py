"""BatchNorm statistics after the final prune, where the paper's code recomputes them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from helpers import tiny_config
from torch import nn

from benchmark.training.trainer import Trainer


def bn_stats(model: nn.Module) -> list[torch.Tensor]:
    """Running means and variances of every BatchNorm layer."""
    out: list[torch.Tensor] = []
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            assert m.running_mean is not None and m.running_var is not None
            out += [m.running_mean.clone(), m.running_var.clone()]
    return out


def test_recompute_is_one_train_mode_pass_without_gradients(tmp_path: Path) -> None:
    trainer = Trainer(tiny_config(tmp_path / "s", "method.name='gsm'", "budget.epochs=1"))
    model = trainer.model
    model.eval()
    expected = copy.deepcopy(model).train()
    with torch.no_grad():
        for x, _ in trainer.data.train_batches(trainer.method_epochs, trainer.cfg.seed):
            expected(x)
    weights = [p.detach().clone() for p in model.parameters()]
    before = bn_stats(model)
    trainer.recompute_batchnorm()
    after = bn_stats(model)
    assert all(not torch.equal(a, b) for a, b in zip(after, before, strict=True))
    for a, e in zip(after, bn_stats(expected), strict=True):
        torch.testing.assert_close(a, e)
    assert not model.training  # modes restored
    assert all(torch.equal(p, w) for p, w in zip(model.parameters(), weights, strict=True))
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize(
    ("method", "overrides", "recomputes"),
    [
        ("gsm", (), True),
        ("lc", (), True),
        ("gsm", ("method.recompute_bn=false",), False),
        ("lc", ("method.recompute_bn=false",), False),
        ("bimp", ("budget.initial_epochs=1", "budget.cycles=1"), True),
        ("dnw", (), False),  # the reference's scratch strategies end without that pass
        ("dpf", (), False),
    ],
)
def test_final_prune_recomputes_where_the_reference_does(
    tmp_path: Path, method: str, overrides: tuple[str, ...], recomputes: bool
) -> None:
    cfg = tiny_config(
        tmp_path / "s",
        f"method.name={method!r}",
        "budget.epochs=2",
        "method.sparsity=0.9",
        *overrides,
    )
    trainer = Trainer(cfg)
    events: list[str] = []
    recompute, evaluate, hard_prune = (
        trainer.ctx.recompute_batchnorm,
        trainer.ctx.evaluate,
        trainer.method.hard_prune,
    )
    assert recompute is not None

    def log_recompute() -> None:
        events.append("bn")
        recompute()

    def log_evaluate(split: str) -> dict[str, float]:
        events.append(split)
        return evaluate(split)

    def log_prune(*args: object, **kwargs: object) -> None:
        events.append("prune")
        hard_prune(*args, **kwargs)  # type: ignore[arg-type]

    trainer.ctx.recompute_batchnorm = log_recompute
    trainer.ctx.evaluate = log_evaluate
    trainer.method.hard_prune = log_prune  # type: ignore[method-assign]
    trainer.fit()
    assert events.count("bn") == (1 if recomputes else 0)
    if recomputes:
        # right after the last prune, before the test accuracy after pruning
        i = events.index("bn")
        assert events[i - 1] == "prune" and events[i + 1] == "test"
        assert "stability" in trainer.ctx.record
