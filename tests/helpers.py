"""Test helpers shared by the method tests: tiny configs and interrupted runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmark.config import RunConfig
from benchmark.runner import parent_weights
from benchmark.store import Store
from benchmark.trainer import Trainer
from benchmark.validation import load_config


def tiny_config(store: Path, *overrides: str) -> RunConfig:
    """A fast digits config (batch 128, one thread, no progress bar) with ``overrides``.

    Deterministic kernels, so that equality checks also hold when the suite runs on a GPU.
    """
    base = [
        f"output.dir={str(store)!r}",
        "logging.progress=false",
        "data.batch_size=128",
        "runtime.threads=1",
        "runtime.deterministic=true",
    ]
    return load_config(None, [*base, *overrides])


def run_uninterrupted(cfg: RunConfig) -> dict[str, Any]:
    """Train ``cfg`` in one go (no checkpoint file) and return its final metrics."""
    store = Store(cfg.output.dir)
    _, parent = parent_weights(cfg, store)
    metrics = Trainer(cfg, None, parent).fit()
    assert metrics is not None
    return metrics


def run_interrupted(cfg: RunConfig, stop_after: int, tmp: Path) -> dict[str, Any]:
    """Train ``stop_after`` epochs, drop the trainer, resume a fresh one from the checkpoint."""
    store = Store(cfg.output.dir)
    _, parent = parent_weights(cfg, store)
    ckpt = tmp / f"{cfg.run_id}.pt"
    assert Trainer(cfg, ckpt, parent).fit(stop_after=stop_after) is None
    resumed = Trainer(cfg, ckpt, parent)
    assert resumed.try_resume()
    assert resumed.state.epoch == stop_after
    metrics = resumed.fit()
    assert metrics is not None
    return metrics


def comparable(metrics: dict[str, Any]) -> dict[str, Any]:
    """The deterministic part of a run's metrics (no timings)."""
    return {k: v for k, v in metrics.items() if k not in ("images_per_s", "wall_seconds")}


def record_lrs(trainer: Trainer) -> list[float]:
    """Train ``trainer`` to the end and return the learning rate of every optimizer step."""
    lrs: list[float] = []
    original = trainer.optimizer.step

    def step(*args: Any, **kwargs: Any) -> Any:
        lrs.append(trainer.optimizer.param_groups[0]["lr"])
        return original(*args, **kwargs)

    trainer.optimizer.step = step  # type: ignore[method-assign]
    trainer.fit()
    return lrs


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any training epoch starts (import it into a test module to use it)."""

    def boom(self: Trainer, epoch: int) -> dict[str, Any]:
        raise AssertionError("training started")

    monkeypatch.setattr(Trainer, "train_epoch", boom)


def cli_run(store: Path, *overrides: str) -> int:
    """``prunebench run`` on the default config with a fast setup, ``overrides`` and ``store``."""
    from benchmark.cli import main

    base = ["logging.progress=false", "data.batch_size=128", "runtime.threads=1"]
    args = ["run", "--set", f"output.dir={str(store)!r}"]
    for item in [*base, "runtime.deterministic=true", *overrides]:
        args += ["--set", item]
    return main(args)


def stored_files(store: Path) -> list[Path]:
    """Results, checkpoints, weights and archives of ``store`` (lock files are not results)."""
    if not store.exists():
        return []
    return [p for p in store.rglob("*") if p.is_file() and ".locks" not in p.parts]
