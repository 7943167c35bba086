"""Files a killed write left in a store: staged records and weights, and temporary files.

The final write of a run stages its record and weights completely under unique names beside
their targets (``.<run id>.json.<token>.staged``, ``weights/.<run id>.pt.<token>.staged``) and
every atomic write goes through a temporary file (``.<name>.<random>.tmp``, see
:mod:`benchmark.core.files`). A kill in between leaves them behind. :func:`find_leftovers` finds
them by those names (``prunebench status`` names them); :func:`clean_leftovers` removes those
whose run has no live owner (``prunebench free``), and never deletes a complete result: a staged
record goes to ``archive/`` (with its staged weights), and staged weights of a finished run that
has none in place, or of a run whose record cannot be read, stay where they are.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmark.core.files import TMP_SUFFIX
from benchmark.store.errors import RunLockedError
from benchmark.store.locking import lock_path
from benchmark.store.results import FINISHED, LOCK_DIR, STAGED_SUFFIX, Store

# ``.<run id>.<json|pt>.`` then a token: the names that staging and atomic writes give.
_NAME = re.compile(r"^\.+(?P<run_id>[^./][^/]*?)\.(?P<ext>json|pt)\.")
_KINDS = {"json": "record", "pt": "weights"}


@dataclass(frozen=True)
class Leftover:
    """One staged or temporary file of a run's write."""

    path: Path
    run_id: str
    kind: str  # "record", "weights" or "checkpoint"
    staged: bool  # a complete staged file (else a partial temporary one)
    age_s: float

    def describe(self) -> str:
        """``path (staged record of RUN, 12 min old)``."""
        what = f"{'staged' if self.staged else 'partial'} {self.kind}"
        return f"{self.path} ({what} of {self.run_id}, {_age(self.age_s)} old)"


def find_leftovers(store: Store, run_ids: Iterable[str] | None = None) -> list[Leftover]:
    """Every staged or temporary file of a run's record, checkpoint or weights in ``store``
    (only of ``run_ids`` when given), oldest first."""
    wanted = None if run_ids is None else set(run_ids)
    folders = {
        store.root: "record",
        store.weights_path("x").parent: "weights",
        store.checkpoint_path("x").parent: "checkpoint",
    }
    now = time.time()
    out = []
    for folder, kind in folders.items():
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            if not (name.endswith(STAGED_SUFFIX) or name.endswith(TMP_SUFFIX)):
                continue
            match = _NAME.match(name)
            if match is None or (wanted is not None and match["run_id"] not in wanted):
                continue
            path = folder / name
            try:
                age = now - path.lstat().st_mtime
            except FileNotFoundError:
                continue
            found_kind = _KINDS[match["ext"]] if kind != "checkpoint" else kind
            staged = name.endswith(STAGED_SUFFIX)
            out.append(Leftover(path, match["run_id"], found_kind, staged, age))
    return sorted(out, key=lambda x: -x.age_s)


def owner_state(store: Store, run_id: str) -> str:
    """Whether a process holds the run's lock (its file exists; it may be stale)."""
    held = lock_path(store.root / LOCK_DIR, f"run-{run_id}").exists()
    return "its run's lock is held" if held else "no process holds its run"


def clean_leftovers(store: Store, found: Iterable[Leftover]) -> list[str]:
    """Remove ``found`` of runs whose lock is free (no live owner: a stale lock is recovered);
    returns one line per file: what became of it. Runs that are running keep theirs.

    Each run is cleaned under its run lock and the store lock: every writer of a run's files
    holds the first, every writer of a record (``latency``'s metrics too) the second.
    """
    by_run: dict[str, list[Leftover]] = {}
    for item in found:
        by_run.setdefault(item.run_id, []).append(item)
    done: list[str] = []
    for run_id, items in by_run.items():
        try:
            with store.lock(f"run-{run_id}", wait=False), store.lock("store"):
                done += _clean_run(store, run_id, items)
        except RunLockedError:
            done += [f"kept {i.path}: its run is running" for i in items]
    return done


def _clean_run(store: Store, run_id: str, items: list[Leftover]) -> list[str]:
    """Clean one run's leftovers; its lock is held."""
    done = []
    partial = [i for i in items if not i.staged]
    records = [i for i in items if i.staged and i.kind == "record"]
    weights = [i for i in items if i.staged and i.kind == "weights"]
    for item in partial:
        item.path.unlink(missing_ok=True)  # an unfinished write: nothing complete in it
        done.append(f"deleted {item.path}")
    for item in records:
        kept = store._keep_second(item.path, run_id, "has a result its killed writer staged")
        done.append(f"archived {item.path} as {kept}")
        if len(records) == 1 and len(weights) == 1:
            # The record's own weights (one of each: nothing else they could belong to).
            os.replace(weights[0].path, kept.with_suffix(".pt"))
            done.append(f"archived {weights[0].path} as {kept.with_suffix('.pt')}")
            weights = []
    record = store.read(run_id)
    finished = record is not None and record.get("status") == FINISHED
    unreadable = record is None and store.result_path(run_id).exists()
    for item in weights:
        if unreadable:
            done.append(f"kept {item.path}: the record of run {run_id} cannot be read")
            continue
        if finished and not store.weights_path(run_id).exists():
            # Possibly the only copy of the finished result's weights: never deleted here.
            done.append(f"kept {item.path}: run {run_id} is finished without weights in place")
            continue
        item.path.unlink(missing_ok=True)
        done.append(f"deleted {item.path}")
    return done


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
