"""The results store: one JSON file per run, its checkpoint and final weights, written atomically.

Writes of records are serialised by a lock file (``<store>/.locks/store.lock``): a finished
result that is replaced (``--force``) is first linked into ``archive/`` under a unique name and
only then replaced atomically, so concurrent forced reruns and a failing final write lose nothing.
A record that cannot be read is reported by its path and skipped, never stopping the rest; one
that is about to be overwritten is moved to ``archive/`` first.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.core.files import TMP_SUFFIX, tmp_prefix, unique_stamp, write_json_atomic
from benchmark.store.errors import CorruptRecord, ResultExistsError, RunLockedError, StoreWarning

FINISHED = "finished"


FAILED = "failed"


LOCK_DIR = ".locks"


class Store:
    """A folder of run results (``<run_id>.json``), checkpoints and final weights."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def result_path(self, run_id: str) -> Path:
        """Where the result JSON of ``run_id`` lives."""
        return self.root / f"{run_id}.json"

    def checkpoint_path(self, run_id: str) -> Path:
        """Where the last epoch checkpoint of ``run_id`` lives."""
        return self.root / "checkpoints" / f"{run_id}.pt"

    def weights_path(self, run_id: str) -> Path:
        """Where the final weights of ``run_id`` live (dense parents are loaded from here)."""
        return self.root / "weights" / f"{run_id}.pt"

    def archive_dir(self) -> Path:
        """Where replaced finished results and damaged records are kept."""
        return self.root / "archive"

    # ------------------------------------------------------------------ reading
    def read(self, run_id: str) -> dict[str, Any] | None:
        """The stored record of ``run_id``; None when it has none or it is unreadable (warned)."""
        path = self.result_path(run_id)
        try:
            return read_record(path)
        except FileNotFoundError:
            return None
        except (OSError, CorruptRecord) as err:
            _warn_unreadable(path, err)
            return None

    def status(self, run_id: str) -> str | None:
        """'finished', 'failed' or None (no readable record)."""
        record = self.read(run_id)
        return None if record is None else record.get("status")

    def is_finished(self, run_id: str) -> bool:
        """Whether ``run_id`` has a finished result."""
        return self.status(run_id) == FINISHED

    def records(self) -> list[dict[str, Any]]:
        """Every readable run record in the store (unreadable ones are named and skipped)."""
        if not self.root.exists():
            return []
        out = []
        for path in sorted(self.root.glob("*.json")):
            try:
                out.append(read_record(path))
            except FileNotFoundError:
                continue  # replaced or removed since the listing
            except (OSError, CorruptRecord) as err:
                _warn_unreadable(path, err)
        return out

    # ------------------------------------------------------------------ writing
    def write(self, record: dict[str, Any], *, force: bool = False) -> Path:
        """Atomically write a run record; a finished one is archived, never overwritten."""
        run_id = record["run_id"]
        path = self.result_path(run_id)
        with self.lock("store"):
            try:
                current: dict[str, Any] | None = read_record(path)
            except FileNotFoundError:
                current = None
            except (OSError, CorruptRecord) as err:
                moved = self._archive(path, ".corrupt")
                warnings.warn(
                    f"result {path} is unreadable ({err}); kept as {moved}", StoreWarning, 2
                )
                current = None
            if current is not None and current.get("status") == FINISHED:
                if not force:
                    raise ResultExistsError(f"run {run_id} has finished; use --force to rerun it")
                self._archive(path, "", keep=True)
            write_json_atomic(path, record)
        return path

    def update_metrics(self, run_id: str, metrics: dict[str, Any]) -> bool:
        """Merge ``metrics`` into a finished run's record, under the store lock (a concurrent
        ``--force`` rerun is never overwritten by the old record); False when not finished."""
        path = self.result_path(run_id)
        with self.lock("store"):
            try:
                record = read_record(path)
            except (OSError, CorruptRecord):
                return False
            if record.get("status") != FINISHED:
                return False
            record.setdefault("metrics", {}).update(metrics)
            write_json_atomic(path, record)
        return True

    def _archive(self, path: Path, tag: str, keep: bool = False) -> Path:
        """Put ``path`` into ``archive/`` under a unique name; ``keep`` leaves it in place too."""
        folder = self.archive_dir()
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{path.stem}-{unique_stamp()}{tag}.json"
        if not keep:
            os.replace(path, target)
            return target
        try:
            os.link(path, target)  # atomic: the archive is complete or absent
        except OSError:
            shutil.copy2(path, target)
        return target

    @contextlib.contextmanager
    def lock(self, name: str, *, wait: bool = True) -> Iterator[HeldLock]:
        """Hold ``<store>/.locks/<name>.lock`` (fcntl); ``wait=False`` raises RunLockedError.

        The yielded :class:`HeldLock` can ``discard()`` a lock file this call created: it is
        removed on release, while still held (a run refused for its configuration leaves no
        file). A lock whose file was removed by its previous holder is taken again on the file
        that is there now (a lock on a removed file would exclude nobody).
        """
        folder = self.root / LOCK_DIR
        made_folder = not folder.exists()
        path = folder / f"{name}.lock"
        while True:
            folder.mkdir(parents=True, exist_ok=True)  # again: a discarding holder removes it
            created = not path.exists()
            try:
                fh = open(path, "a")  # noqa: SIM115 (closed below, after the unlock)
            except FileNotFoundError:  # the folder was removed between the two lines
                continue
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                fh.close()
                raise RunLockedError(
                    f"{name} is already held by another process ({path})"
                ) from None
            if _same_file(fh, path):
                break
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()
        held = HeldLock(path, created)
        try:
            yield held
        finally:
            if held.discarded:
                path.unlink(missing_ok=True)
                if made_folder:
                    with contextlib.suppress(OSError):  # another lock file appeared meanwhile
                        folder.rmdir()
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()

    def clean_run_files(self, run_id: str) -> list[Path]:
        """Delete temporary files a killed write of ``run_id`` left; hold its run lock."""
        removed = []
        for target in (
            self.result_path(run_id),
            self.checkpoint_path(run_id),
            self.weights_path(run_id),
        ):
            if not target.parent.exists():
                continue
            for tmp in target.parent.glob(f"{tmp_prefix(target)}*{TMP_SUFFIX}"):
                tmp.unlink(missing_ok=True)
                removed.append(tmp)
        return removed


class HeldLock:
    """A lock :meth:`Store.lock` holds: its file, and whether that call created it."""

    def __init__(self, path: Path, created: bool) -> None:
        self.path = path
        self.created = created
        self.discarded = False

    def discard(self) -> None:
        """Remove the lock file on release if this lock created it (nothing else is left)."""
        self.discarded = self.created


def _same_file(fh: Any, path: Path) -> bool:
    """Whether the open ``fh`` is still the file at ``path`` (not removed or replaced)."""
    try:
        return os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def read_record(path: Path) -> dict[str, Any]:
    """One result JSON; raises CorruptRecord unless it is an object with a run id."""
    text = path.read_bytes()
    try:
        record = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise CorruptRecord(f"not valid JSON: {err}") from None
    if not isinstance(record, dict) or not isinstance(record.get("run_id"), str):
        raise CorruptRecord("not a run record (a JSON object with a run_id)")
    return record


def _warn_unreadable(path: Path, err: Exception) -> None:
    warnings.warn(f"skipping unreadable result {path}: {err}", StoreWarning, stacklevel=3)
