"""The results store: one JSON file per run, its checkpoint and final weights, written atomically.

Writes of records take the store's lock file (``<store>/.locks/store.lockfile``, see
:mod:`benchmark.store.locking`: no flock, so it holds on shared filesystems), but do not rely on
it: a record is staged whole and becomes the result by an atomic link (see
:mod:`benchmark.store.publish`). A finished result that is replaced (``--force``) goes to
``archive/`` under a unique name; one that comes second (another process finished the same run
first) goes there too, with its weights; so concurrent reruns and a failing final write lose
nothing. A record that cannot be read is reported by its path and skipped, never stopping the
rest; one that is about to be overwritten is moved to ``archive/`` first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.core.files import (
    TMP_SUFFIX,
    save_weights,
    tmp_prefix,
    unique_stamp,
    write_json_atomic,
)
from benchmark.store.errors import (  # noqa: F401 (RunLockedError: re-exported for callers)
    CorruptRecord,
    ResultExistsError,
    RunLockedError,
    StoreWarning,
)
from benchmark.store.locking import hold, lock_path
from benchmark.store.publish import ANY_RESULT, publish
from benchmark.store.records import Skipped, read_record

FINISHED = "finished"


FAILED = "failed"


LOCK_DIR = ".locks"


# Complete files waiting to become a run's record or weights (never removed as temporary).
STAGED_SUFFIX = ".staged"


class Store:
    """A folder of run results (``<run_id>.json``), checkpoints and final weights."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        # The records this store's reads skipped (named in warnings too), for commands to count.
        self.skipped: dict[Path, Skipped] = {}

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
            return read_record(path, run_id)
        except FileNotFoundError:
            return None
        except (OSError, CorruptRecord) as err:
            self._skip(path, err)
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
                out.append(read_record(path, path.name.removesuffix(".json")))
            except FileNotFoundError:
                continue  # replaced or removed since the listing
            except (OSError, CorruptRecord) as err:
                self._skip(path, err)
        return out

    def _skip(self, path: Path, err: Exception) -> None:
        """Name a record no command can use (a warning) and remember it for their counts."""
        self.skipped[path] = Skipped(path, str(err))
        warnings.warn(f"skipping unreadable result {path}: {err}", StoreWarning, stacklevel=3)

    # ------------------------------------------------------------------ writing
    def write(
        self,
        record: dict[str, Any],
        *,
        force: bool = False,
        replaces: dict[str, Any] | None = ANY_RESULT,
    ) -> Path:
        """Atomically write a run record; a finished one is archived, never overwritten.

        Without ``force`` a finished result stays and ResultExistsError is raised. With
        ``force`` the finished result is moved to ``archive/`` first; ``replaces`` (the record
        the rerun started from, None for none) makes a rerun that finishes second keep the first
        one's result: its own goes to the archive (warned), and that path is returned. Safe
        without the lock too (:mod:`benchmark.store.publish`).
        """
        run_id = record["run_id"]
        with self.lock("store"):
            staged = self._stage(self.result_path(run_id), record)
            if self._publish(staged, record, force=force, replaces=replaces):
                return self.result_path(run_id)
            if not force:
                staged.unlink(missing_ok=True)
                raise ResultExistsError(f"run {run_id} has finished; use --force to rerun it")
            return self._keep_second(staged, run_id)

    def write_result(
        self,
        record: dict[str, Any],
        weights: dict[str, Any],
        *,
        force: bool = False,
        replaces: dict[str, Any] | None = ANY_RESULT,
    ) -> Path:
        """Write a finished run's record and final weights (compact: see
        :func:`benchmark.core.files.save_weights`); returns where the record went.

        Both are staged completely first. The first finished result of a run wins: a result
        that loses (another process finished the run meanwhile, or, with ``replaces`` the record
        the rerun started from, a forced rerun finished first) is archived with its weights
        (``archive/<run>-<stamp>.json`` and ``.pt``) and warned, never lost. Safe without the
        lock too.
        """
        run_id = record["run_id"]
        target = self.weights_path(run_id)
        staged_weights = target.with_name(f".{target.name}.{uuid.uuid4().hex}{STAGED_SUFFIX}")
        save_weights(weights, staged_weights)
        try:
            with self.lock("store"):
                staged = self._stage(self.result_path(run_id), record)
                if self._publish(staged, record, force=force, replaces=replaces):
                    # The record wins first, then its weights: never another result's weights
                    # under this run's name. Children that find them missing wait for the lock.
                    os.replace(staged_weights, target)
                    return self.result_path(run_id)
                kept = self._keep_second(staged, run_id)
                os.replace(staged_weights, kept.with_suffix(".pt"))
                return kept
        finally:
            staged_weights.unlink(missing_ok=True)

    def _stage(self, path: Path, record: dict[str, Any]) -> Path:
        """``record`` written completely under a unique name beside ``path``."""
        staged = path.with_name(f".{path.name}.{uuid.uuid4().hex}{STAGED_SUFFIX}")
        write_json_atomic(staged, record)
        return staged

    def _publish(
        self,
        staged: Path,
        record: dict[str, Any],
        *,
        force: bool,
        replaces: dict[str, Any] | None,
    ) -> bool:
        return publish(
            staged,
            self.result_path(record["run_id"]),
            record,
            force=force,
            replaces=replaces,
            read=self._read_or_none,
            set_aside=self._set_aside,
        )

    def _read_or_none(self, path: Path) -> dict[str, Any] | None:
        try:
            return read_record(path)
        except FileNotFoundError:
            raise
        except (OSError, CorruptRecord):
            return None

    def _set_aside(self, path: Path, current: dict[str, Any] | None) -> Path | None:
        """Rename the result at ``path`` into the archive; None if it is gone already."""
        try:
            moved = self._archive(path, ".corrupt" if current is None else "")
        except FileNotFoundError:
            return None
        if current is None:
            warnings.warn(f"result {path} is unreadable; kept as {moved}", StoreWarning, 4)
        return moved

    def _keep_second(
        self, staged: Path, run_id: str, why: str = "was finished by another process first"
    ) -> Path:
        """Archive a staged result that did not become the run's; returns its archive path."""
        folder = self.archive_dir()
        folder.mkdir(parents=True, exist_ok=True)
        kept = folder / f"{run_id}-{unique_stamp()}.json"
        os.replace(staged, kept)
        warnings.warn(f"run {run_id} {why}; this result is kept as {kept}", StoreWarning, 3)
        return kept

    def update_metrics(self, run_id: str, metrics: dict[str, Any]) -> bool:
        """Merge ``metrics`` into a finished run's record, under the store lock (a concurrent
        ``--force`` rerun is never overwritten by the old record); False when not finished."""
        path = self.result_path(run_id)
        with self.lock("store"):
            try:
                record = read_record(path, run_id)
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
        """Hold the lock file ``<store>/.locks/<name>.lockfile`` (no flock: see
        :mod:`benchmark.store.locking`); ``wait=False`` raises RunLockedError naming the owner.

        The lock file exists only while the lock is held. The yielded :class:`HeldLock` can
        ``discard()`` the lock folder this call created: it is removed on release when empty (a
        run refused for its configuration leaves nothing behind).
        """
        folder = self.root / LOCK_DIR
        held = HeldLock(lock_path(folder, name), created=not folder.exists())
        with hold(held.path, wait=wait):
            yield held
        if held.discarded:
            with contextlib.suppress(OSError):  # another lock (or a claim file) is there
                folder.rmdir()

    def clean_run_files(self, run_id: str, *, orphan_after_s: float = 600.0) -> list[Path]:
        """Delete temporary files a killed write of ``run_id`` left; hold its run lock.

        A staged record older than ``orphan_after_s`` (its writer was killed before it became
        the result) is a complete result: it goes to ``archive/``, never deleted.
        """
        removed = []
        for target in (
            self.result_path(run_id),
            self.checkpoint_path(run_id),
            self.weights_path(run_id),
        ):
            if not target.parent.exists():
                continue
            prefix = tmp_prefix(target)
            # Temporary files of the target and of its staged files (``..<name>.*.tmp``).
            for pattern in (f"{prefix}*{TMP_SUFFIX}", f".{prefix}*{TMP_SUFFIX}"):
                for tmp in target.parent.glob(pattern):
                    tmp.unlink(missing_ok=True)
                    removed.append(tmp)
            for staged in target.parent.glob(f"{prefix}*{STAGED_SUFFIX}"):
                try:
                    old = time.time() - staged.stat().st_mtime > orphan_after_s
                except FileNotFoundError:
                    continue
                if not old:
                    continue  # a writer may be publishing it right now
                if target.suffix == ".json":
                    self._keep_second(staged, run_id, "has a result its killed writer staged")
                else:
                    staged.unlink(missing_ok=True)
                removed.append(staged)
        return removed


class HeldLock:
    """A lock :meth:`Store.lock` holds: its file, and whether that call created the lock folder."""

    def __init__(self, path: Path, created: bool) -> None:
        self.path = path
        self.created = created
        self.discarded = False

    def discard(self) -> None:
        """Remove the lock folder on release if this lock created it and it is empty then."""
        self.discarded = self.created
