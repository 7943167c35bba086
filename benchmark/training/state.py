"""What a run carries from epoch to epoch: its progress and throughput, as saved in its checkpoint,
and the errors that end a run or discard its checkpoint.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from benchmark.core.files import CorruptFileError, move_aside
from benchmark.store.results import StoreWarning
from benchmark.training.distributed import is_main


class CheckpointDiscarded(RuntimeError):
    """A damaged checkpoint was moved aside after restoring began; start a fresh Trainer."""


def discard_checkpoint(err: CorruptFileError) -> None:
    """Move a damaged checkpoint aside and warn, naming it: the run restarts from scratch."""
    if not is_main():  # data-parallel: rank 0 moves it; every rank restarts from scratch
        return
    moved = move_aside(err.path)
    warnings.warn(
        f"checkpoint {err.path} is damaged ({err.reason}); moved to {moved.name}, "
        "the run restarts from scratch",
        StoreWarning,
        stacklevel=3,
    )


class DivergenceError(RuntimeError):
    """The training loss became NaN or infinite."""


@dataclass
class Throughput:
    """Training images and seconds, timed with device synchronisation, warm-up excluded."""

    images: int = 0
    seconds: float = 0.0
    # Seconds spent capturing CUDA graphs: part of the wall-clock, never of ``seconds``.
    compile_seconds: float = 0.0
    # Seconds of iterations on a batch size new to the process (cuDNN autotunes its kernels
    # there: on a GPU the short last batch of the first epoch pays seconds for it). Part of
    # the wall-clock, never of ``seconds``; their images are not counted either.
    warmup_seconds: float = 0.0

    @property
    def images_per_s(self) -> float:
        """Images per second over the timed iterations (0 when nothing was timed)."""
        return self.images / self.seconds if self.seconds > 0 else 0.0


@dataclass
class TrainState:
    """Everything about progress that an epoch checkpoint must restore."""

    epoch: int = 0  # the next epoch to run
    history: list[dict[str, Any]] = field(default_factory=list)
    throughput: Throughput = field(default_factory=Throughput)
    wall_seconds: float = 0.0
    finalized: bool = False
    pre_finetune: dict[str, Any] | None = None
    # Wall-clock of every epoch (training, evaluation, checkpoint): the first one also pays
    # one-time costs (cuDNN autotuning, the first captures), so projections can set it apart.
    # An epoch's checkpoint holds its time before that checkpoint's own write.
    epoch_seconds: list[float] = field(default_factory=list)
    # Where each epoch's wall-clock went (EPOCH_PHASES; "capture" and "warmup" are part of
    # "train"; "method" is the method's epoch-boundary hooks: its prunes and what they
    # measure); an epoch written by a checkpoint lacks only its own "checkpoint" entry.
    epoch_phases: list[dict[str, float]] = field(default_factory=list)
    # The array model the run trained in (benchmark.training.array): its slots, layout and
    # every run that stepped beside it, merged over resumes; None for a run trained alone.
    array: dict[str, Any] | None = None


def train_state_from_plain(data: dict[str, Any]) -> TrainState:
    """The TrainState saved as a plain dict (checkpoints hold no pickled classes)."""
    data = dict(data)
    data["throughput"] = Throughput(**data["throughput"])
    return TrainState(**data)


def numpy_rng_to_plain(state: tuple[Any, ...]) -> list[Any]:
    """NumPy's legacy RNG state with its key array as a tensor (loadable with weights_only)."""
    name, keys, pos, has_gauss, cached = state
    return [name, torch.from_numpy(np.asarray(keys, dtype=np.int64)), pos, has_gauss, cached]


def numpy_rng_from_plain(state: list[Any]) -> tuple[Any, ...]:
    """The inverse of :func:`numpy_rng_to_plain`."""
    name, keys, pos, has_gauss, cached = state
    return (name, keys.cpu().numpy().astype(np.uint32), int(pos), int(has_gauss), float(cached))


def own_storage(obj: Any) -> Any:
    """``obj`` (a state dict, nested in dicts and lists) with every tensor that is a view into
    a larger storage replaced by a copy of its own, so that a saved checkpoint holds the run's
    tensors, not the storage they are views of (an array's ``[K, D]`` parameters)."""
    if isinstance(obj, torch.Tensor):
        needed = obj.numel() * obj.element_size()
        return obj.clone() if obj.untyped_storage().nbytes() > needed else obj
    if isinstance(obj, dict):
        return {key: own_storage(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [own_storage(value) for value in obj]
    return obj
