"""Retraining learning-rate schedules: the paper's translations of the original schedule.

FT, LRW, SLR, CLR, LLR, ALLR and its ablation variants (section 2.1 of the paper) and the tuned
baselines of appendix B.1, each a pure function returning one float64 learning rate per step.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from benchmark.core.errors import ConfigError
from benchmark.core.registry import Registry

# Fraction of each retraining cycle spent warming up for SLR, CLR, LLR and the ALLR family.
RETRAIN_WARMUP_FRACTION = 0.1

ADAPTIVE_SCHEDULES: frozenset[str] = frozenset({"ALLR", "AccALLR", "ALLR-d1", "ALLR-d2"})
TUNED_SCHEDULES: frozenset[str] = frozenset(
    {"tuned-constant", "tuned-stepped", "tuned-cosine", "tuned-linear"}
)


@dataclass(frozen=True)
class RetrainInputs:
    """Everything a retraining kind may look at: cycle length, original schedule and knobs."""

    n: int
    original: np.ndarray
    original_warmup: int
    scale: float
    initial_lr: float | None
    warmup_fraction: float

    @property
    def max_lr(self) -> float:
        """The largest learning rate of the original schedule."""
        return float(self.original.max())

    @property
    def min_lr(self) -> float:
        """The smallest learning rate of the original schedule after its own warm-up."""
        return float(self.original[self.original_warmup :].min())

    def bac_source(self) -> np.ndarray:
        """The original schedule with its warm-up replaced by maxLR (what SLR compresses)."""
        e = self.original.copy()
        e[: self.original_warmup] = self.max_lr
        return e

    def tuned_peak(self) -> float:
        """The tuned initial learning rate (validated to be present for tuned kinds)."""
        assert self.initial_lr is not None
        return self.initial_lr


# Body of a retraining schedule after the warm-up: maps k = 0..R-1 and R to learning rates.
Body = Callable[[np.ndarray, int], np.ndarray]
RetrainKind = Callable[[RetrainInputs], np.ndarray]

RETRAIN_SCHEDULES: Registry[RetrainKind] = Registry("retrain schedule")


def _warmup_then(peak: float, n: int, warmup: int, body: Body) -> np.ndarray:
    """Return a cosine warm-up from 0 to ``peak`` over iterations 1..W+1, then ``body``."""
    rest = n - warmup
    lrs = np.empty(n, dtype=np.float64)
    lrs[warmup:] = body(np.arange(rest), rest)
    if warmup > 0:
        # The spec lets the warm-up own iteration W+1 (value exactly peak), overriding body at k=0.
        steps = np.arange(warmup + 1)
        lrs[: warmup + 1] = peak * (1.0 - np.cos(np.pi * steps / warmup)) / 2.0
    return lrs


def _fixed_warmup(n: int) -> int:
    """Warm-up length W = floor(0.1*N) of the fixed restarting schedules."""
    # Integer arithmetic keeps floor(N/10) exact, independent of how 0.1 rounds in binary.
    return n // 10


def _tuned_warmup(inp: RetrainInputs) -> int:
    """Warm-up length W = floor(warmup_fraction*N) of the tuned schedules."""
    # The tiny epsilon stops binary rounding from flooring e.g. 0.29*100 = 28.999... to 28.
    return math.floor(inp.warmup_fraction * inp.n + 1e-9)


def _linear_body(peak: float) -> Body:
    """Linear decay from ``peak`` at k=0 towards zero at k=R."""
    return lambda k, r: peak * (1.0 - k / r)


def _cosine_body(peak: float, floor: float) -> Body:
    """Half-cosine decay from ``peak`` at k=0 towards ``floor`` at k=R."""
    return lambda k, r: floor + (peak - floor) * (1.0 + np.cos(np.pi * k / r)) / 2.0


def _compressed_body(e: np.ndarray) -> Body:
    """Budget-aware conversion: lr(k) = e[floor(k*L/R)], squeezing e into R iterations."""
    return lambda k, r: e[(k * len(e)) // r]


@RETRAIN_SCHEDULES.register("FT")
def _ft(inp: RetrainInputs) -> np.ndarray:
    """Fine tuning: the smallest post-warm-up original learning rate, constant, no warm-up."""
    return np.full(inp.n, inp.min_lr)


@RETRAIN_SCHEDULES.register("LRW")
def _lrw(inp: RetrainInputs) -> np.ndarray:
    """Learning-rate rewinding: the last N original values, front-padded with original[0]."""
    tail = inp.original[-inp.n :]
    pad = np.full(inp.n - len(tail), inp.original[0])
    return np.concatenate([pad, tail])


@RETRAIN_SCHEDULES.register("SLR")
def _slr(inp: RetrainInputs) -> np.ndarray:
    """Scaled restarting: warm up to maxLR, then the original compressed into R iterations."""
    w = _fixed_warmup(inp.n)
    return _warmup_then(inp.max_lr, inp.n, w, _compressed_body(inp.bac_source()))


@RETRAIN_SCHEDULES.register("CLR")
def _clr(inp: RetrainInputs) -> np.ndarray:
    """Cyclic restarting: warm up to maxLR, then a half cosine down towards minLR."""
    w = _fixed_warmup(inp.n)
    return _warmup_then(inp.max_lr, inp.n, w, _cosine_body(inp.max_lr, inp.min_lr))


@RETRAIN_SCHEDULES.register("LLR")
def _llr(inp: RetrainInputs) -> np.ndarray:
    """Linear restarting: warm up to maxLR, then linear decay towards zero."""
    w = _fixed_warmup(inp.n)
    return _warmup_then(inp.max_lr, inp.n, w, _linear_body(inp.max_lr))


def _allr(inp: RetrainInputs) -> np.ndarray:
    """Adaptive linear restarting: LLR with its peak discounted to scale*maxLR."""
    peak = inp.scale * inp.max_lr
    return _warmup_then(peak, inp.n, _fixed_warmup(inp.n), _linear_body(peak))


# The adaptive kinds share one shape and differ only in how the caller computes ``scale``.
for _name in sorted(ADAPTIVE_SCHEDULES):
    RETRAIN_SCHEDULES.add(_name, _allr)


@RETRAIN_SCHEDULES.register("tuned-constant")
def _tuned_constant(inp: RetrainInputs) -> np.ndarray:
    """Tuned constant: optional warm-up to initial_lr, then initial_lr."""
    peak = inp.tuned_peak()
    return _warmup_then(peak, inp.n, _tuned_warmup(inp), lambda k, r: np.full(k.shape, peak))


@RETRAIN_SCHEDULES.register("tuned-stepped")
def _tuned_stepped(inp: RetrainInputs) -> np.ndarray:
    """Tuned stepped (BAC): the SLR shape rescaled to start at initial_lr instead of maxLR."""
    peak = inp.tuned_peak()
    e = inp.bac_source() * (peak / inp.max_lr)
    return _warmup_then(peak, inp.n, _tuned_warmup(inp), _compressed_body(e))


@RETRAIN_SCHEDULES.register("tuned-cosine")
def _tuned_cosine(inp: RetrainInputs) -> np.ndarray:
    """Tuned cosine: optional warm-up, then a half cosine from initial_lr towards zero."""
    peak = inp.tuned_peak()
    return _warmup_then(peak, inp.n, _tuned_warmup(inp), _cosine_body(peak, 0.0))


@RETRAIN_SCHEDULES.register("tuned-linear")
def _tuned_linear(inp: RetrainInputs) -> np.ndarray:
    """Tuned linear: optional warm-up, then linear decay from initial_lr towards zero."""
    peak = inp.tuned_peak()
    return _warmup_then(peak, inp.n, _tuned_warmup(inp), _linear_body(peak))


def _check_original(original: np.ndarray, original_warmup: int) -> np.ndarray:
    """Return ``original`` as a float64 vector after checking it is usable."""
    arr = np.asarray(original, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise ValueError("original must be a non-empty 1-D array of finite learning rates")
    if not 0 <= original_warmup < arr.size:
        raise ValueError(f"original_warmup must be in [0, {arr.size}), got {original_warmup}")
    return arr


def _check_knobs(kind: str, scale: float, initial_lr: float | None, warmup_fraction: float) -> None:
    """Raise ConfigError for knobs that ``kind`` uses and that are out of range."""
    if kind in ADAPTIVE_SCHEDULES and not (math.isfinite(scale) and 0.0 <= scale <= 1.0):
        raise ConfigError("scale", scale, "a number in [0, 1]")
    if kind not in TUNED_SCHEDULES:
        return
    if initial_lr is None or not math.isfinite(initial_lr) or initial_lr <= 0:
        raise ConfigError("method.initial_lr", initial_lr, f"a number > 0 (required by {kind})")
    if not (math.isfinite(warmup_fraction) and 0.0 <= warmup_fraction < 1.0):
        raise ConfigError("method.warmup_fraction", warmup_fraction, "a number in [0, 1)")


def retrain_lrs(
    kind: str,
    n: int,
    original: np.ndarray,
    *,
    original_warmup: int = 0,
    scale: float = 1.0,
    initial_lr: float | None = None,
    warmup_fraction: float = 0.0,
) -> np.ndarray:
    """Return the N per-iteration learning rates of one prune-retrain cycle of kind ``kind``.

    ``scale`` is used only by the adaptive kinds, ``initial_lr`` and ``warmup_fraction`` only
    by the tuned ones; other kinds ignore them.
    """
    shape = RETRAIN_SCHEDULES.get(kind, "method.schedule")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n (retraining iterations) must be an integer >= 1, got {n!r}")
    n = int(n)
    _check_knobs(kind, scale, initial_lr, warmup_fraction)
    inp = RetrainInputs(
        n=n,
        original=_check_original(original, original_warmup),
        original_warmup=original_warmup,
        scale=float(scale),
        initial_lr=initial_lr,
        warmup_fraction=float(warmup_fraction),
    )
    return shape(inp)


# --------------------------------------------------------------------------------------------
# ALLR discount factors
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdaptiveNeeds:
    """Which discount factors a retraining kind needs the caller to measure."""

    d1: bool = False  # norm-based d1: relative L2 change of the weights caused by pruning
    d2: bool = False  # time-based d2: retraining epochs over original epochs
    acc: bool = False  # accuracy-based d1: relative train-accuracy drop (AccALLR)


_NEEDS: dict[str, AdaptiveNeeds] = {
    "ALLR": AdaptiveNeeds(d1=True, d2=True),
    "AccALLR": AdaptiveNeeds(d2=True, acc=True),
    "ALLR-d1": AdaptiveNeeds(d1=True),
    "ALLR-d2": AdaptiveNeeds(d2=True),
}


def adaptive_needs(kind: str) -> AdaptiveNeeds:
    """Return which of d1 / d2 / acc ``kind`` needs; non-adaptive kinds need none."""
    RETRAIN_SCHEDULES.get(kind, "method.schedule")
    return _NEEDS.get(kind, AdaptiveNeeds())


def allr_d1(pruned_distance: float, norm: float, fraction_pruned: float) -> float:
    """Return ||W - W_p|| / (||W|| * sqrt(q)), with q the fraction of remaining weights pruned."""
    if pruned_distance < 0 or norm < 0 or not 0.0 <= fraction_pruned <= 1.0:
        raise ValueError(
            f"need distance >= 0, norm >= 0, fraction in [0, 1]; got "
            f"{pruned_distance}, {norm}, {fraction_pruned}"
        )
    denominator = norm * math.sqrt(fraction_pruned)
    # Nothing pruned (q=0) or an all-zero network: pruning changed nothing, so no impact.
    return pruned_distance / denominator if denominator > 0 else 0.0


def allr_d2(retrain_epochs: float, original_epochs: float) -> float:
    """Return min(retrain_epochs / original_epochs, 1)."""
    if retrain_epochs < 0 or original_epochs <= 0:
        raise ValueError(f"need retrain_epochs >= 0 and original_epochs > 0, got {retrain_epochs}")
    return min(retrain_epochs / original_epochs, 1.0)


def allr_scale(d1: float | None, d2: float | None) -> float:
    """Return min(max of the given factors, 1): ALLR uses both, ALLR-d1 / ALLR-d2 only one."""
    given: Sequence[float] = [d for d in (d1, d2) if d is not None]
    if not given:
        raise ValueError("allr_scale needs at least one of d1, d2")
    return min(max(given), 1.0)


def acc_allr_d1(train_acc_before: float, train_acc_after: float) -> float:
    """Return the relative train-accuracy drop (before-after)/before clipped to [0, 1] (AccALLR)."""
    if train_acc_before <= 0:
        return 0.0  # a dense model with zero accuracy has no accuracy left to lose
    drop = (train_acc_before - train_acc_after) / train_acc_before
    return min(max(drop, 0.0), 1.0)
