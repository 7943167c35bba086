"""Run locks: a lock file exists only while held; a discarded lock leaves no folder behind; a
lock still excludes others while a waiter takes it over."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from benchmark.store.results import RunLockedError, Store


def test_a_discarded_lock_leaves_nothing_and_the_next_holder_excludes_others(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s")
    got: list[bool] = []

    def waiter() -> None:
        with store.lock("run-x") as held:
            got.append(held.path.exists())
            time.sleep(2.0)  # hold it while the main thread tries

    with store.lock("run-x") as held:
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)  # the waiter waits for the lock
        held.discard()
    time.sleep(1.5)  # the waiter polls at most once a second
    # The waiter holds the lock now, so it still excludes others.
    with pytest.raises(RunLockedError), store.lock("run-x", wait=False):
        pass
    thread.join()
    assert got == [True]
    assert not held.path.exists()


def test_discard_removes_only_a_lock_folder_this_call_created(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    with store.lock("run-y") as held:
        assert held.path.exists()  # a lock file exists while the lock is held
        held.discard()
    assert not (tmp_path / "s" / ".locks").exists()  # this call made the folder: gone
    with store.lock("run-y"):
        pass
    with store.lock("run-z") as held:
        held.discard()
    assert (tmp_path / "s" / ".locks").exists()  # made by an earlier lock: kept
    assert list((tmp_path / "s" / ".locks").iterdir()) == []  # no lock file is left
