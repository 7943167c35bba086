"""Original (dense training) learning-rate schedules: constant, stepped, linear, cosine, warm-up.

Every schedule is a pure function of the iteration index and is returned as a float64 numpy
array with one entry per optimizer step.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchmark.config.run import ScheduleConfig
from benchmark.core.errors import ConfigError
from benchmark.core.registry import Registry

# --------------------------------------------------------------------------------------------
# Original (dense training) schedules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OriginalSpan:
    """The iteration layout of an original schedule: total length, warm-up length, epoch size."""

    total: int
    warmup: int
    iters_per_epoch: int


# A shape maps the post-warm-up iteration indices (0-based, counted from the start of training)
# to learning rates; the warm-up itself is shared by all shapes.
OriginalShape = Callable[[ScheduleConfig, np.ndarray, OriginalSpan], np.ndarray]

ORIGINAL_SCHEDULES: Registry[OriginalShape] = Registry("schedule")


@ORIGINAL_SCHEDULES.register("constant")
def _constant_shape(cfg: ScheduleConfig, it: np.ndarray, span: OriginalSpan) -> np.ndarray:
    """Return cfg.lr at every iteration."""
    return np.full(it.shape, float(cfg.lr))


@ORIGINAL_SCHEDULES.register("stepped")
def _stepped_shape(cfg: ScheduleConfig, it: np.ndarray, span: OriginalSpan) -> np.ndarray:
    """Return cfg.lr before the first milestone and values[j] from milestone j on."""
    levels = np.array([cfg.lr, *cfg.values], dtype=np.float64)
    epoch = it // span.iters_per_epoch
    # side="right" counts the milestones <= epoch, so milestone m switches at 0-based epoch m.
    passed = np.searchsorted(np.asarray(cfg.milestones, dtype=np.float64), epoch, side="right")
    return levels[passed]


@ORIGINAL_SCHEDULES.register("linear")
def _linear_shape(cfg: ScheduleConfig, it: np.ndarray, span: OriginalSpan) -> np.ndarray:
    """Return cfg.lr decaying linearly towards zero over the post-warm-up iterations."""
    k = it - span.warmup
    return cfg.lr * (1.0 - k / (span.total - span.warmup))


@ORIGINAL_SCHEDULES.register("cosine")
def _cosine_shape(cfg: ScheduleConfig, it: np.ndarray, span: OriginalSpan) -> np.ndarray:
    """Return cfg.lr following half a cosine towards zero over the post-warm-up iterations."""
    k = it - span.warmup
    return cfg.lr * (1.0 + np.cos(np.pi * k / (span.total - span.warmup))) / 2.0


def _require_finite(field: str, value: object, *, positive: bool) -> None:
    """Raise a ConfigError unless ``value`` is a finite real number (> 0 or >= 0)."""
    # TOML can hand us strings or booleans; those must surface as ConfigError, not TypeError.
    # type() first: the ABC check costs ~1 us, and a paper-scale plan checks ~50,000 numbers.
    is_number = type(value) in (float, int) or (
        isinstance(value, numbers.Real) and not isinstance(value, bool)
    )
    bad = not is_number or not math.isfinite(value) or (value <= 0 if positive else value < 0)
    if bad:
        raise ConfigError(field, value, "a finite number " + ("> 0" if positive else ">= 0"))


def _require_count(field: str, value: object) -> None:
    """Raise a ConfigError unless ``value`` is an integer >= 1 (bools are not counts)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ConfigError(field, value, "an integer >= 1")


def _validate_stepped(cfg: ScheduleConfig) -> None:
    """Check that a stepped schedule has one value per milestone and increasing milestones."""
    if len(cfg.values) != len(cfg.milestones):
        allowed = f"one value per milestone ({len(cfg.milestones)} milestones given)"
        raise ConfigError("schedule.values", list(cfg.values), allowed)
    for value in cfg.values:
        _require_finite("schedule.values", value, positive=False)
    for milestone in cfg.milestones:
        _require_finite("schedule.milestones", milestone, positive=False)
    milestones = list(cfg.milestones)
    if not all(a < b for a, b in zip(milestones, milestones[1:], strict=False)):
        raise ConfigError(
            "schedule.milestones", list(cfg.milestones), "strictly increasing epochs >= 0"
        )


def validate_schedule(cfg: ScheduleConfig, epochs: int) -> None:
    """Raise ConfigError if ``cfg`` cannot describe an ``epochs``-long schedule (cheap checks)."""
    ORIGINAL_SCHEDULES.get(cfg.name, "schedule.name")
    _require_count("budget.epochs", epochs)
    _require_finite("schedule.lr", cfg.lr, positive=True)
    _require_finite("schedule.warmup_epochs", cfg.warmup_epochs, positive=False)
    # linear and cosine divide by the post-warm-up length, so some training must follow it.
    if cfg.warmup_epochs >= epochs:
        raise ConfigError("schedule.warmup_epochs", cfg.warmup_epochs, f"less than {epochs} epochs")
    # Milestones and values only mean something for the stepped schedule; others ignore them.
    if cfg.name == "stepped":
        _validate_stepped(cfg)


def original_warmup_iters(cfg: ScheduleConfig, iters_per_epoch: int) -> int:
    """Return the number of warm-up iterations, round(warmup_epochs * iters_per_epoch)."""
    return int(round(cfg.warmup_epochs * iters_per_epoch))


def original_lrs(cfg: ScheduleConfig, epochs: int, iters_per_epoch: int) -> np.ndarray:
    """Return the original schedule's learning rate for each of epochs*iters_per_epoch steps."""
    validate_schedule(cfg, epochs)
    _require_count("iters_per_epoch", iters_per_epoch)
    epochs, iters_per_epoch = int(epochs), int(iters_per_epoch)
    total = epochs * iters_per_epoch
    warmup = original_warmup_iters(cfg, iters_per_epoch)
    if warmup >= total:  # rounding can eat the last post-warm-up iteration
        raise ConfigError("schedule.warmup_epochs", cfg.warmup_epochs, f"less than {epochs} epochs")
    span = OriginalSpan(total=total, warmup=warmup, iters_per_epoch=iters_per_epoch)
    it = np.arange(total)
    lrs = np.empty(total, dtype=np.float64)
    lrs[:warmup] = cfg.lr * (it[:warmup] + 1) / warmup
    lrs[warmup:] = ORIGINAL_SCHEDULES.get(cfg.name)(cfg, it[warmup:], span)
    return lrs


def linear_decay(lr: float, n: int) -> np.ndarray:
    """Return lr*(1 - i/n) for i = 0..n-1 (BIMP's initial training from eta_1 towards zero)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return lr * (1.0 - np.arange(n, dtype=np.float64) / max(n, 1))
