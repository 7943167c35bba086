"""Run locks: a discarded lock leaves no file, and a waiter never holds a removed file."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from benchmark.store.results import RunLockedError, Store


def test_a_discarded_lock_leaves_no_file_and_the_next_holder_excludes_others(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "s")
    got: list[bool] = []

    def waiter() -> None:
        with store.lock("run-x") as held:
            got.append(held.path.exists())
            time.sleep(0.3)  # hold it while the main thread tries

    with store.lock("run-x") as held:
        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)  # the waiter has opened the file that is about to be removed
        held.discard()
    time.sleep(0.1)
    # The waiter holds the lock on the file that exists now, so it still excludes others.
    with pytest.raises(RunLockedError), store.lock("run-x", wait=False):
        pass
    thread.join()
    assert got == [True]


def test_discard_keeps_a_lock_file_this_call_did_not_create(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    with store.lock("run-y"):
        pass
    with store.lock("run-y") as held:
        held.discard()
    assert (tmp_path / "s" / ".locks" / "run-y.lock").exists()
    with store.lock("run-z") as held:
        held.discard()
    assert not (tmp_path / "s" / ".locks" / "run-z.lock").exists()
