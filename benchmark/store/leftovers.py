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
import stat
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmark.core.errors import CorruptFileError
from benchmark.core.files import TMP_SUFFIX
from benchmark.store.errors import RunLockedError, StoreWarning
from benchmark.store.results import (
    FINISHED,
    STAGED_SUFFIX,
    Store,
    same_file,
    staged_path,
    staged_token,
)

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
                info = path.lstat()
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(info.st_mode):  # not a file a write made: never touched
                warnings.warn(f"{path} is not a regular file: left alone", StoreWarning, 2)
                continue
            age = now - info.st_mtime
            found_kind = _KINDS[match["ext"]] if kind != "checkpoint" else kind
            staged = name.endswith(STAGED_SUFFIX)
            out.append(Leftover(path, match["run_id"], found_kind, staged, age))
    return sorted(out, key=lambda x: -x.age_s)


def owner_state(store: Store, run_id: str) -> str:
    """Whether a live process holds the run's lock."""
    held = store.lock_held(f"run-{run_id}")
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
        except CorruptFileError as err:  # a lock name that is not a lock file: never read
            done += [f"kept {i.path}: {err}" for i in items]
    return done


def _clean_run(store: Store, run_id: str, items: list[Leftover]) -> list[str]:
    """Clean one run's leftovers; its run lock and the store lock are held, so no writer of
    the run is between two steps now (a file listed before may be gone: its writer finished)."""
    done = []
    items = [i for i in items if i.path.exists()]
    result, weights_target = store.result_path(run_id), store.weights_path(run_id)
    lone = {i.path for i in items if i.staged and i.kind == "weights"}
    for item in items:
        if not item.staged:
            item.path.unlink(missing_ok=True)  # an unfinished write: nothing complete in it
            done.append(f"deleted {item.path}")
        elif item.kind == "record" and same_file(item.path, result):
            item.path.unlink(missing_ok=True)  # killed between publishing it and the unlink
            done.append(f"deleted {item.path}: a second name of {result}")
        elif item.kind == "record":
            # A result and its weights are staged under one token (Store.write_result).
            own = staged_path(weights_target, staged_token(item.path, result))
            paired = own if own in lone and own.exists() else None
            lone.discard(own)
            why = "has a result its killed writer staged"
            kept = store._keep_second(item.path, run_id, why, weights=paired)
            done.append(f"archived {item.path} as {kept}")
            if paired is not None:
                done.append(f"archived {paired} as {kept.with_suffix('.pt')}")
    record = store.read(run_id)
    finished = record is not None and record.get("status") == FINISHED
    unreadable = record is None and result.exists()
    for path in sorted(p for p in lone if p.exists()):
        if same_file(path, weights_target):
            path.unlink(missing_ok=True)  # killed after the weights went into place
            done.append(f"deleted {path}: a second name of {weights_target}")
        elif unreadable:
            done.append(f"kept {path}: the record of run {run_id} cannot be read")
        elif finished and not weights_target.exists():
            # Possibly the only copy of the finished result's weights: never deleted here.
            done.append(f"kept {path}: run {run_id} is finished without weights in place")
        else:  # no staged or published record names them: the run trains again
            path.unlink(missing_ok=True)
            done.append(f"deleted {path}")
    return done


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
