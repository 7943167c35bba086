"""The results store: one JSON file per run, its checkpoint and final weights, written atomically.

Writes of records take the store's lock file (``<store>/.locks/store.lockfile``, see
:mod:`benchmark.store.locking`: no flock, so it holds on shared filesystems), held only for a few
renames. A record is staged whole and becomes the result by an atomic link (see
:mod:`benchmark.store.publish`), after its weights are in place: a finished result always has its
weights, and an interruption at any step leaves the old state or the new one. A finished result
that is replaced (``--force``) goes to ``archive/`` under a unique name with its weights; one that
comes second (another process finished the same run first) goes there too, with its weights. A
record that cannot be read is reported by its path and skipped, never stopping the rest; one that
is about to be overwritten is moved to ``archive/`` first.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmark.core.files import (
    TMP_SUFFIX,
    make_dirs,
    save_weights,
    tmp_prefix,
    unique_stamp,
    write_json_atomic,
)
from benchmark.store.deferred import HeldSignals
from benchmark.store.errors import (  # noqa: F401 (RunLockedError: re-exported for callers)
    CorruptRecord,
    ResultExistsError,
    RunLockedError,
    StoreWarning,
)
from benchmark.store.locking import LockFile, hold, is_held, live_holder, lock_path
from benchmark.store.names import (  # noqa: F401 (same_file: for leftovers)
    SecondName,
    link_or_copy,
    link_over,
    same_file,
)
from benchmark.store.owners import Owner
from benchmark.store.publish import ANY_RESULT, claim, may_replace, publish, same_result
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
        staged = self._stage(self.result_path(run_id), record)  # before the lock: it stays short
        with self.lock("store"):
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

        Both are staged completely first, outside the store lock (which is then held only for a
        few renames). The weights take their place before the record does, so a result always
        has its weights, and an interruption at any step (a kill, Ctrl-C, ``SystemExit``) leaves
        either the old state or the new one; signals that stop a process are held back during
        the renames (:mod:`benchmark.store.deferred`); staged weights are never deleted while
        they are the only copy (see :meth:`clean_run_files`). The first finished result of a
        run wins: a result that loses (another process finished the run meanwhile, or, with
        ``replaces`` the record the rerun started from, a forced rerun finished first) is
        archived with its weights (``archive/<run>-<stamp>.json`` and ``.pt``) and warned; a
        result that ``force`` replaces goes to the archive with its weights too.
        """
        run_id = record["run_id"]
        token = uuid.uuid4().hex
        target = self.weights_path(run_id)
        staged_weights = staged_path(target, token)
        save_weights(weights, staged_weights)  # the weights first: a staged record has them
        staged = self._stage(self.result_path(run_id), record, token)
        # Second names made now, outside the lock and the held window: where the filesystem has
        # no hard links they are copies (~1 s for 512 MB), and the window holds renames only.
        new = SecondName.make(staged_weights, target)
        old = None
        if force:  # the weights of the result this may replace, for the archive
            with contextlib.suppress(FileNotFoundError):
                old = SecondName.make(target, target)
        held = HeldSignals()
        placed = None
        try:
            with self.lock("store"):
                held.hold()  # a Ctrl-C lands after the renames and the lock's release
                placed = self._place(staged, new, old, record, force=force, replaces=replaces)
        finally:
            try:
                # Only now, with the store lock released: a signal that ends the process finds
                # no lock of this write held (the run's own lock goes by the signal's handler).
                held.deliver()
            finally:
                # Out of the lock too: removing a copy frees its blocks (~40 ms for 150 MB).
                for name in (new, old):
                    if name is not None:
                        name.discard()
                if placed is not None:  # the staged weights are a second name now (or moved)
                    staged_weights.unlink(missing_ok=True)
        return placed

    def _place(
        self,
        staged: Path,
        new: SecondName,
        old: SecondName | None,
        record: dict[str, Any],
        *,
        force: bool,
        replaces: dict[str, Any] | None,
    ) -> Path:
        """Make the staged weights (``new``: their second name), then the staged record, the
        run's result (see write_result); ``old``: a second name of the weights in place, for
        the archive if a forced write replaces their result.

        Each step is one rename or link, and the state between two steps is a valid one: the
        old result (its weights perhaps in the archive already), no result (the run resumes from
        its checkpoint), or the new result with its weights.
        """
        run_id = record["run_id"]
        staged_weights = new.source
        while True:
            current = self._finished_result(run_id)
            if current is None:
                break
            if not may_replace(current, record, force=force, replaces=replaces):
                return self._keep_second(staged, run_id, weights=staged_weights)
            archived = self._archive_result(run_id, current, old)
            old = None  # used (or found stale) by that attempt
            if archived:
                break
        target = self.weights_path(run_id)
        # A rename: the staged name stays (a second name) until the record is in.
        if not new.move_to(target):
            link_over(staged_weights, target)
        placed = _identity(target)
        if not self._publish(staged, record, force=force, replaces=replaces):
            return self._keep_second(staged, run_id, weights=staged_weights)
        if _identity(target) != placed:
            # Without a lock, another writer's weights came in between: ours go in place (a
            # rename, so the staged name goes with it).
            os.replace(staged_weights, target)
        return self.result_path(run_id)  # the staged name goes after the lock's release

    def _finished_result(self, run_id: str) -> dict[str, Any] | None:
        """The run's finished result as it is now; None when it has none."""
        try:
            current = self._read_or_none(self.result_path(run_id), run_id)
        except FileNotFoundError:
            return None
        return current if current is not None and current.get("status") == FINISHED else None

    def _archive_result(
        self, run_id: str, current: dict[str, Any], old: SecondName | None = None
    ) -> bool:
        """Move the finished result ``current`` with its weights into the archive: the weights
        are named there first (by ``old``, a second name made before, if they are still those;
        they stay in place until replaced), then the record is moved. False when the result
        changed meanwhile (possible only without the lock): look again."""
        folder, name = self.archive_dir(), f"{run_id}-{unique_stamp()}"
        make_dirs(folder)
        weights, moved = folder / f"{name}.pt", folder / f"{name}.json"
        with contextlib.suppress(FileNotFoundError):
            if old is None or not old.move_to(weights):
                link_or_copy(self.weights_path(run_id), weights)
        try:
            os.replace(self.result_path(run_id), moved)
        except FileNotFoundError:
            weights.unlink(missing_ok=True)
            return False
        with contextlib.suppress(FileNotFoundError):
            taken = self._read_or_none(moved, run_id)
            if taken is not None and same_result(taken, current):
                return True
        # Another writer's result arrived between our look and the rename: it goes back.
        weights.unlink(missing_ok=True)
        claim(moved, self.result_path(run_id))
        return False

    def _stage(self, path: Path, record: dict[str, Any], token: str | None = None) -> Path:
        """``record`` written completely under a unique name beside ``path``."""
        staged = staged_path(path, token or uuid.uuid4().hex)
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
            read=lambda path: self._read_or_none(path, record["run_id"]),
            set_aside=self._set_aside,
        )

    def _read_or_none(self, path: Path, run_id: str | None = None) -> dict[str, Any] | None:
        """The record at ``path``; None when it is damaged. With ``run_id`` it must carry that
        id (as :meth:`read` demands): a copy of another run's record is damaged, set aside, never
        taken for this run's result."""
        try:
            return read_record(path, run_id)
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
        self,
        staged: Path,
        run_id: str,
        why: str = "was finished by another process first",
        *,
        weights: Path | None = None,
    ) -> Path:
        """Archive a staged result that did not become the run's, its staged ``weights`` first
        (moved beside it as ``.pt``); returns the record's archive path."""
        folder = self.archive_dir()
        make_dirs(folder)
        kept = folder / f"{run_id}-{unique_stamp()}.json"
        if weights is not None:
            with contextlib.suppress(FileNotFoundError):
                os.replace(weights, kept.with_suffix(".pt"))
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
        make_dirs(folder)
        target = folder / f"{path.stem}-{unique_stamp()}{tag}.json"
        if not keep:
            os.replace(path, target)
            return target
        link_or_copy(path, target)  # atomic: the archive is complete or absent
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

    def check_lock(self, name: str) -> None:
        """Raise CorruptFileError if the lock ``name`` cannot be taken because its name is not a
        lock file (a FIFO, a device: never read), so that a run finds out before training."""
        LockFile(lock_path(self.root / LOCK_DIR, name))._inspect()

    def lock_held(self, name: str) -> bool:
        """Whether the lock ``name`` is held now by a live owner (see :meth:`lock`)."""
        return is_held(lock_path(self.root / LOCK_DIR, name))

    def lock_holder(self, name: str) -> Owner | None:
        """Who holds the lock ``name`` now (a live owner), or None."""
        return live_holder(lock_path(self.root / LOCK_DIR, name))

    def clean_run_files(self, run_id: str, *, orphan_after_s: float = 600.0) -> list[Path]:
        """Tidy what a killed write of ``run_id`` left; hold its run lock. Returns what went.

        Temporary files go. A staged record older than ``orphan_after_s`` (its writer was killed
        before it became the result) is a complete result: it goes to ``archive/`` with its
        staged weights, never deleted. Other staged weights are deleted only when they are a
        second name of the run's weights (the writer was killed after publishing), never when
        they may be the only copy: then they are archived too.
        """
        removed = []
        result, weights = self.result_path(run_id), self.weights_path(run_id)
        for target in (result, self.checkpoint_path(run_id), weights):
            if not target.parent.exists():
                continue
            prefix = tmp_prefix(target)
            # Temporary files of the target and of its staged files (``..<name>.*.tmp``).
            for pattern in (f"{prefix}*{TMP_SUFFIX}", f".{prefix}*{TMP_SUFFIX}"):
                for tmp in target.parent.glob(pattern):
                    tmp.unlink(missing_ok=True)
                    removed.append(tmp)
        for staged in _orphans(result, orphan_after_s):
            if same_file(staged, result):
                staged.unlink(missing_ok=True)  # killed between the link and the unlink
            else:
                its_weights = staged_path(weights, staged_token(staged, result))
                why = "has a result its killed writer staged"
                self._keep_second(staged, run_id, why, weights=its_weights)
            removed.append(staged)
        for staged in _orphans(weights, orphan_after_s):
            if not staged_path(result, staged_token(staged, weights)).exists():
                if same_file(staged, weights):
                    staged.unlink(missing_ok=True)
                else:  # perhaps the only copy of a result's weights: kept
                    kept = self.archive_dir() / f"{run_id}-{unique_stamp()}.pt"
                    make_dirs(kept.parent)
                    os.replace(staged, kept)
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


def staged_path(target: Path, token: str) -> Path:
    """The name under which a write stages ``target`` (``.<name>.<token>.staged``); a result's
    record and weights are staged with the same token."""
    return target.with_name(f".{target.name}.{token}{STAGED_SUFFIX}")


def staged_token(staged: Path, target: Path) -> str:
    """The token of a :func:`staged_path` of ``target``."""
    return staged.name[len(f".{target.name}.") : -len(STAGED_SUFFIX)]


def _orphans(target: Path, older_than_s: float) -> list[Path]:
    """Staged files of ``target`` older than ``older_than_s`` (their writer is gone)."""
    if not target.parent.exists():
        return []
    found = []
    for staged in target.parent.glob(f"{tmp_prefix(target)}*{STAGED_SUFFIX}"):
        try:
            info = staged.lstat()
        except FileNotFoundError:
            continue
        # Only regular files are what a write staged (anything else is never moved or read).
        if stat.S_ISREG(info.st_mode) and time.time() - info.st_mtime > older_than_s:
            found.append(staged)
    return found


def _identity(path: Path) -> tuple[int, int]:
    """The device and inode of ``path`` (which file it is); (-1, -1) when it is missing."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return (-1, -1)
    return (info.st_dev, info.st_ino)
