"""Reading one run record and checking its shape: what every command that reads a store trusts.

A store is shared and copied, so a ``<run id>.json`` may be anything: a FIFO or a link to a
device (reading would block or never end), a huge file, JSON that is not a record, a record
copied under another run's name (it would count as a second seed of that run), or a record
whose fields have types no command expects (``metrics = "oops"``, ``status = 5``, a ``top1``
of ``NaN``, a ``neg_ppl`` that is a string, a finished run without its task's headline metric:
every task's metrics are declared in :mod:`benchmark.core.task_metrics`). :func:`read_record`
reads only regular files up to :data:`MAX_RECORD_BYTES` and raises :class:`CorruptRecord`
naming the field and what it should be; the readers skip and name such a record
(:class:`Skipped`), and the commands count what they skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.core.errors import CorruptFileError, shorten
from benchmark.core.files import read_regular
from benchmark.core.task_metrics import ALL_METRICS, TASK_METRICS, infer_task
from benchmark.store.errors import CorruptRecord

# A record holds a config, metrics and a per-epoch history: ~100 kB for a 200-epoch run.
MAX_RECORD_BYTES = 16 * 2**20
STATUSES = ("finished", "failed")
# The sections of evaluation metrics: each holds its task's metrics (TASK_METRICS).
EVALUATED = ("val", "test")
# Metrics that tables, exports, costs and ``free`` read as numbers (absent or null allowed), on
# top of every task's evaluation metrics in each of EVALUATED.
NUMERIC_METRICS = (
    ("sparsity",),
    ("speedup",),
    ("speedup_corrected",),
    ("measured_speedup",),
    ("images_per_s",),
    ("wall_seconds",),
    ("compile_seconds",),
    ("warmup_seconds",),
    ("num_prunable",),
)
# Parts of a record that are objects when present (null allowed where a writer stores none).
OBJECTS = ("config", "metrics", "environment", "identity", "distributed")
OBJECT_METRICS = ("val", "test", "latency", "stability", "step")


@dataclass(frozen=True)
class Skipped:
    """A store file a command did not use, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path.name}: {self.reason}"


def skipped_line(skipped: Sequence[object], effect: str, shown: int = 5) -> str:
    """One line: how many unusable store files a command skipped (``effect``: what that meant
    for it), and the first ``shown`` of them with why."""
    names = "; ".join(str(s) for s in skipped[:shown])
    more = f"; ... ({len(skipped)} in all)" if len(skipped) > shown else ""
    return f"{len(skipped)} unusable store record(s) skipped, {effect}: {names}{more}"


def read_record(path: Path, run_id: str | None = None) -> dict[str, Any]:
    """The run record in ``path``; raises CorruptRecord when it is not a regular file of at most
    :data:`MAX_RECORD_BYTES`, not JSON, or not a record of the shape :func:`check_record` wants
    (``run_id``: the id its file name gives it; None for archived copies)."""
    try:
        text = read_regular(path, MAX_RECORD_BYTES)
    except CorruptFileError as err:
        raise CorruptRecord(err.reason) from None
    try:
        record = json.loads(text, parse_constant=_non_finite)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise CorruptRecord(f"not valid JSON: {err}") from None
    check_record(record, run_id)
    return record


def _non_finite(name: str) -> Any:
    # prunebench stores non-finite numbers as null; NaN/Infinity would print as numbers.
    raise CorruptRecord(f"holds {name}, not a number (prunebench stores non-finite values as null)")


def check_record(record: Any, run_id: str | None = None) -> None:
    """Raise CorruptRecord naming the first field of ``record`` whose type no reader expects."""
    if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
        raise CorruptRecord("not a run record (a JSON object with a run_id)")
    if run_id is not None and record["run_id"] != run_id:
        raise CorruptRecord(
            f"run_id is {shorten(repr(record['run_id']), 80)}, not {run_id!r} as its file "
            "name says (a copy of another run's record is not a run of its own)"
        )
    status = record.get("status")
    if status not in STATUSES:
        raise CorruptRecord(f"status = {_shown(status)}; allowed: {', '.join(STATUSES)}")
    for key in OBJECTS:
        _want(record, (key,), dict, "an object")
    for key in ("method", "error"):
        _want(record, (key,), str, "a string")
    _want(record, ("parent_run_id",), str, "a run id (a string) or null")
    for key in ("started", "finished"):
        _want(record, (key,), (int, float), "a number")
    config = record.get("config") or {}
    for section, value in config.items():
        if not isinstance(value, dict | int | float | str | bool) and value is not None:
            raise CorruptRecord(f"config.{section} = {_shown(value)}, not an object or a value")
    for section in ("method", "model", "data", "latency"):
        _want(config, (section,), dict, "an object", "config.")
    for section in ("method", "model", "data"):
        _want(config, (section, "name"), str, "a string", "config.")
    _want(config, ("seed",), int, "an integer", "config.")
    metrics = record.get("metrics") or {}
    for key in OBJECT_METRICS:
        _want(metrics, (key,), dict, "an object", "metrics.")
    for path in NUMERIC_METRICS:
        _want(metrics, path, (int, float), "a number or null", "metrics.")
    _check_task_metrics(record, metrics)


def _check_task_metrics(record: dict[str, Any], metrics: dict[str, Any]) -> None:
    """Every task's evaluation metrics are numbers or null; a finished record has its task's
    headline metric in each evaluated section it has (a table would silently lose the run)."""
    for section in EVALUATED:
        for name in ALL_METRICS:
            _want(metrics, (section, name), (int, float), "a number or null", "metrics.")
    task = record.get("task")
    if task is not None and task not in TASK_METRICS:
        raise CorruptRecord(f"task = {_shown(task)}; allowed: {', '.join(TASK_METRICS)}")
    if record.get("status") != "finished":
        return
    sections = {s: metrics[s] for s in EVALUATED if isinstance(metrics.get(s), dict)}
    task = task or infer_task(sections)
    headline = TASK_METRICS[task].headline
    for section, values in sections.items():
        if headline not in values:
            raise CorruptRecord(
                f"metrics.{section}.{headline} is missing: a finished {task} run has it"
            )


def _want(data: dict[str, Any], path: tuple[str, ...], kind: Any, what: str, at: str = "") -> None:
    """Raise CorruptRecord unless the value at ``path`` is absent, null or of type ``kind``
    (booleans are not numbers)."""
    value: Any = data
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return
        value = value[key]
    wrong = not isinstance(value, kind) or isinstance(value, bool)
    if value is not None and (wrong or (isinstance(value, float) and not math.isfinite(value))):
        raise CorruptRecord(f"{at}{'.'.join(path)} = {_shown(value)}, not {what}")


def _shown(value: Any) -> str:
    return f"{shorten(repr(value), 80)} ({type(value).__name__})"
