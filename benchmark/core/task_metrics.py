"""The metrics each task's evaluation reports, by name and type, and its headline metric.

Tasks (:mod:`benchmark.tasks`) evaluate to these names; the store (:mod:`benchmark.store.records`)
checks every record's ``metrics.val`` and ``metrics.test`` against them, so that a value of the
wrong type (a string, a boolean, a list), a non-finite one or a missing headline metric is named
with its record and field instead of reaching a table. The declaration lives here, below both,
because the store reads records without importing the tasks (or torch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# A metric's value in a record: a finite number (an int or a float, never a boolean), or null
# where it was not finite when it was measured (e.g. the perplexity of a diverged model).
NUMBER = float


@dataclass(frozen=True)
class TaskMetrics:
    """What one task's evaluation dict holds: ``types`` (name -> type) and the ``headline``
    metric (higher is better; every finished record has it, in each section it has)."""

    headline: str
    types: Mapping[str, type] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.headline in self.types, self.headline


def _declare(headline: str, *names: str) -> TaskMetrics:
    return TaskMetrics(headline, MappingProxyType(dict.fromkeys(names, NUMBER)))


# Every task reports "loss" and "top1" (per example, pixel or token) and its headline metric.
TASK_METRICS: Mapping[str, TaskMetrics] = MappingProxyType(
    {
        # top5 only for datasets of at least 100 classes.
        "classification": _declare("top1", "loss", "top1", "top5"),
        "causal_lm": _declare("neg_ppl", "loss", "top1", "ppl", "neg_ppl"),
        "segmentation": _declare("miou", "loss", "top1", "miou"),
        # bleu on the validation and test splits (not the training split).
        "translation": _declare("bleu", "loss", "top1", "bleu"),
    }
)
DEFAULT_TASK = "classification"
# Every name any task declares: checked in every record, whatever its task.
ALL_METRICS: tuple[str, ...] = tuple(
    dict.fromkeys(name for spec in TASK_METRICS.values() for name in spec.types)
)


def infer_task(sections: Mapping[str, Any]) -> str:
    """The task of a record that does not name one (written before records did), from the
    metrics only one task reports (``neg_ppl``, ``miou``, ...) in its ``sections`` (val, test)."""
    shared = TASK_METRICS[DEFAULT_TASK].types
    for task, spec in TASK_METRICS.items():
        own = [name for name in spec.types if name not in shared]
        if any(isinstance(s, Mapping) and name in s for s in sections.values() for name in own):
            return task
    return DEFAULT_TASK
