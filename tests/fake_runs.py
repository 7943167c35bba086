"""Finished runs written straight into a store (no training), for tests of what reads a store."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from benchmark.config.parse import config_to_dict
from benchmark.config.run import RunConfig
from benchmark.store.results import Store


def finish(
    store: Path,
    cfg: RunConfig,
    *,
    val: float,
    test: float,
    sparsity: float | None = None,
    wall_seconds: float = 2.0,
    images_per_s: float = 1000.0,
    environment: dict[str, Any] | None = None,
    **metrics: Any,
) -> dict[str, Any]:
    """Write a finished result of ``cfg`` with these metrics into ``store``; returns it."""
    record = {
        "run_id": cfg.run_id,
        "status": "finished",
        "method": cfg.method.name,
        "config": config_to_dict(cfg),
        "metrics": {
            "val": {"top1": val},
            "test": {"top1": test},
            "sparsity": cfg.method.sparsity if sparsity is None else sparsity,
            "speedup": 10.0,
            "images_per_s": images_per_s,
            "wall_seconds": wall_seconds,
            **metrics,
        },
        "environment": environment or {"device": "cpu"},
    }
    Store(store).write(record)
    return record


def finish_all(store: Path, configs: list[RunConfig], seed: int = 0) -> dict[str, float]:
    """Finish every config with seeded random accuracies; returns run id -> validation top-1."""
    rng = random.Random(seed)
    vals = {}
    for cfg in {c.run_id: c for c in configs}.values():
        vals[cfg.run_id] = rng.uniform(0.5, 0.99)
        finish(store, cfg, val=vals[cfg.run_id], test=rng.uniform(0.5, 0.99))
    return vals
