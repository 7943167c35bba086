"""Submission records, ``<store>/grids/<grid>.json``: which job each run was last submitted in."""

from __future__ import annotations

import contextlib
import json
import socket
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.core.errors import CorruptFileError
from benchmark.core.files import move_aside, read_regular, write_json_atomic
from benchmark.store.errors import CorruptRecord, StoreWarning
from benchmark.store.locking import hold, lock_path
from benchmark.store.records import MAX_RECORD_BYTES

RECORD_DIR = "grids"
RECORD_VERSION = 1


@dataclass(frozen=True)
class JobRef:
    """Where a run was last submitted."""

    job_id: str
    executor: str
    submitted: float
    folder: str
    host: str
    grid: str


def records_dir(store: Path) -> Path:
    """The folder of submission records and submitit job folders."""
    return Path(store) / RECORD_DIR


class SubmissionRecord:
    """``<store>/grids/<grid>.json``: the jobs each submit call created for one grid.

    Each submission lists its job ids and, for each job, the run ids it holds; a run's current job
    is its latest submission. Submissions whose runs all moved on to later ones are dropped, so the
    record stays small.
    """

    def __init__(self, path: Path, grid: str, file: str | None = None) -> None:
        self.path = path
        self.grid = grid
        self.file = file
        self.submissions: list[dict[str, Any]] = []

    @classmethod
    def load(cls, path: Path) -> SubmissionRecord:
        """Read a record (an empty one if the file does not exist); raises CorruptRecord."""
        record = cls(path, path.stem)
        if not path.exists():
            return record
        try:
            data = json.loads(read_regular(path, MAX_RECORD_BYTES))
        except CorruptFileError as err:
            raise CorruptRecord(str(err)) from None
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
            raise CorruptRecord(f"{path}: not valid JSON ({err})") from None
        if not isinstance(data, dict) or not _valid_submissions(data.get("submissions", [])):
            raise CorruptRecord(f"{path}: not a submission record")
        record.grid = str(data.get("grid", path.stem))
        file = data.get("file")
        record.file = file if isinstance(file, str) else None
        record.submissions = list(data.get("submissions", []))
        return record

    @classmethod
    def load_or_set_aside(cls, path: Path) -> SubmissionRecord:
        """:meth:`load`, but a damaged record is moved aside (warned) and a new one begun."""
        try:
            return cls.load(path)
        except CorruptRecord as err:
            moved = move_aside(path)
            warnings.warn(f"{err}; moved to {moved.name}", StoreWarning, stacklevel=2)
            return cls(path, path.stem)

    def add(
        self,
        executor: str,
        folder: Path,
        jobs: Sequence[str],
        tasks: Sequence[Sequence[str]],
        after: str | None = None,
    ) -> None:
        """Append one submission: ``jobs[i]`` runs the run ids ``tasks[i]``."""
        self.submissions.append(
            {
                "time": time.time(),
                "executor": executor,
                "host": socket.gethostname(),
                "folder": str(folder),
                "after": after,
                "jobs": list(jobs),
                "tasks": [list(t) for t in tasks],
            }
        )

    def latest(self) -> dict[str, JobRef]:
        """Each run's latest job."""
        out: dict[str, JobRef] = {}
        for sub in self.submissions:
            for job, runs in zip(sub["jobs"], sub["tasks"], strict=True):
                ref = JobRef(
                    job, sub["executor"], sub["time"], sub["folder"], sub["host"], self.grid
                )
                for rid in runs:
                    out[rid] = ref
        return out

    def save(self) -> None:
        """Atomically write the record, dropping superseded submissions."""
        current = {(ref.submitted, ref.job_id) for ref in self.latest().values()}
        self.submissions = [
            s for s in self.submissions if any((s["time"], j) in current for j in s["jobs"])
        ]
        write_json_atomic(
            self.path,
            {
                "version": RECORD_VERSION,
                "grid": self.grid,
                "file": self.file,
                "submissions": self.submissions,
            },
        )


def load_index(store: Path) -> dict[str, JobRef]:
    """Every run's latest job over all grids' records of ``store``."""
    index: dict[str, JobRef] = {}
    folder = records_dir(store)
    if not folder.exists():
        return index
    for path in sorted(folder.glob("*.json")):
        try:
            record = SubmissionRecord.load(path)
        except CorruptRecord as err:
            warnings.warn(f"skipping {err}", StoreWarning, stacklevel=2)
            continue
        for rid, ref in record.latest().items():
            if rid not in index or ref.submitted > index[rid].submitted:
                index[rid] = ref
    return index


_HELD_LOCKS: set[Path] = set()


@contextlib.contextmanager
def store_lock(store: Path) -> Iterator[None]:
    """Serialise submissions to one store (planning reads, submitting writes the records).

    A lock file (``grids/submit.lockfile``, :mod:`benchmark.store.locking`): it holds across
    the nodes of a shared filesystem, where flock may fail or be node-local. Re-entrant within a
    process: a second acquire of a held lock file would wait for itself.
    """
    folder = records_dir(store).resolve()
    if folder in _HELD_LOCKS:
        yield
        return
    with hold(lock_path(folder, "submit")):
        _HELD_LOCKS.add(folder)
        try:
            yield
        finally:
            _HELD_LOCKS.discard(folder)


def _valid_submissions(subs: Any) -> bool:
    """Whether ``subs`` has the shape :meth:`SubmissionRecord.add` writes."""
    if not isinstance(subs, list):
        return False
    for sub in subs:
        if not isinstance(sub, dict):
            return False
        jobs, tasks = sub.get("jobs"), sub.get("tasks")
        strings = (sub.get("executor"), sub.get("folder"), sub.get("host"))
        if not (
            all(isinstance(s, str) for s in strings)
            and isinstance(sub.get("time"), int | float)
            and isinstance(jobs, list)
            and isinstance(tasks, list)
            and len(jobs) == len(tasks)
            and all(isinstance(j, str) for j in jobs)
            and all(isinstance(r, list) and all(isinstance(x, str) for x in r) for r in tasks)
        ):
            return False
    return True
