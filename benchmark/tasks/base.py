"""The Task interface and its registry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import Tensor, nn

from benchmark.core.registry import Registry

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig
    from benchmark.data.base import DataSource


class Task:
    """How one kind of problem is trained and scored; subclasses fill in the hooks."""

    name: ClassVar[str] = ""
    # The headline metric: a key of the evaluation dict, higher is better.
    metric: ClassVar[str] = "top1"
    # Its printed name (table headers and captions) and the factor to its printed unit.
    metric_label: ClassVar[str] = "Acc."
    metric_scale: ClassVar[float] = 100.0
    # What a batch ``(inputs, targets)`` holds, for the documentation and error messages.
    batch: ClassVar[str] = ""
    # Module-name patterns (fnmatch) that are not prunable unless the user says otherwise.
    default_exclude: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg

    def loss(self, model: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
        """The mean training loss of one batch (called under the run's autocast)."""
        raise NotImplementedError

    def evaluate(self, model: nn.Module, data: DataSource, split: str) -> dict[str, float]:
        """Metrics of ``model`` on ``split`` of ``data`` (eval mode, no gradients)."""
        raise NotImplementedError

    def autocast_dtype(self) -> torch.dtype | None:
        """The precision training runs under autocast in (None: none): ``optim.bf16`` /
        ``optim.fp16``."""
        from benchmark.core.precision import autocast_dtype

        return autocast_dtype(self.cfg.optim.precision())

    def example_inputs(self, data: DataSource) -> Tensor | Mapping[str, Tensor]:
        """The model inputs the theoretical speedup is counted on (one test batch)."""
        return data.example_batch()

    def speedup(self, model: nn.Module, data: DataSource) -> dict[str, float]:
        """Dense/sparse MAC counts and theoretical speedup on :meth:`example_inputs`."""
        from benchmark.measure.metrics import theoretical_speedup

        return theoretical_speedup(model, self.example_inputs(data))

    def prunable(self, model: nn.Module, exclude: Sequence[str]) -> list[tuple[str, nn.Parameter]]:
        """The prunable set P: conv/linear weights minus the task's and the user's exclusions."""
        from benchmark.pruning import prunable_parameters

        return prunable_parameters(model, [*self.default_exclude, *exclude])

    def describe(self) -> dict[str, Any]:
        """A short summary of the task (name, metric, batch layout)."""
        return {"task": self.name, "metric": self.metric, "batch": self.batch}


TASKS: Registry[type[Task]] = Registry("task")


def get_task(name: str, cfg: RunConfig) -> Task:
    """The registered task ``name`` for run ``cfg``."""
    return TASKS.get(name, "task")(cfg)
