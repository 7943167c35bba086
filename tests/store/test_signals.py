"""Signals and the locks of a process: a SIGTERM at any time removes every lock file before it
ends the process; one held back during the final write acts only after the write's locks are
released; the hold has a deadline; where the filesystem has no hard links the held window holds
no copy of the weights."""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from benchmark.store import names
from benchmark.store.deferred import HeldSignals
from benchmark.store.names import SecondName
from benchmark.store.results import Store

OLD = {"run_id": "r", "status": "finished", "started": 1.0, "finished": 2.0}
NEW = {"run_id": "r", "status": "finished", "started": 3.0, "finished": 4.0}


def child(store: Path, action: str) -> int:
    """A forked child that takes the run's lock (as a run does, for its whole training) and then
    trains (sleeps) or does the final write, stopped in its held window at its first rename
    (for a second, or for a minute: a hang); returns its pid once it is there."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(reader)
            real = SecondName.move_to

            def in_window(self: SecondName, target: Path) -> bool:
                os.write(writer, b"R")
                time.sleep(60 if action == "hang" else 1.0)
                return real(self, target)

            SecondName.move_to = in_window  # type: ignore[method-assign]
            with Store(store).lock("run-r"):
                if action == "train":
                    os.write(writer, b"R")
                    time.sleep(60)
                else:
                    Store(store).write_result(dict(NEW), {"w": torch.ones(3)})
                    time.sleep(60)
        finally:
            os._exit(3)
    os.close(writer)
    with os.fdopen(reader, "rb") as ready:
        assert ready.read(1) == b"R"
    return pid


def ended_by(pid: int, timeout_s: float = 20.0) -> int:
    """The signal that ended the child (0 if it exited); fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the child did not end")
        time.sleep(0.02)


def locks(store: Path) -> list[str]:
    return sorted(p.name for p in (store / ".locks").glob("*.lockfile"))


def ended_as(sig: int) -> int:
    """How the child ends after ``sig``: by the signal itself, or (Ctrl-C's KeyboardInterrupt,
    unwound through the locks' release) by the child's own exit."""
    return 0 if sig == signal.SIGINT else sig


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_that_ends_a_run_removes_its_lock_first(tmp_path: Path, sig: int) -> None:
    store = tmp_path / "s"
    pid = child(store, "train")
    assert locks(store) == ["run-r.lockfile"]
    os.kill(pid, sig)
    assert ended_by(pid) == ended_as(sig)  # ended by the signal itself, as before
    assert locks(store) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_held_during_the_final_write_acts_after_its_locks_are_released(
    tmp_path: Path, sig: int
) -> None:
    store = tmp_path / "s"
    pid = child(store, "write")
    assert locks(store) == ["run-r.lockfile", "store.lockfile"]
    os.kill(pid, sig)  # while the result takes its place
    assert ended_by(pid) == ended_as(sig)
    assert Store(store).read("r") == NEW  # the result completed first
    assert Store(store).weights_path("r").exists()
    assert locks(store) == []  # neither the store's lock nor the run's stays behind


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_held_in_a_write_that_hangs_acts_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: int
) -> None:
    monkeypatch.setenv("PRUNEBENCH_SIGNAL_HOLD_S", "1")
    store = tmp_path / "s"
    pid = child(store, "hang")
    sent = time.monotonic()
    os.kill(pid, sig)
    assert ended_by(pid) == ended_as(sig)  # after the deadline, not after the 60 s hang
    assert time.monotonic() - sent < 15
    assert Store(store).read("r") is None  # abandoned before the record: the old state
    assert locks(store) == []


def test_without_hard_links_the_held_window_copies_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the filesystem refuses hard links the second names are copies: made before the
    store lock is taken, so that the window where signals are held holds renames only."""
    held = [False]
    copied_in_window = []
    real_hold, real_deliver, real_copy = HeldSignals.hold, HeldSignals.deliver, names.shutil.copy2

    def hold(self: HeldSignals) -> None:
        held[0] = True
        real_hold(self)

    def deliver(self: HeldSignals) -> None:
        held[0] = False
        real_deliver(self)

    def copy(src: object, dst: object) -> object:
        if held[0]:
            copied_in_window.append(src)
        return real_copy(src, dst)

    def no_links(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "hard links not supported")

    monkeypatch.setattr(HeldSignals, "hold", hold)
    monkeypatch.setattr(HeldSignals, "deliver", deliver)
    monkeypatch.setattr(names.shutil, "copy2", copy)
    monkeypatch.setattr(os, "link", no_links)
    store = Store(tmp_path)
    store.write_result(dict(OLD), {"w": torch.full((3,), 1.0)})
    store.write_result(dict(NEW), {"w": torch.full((3,), 3.0)}, force=True, replaces=OLD)
    assert copied_in_window == []
    from benchmark.core.files import load_checkpoint

    assert torch.equal(load_checkpoint(store.weights_path("r"))["w"], torch.full((3,), 3.0))
    (archived,) = store.archive_dir().glob("*.json")
    assert json.loads(archived.read_text()) == OLD
    old = load_checkpoint(archived.with_suffix(".pt"))["w"]
    assert torch.equal(old, torch.full((3,), 1.0))
    assert not [p for p in tmp_path.rglob(".*") if p.is_file()]  # no staged or temporary file


def test_a_lock_never_released_goes_when_the_interpreter_exits(tmp_path: Path) -> None:
    """An interruption that lands where no ``finally`` covers the lock (between taking it and
    the block that releases it) ends the process normally: the lock goes at exit."""
    import subprocess
    import sys

    path = tmp_path / "run-r.lockfile"
    script = (
        "import sys; from pathlib import Path; from benchmark.store.locking import LockFile\n"
        "LockFile(Path(sys.argv[1])).acquire()\n"
        "raise KeyboardInterrupt  # as a Ctrl-C right after the lock was taken"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script, str(path)], cwd=root, timeout=60,
                          capture_output=True)  # fmt: skip
    assert done.returncode != 0 and b"KeyboardInterrupt" in done.stderr
    assert not path.exists()


@pytest.mark.parametrize("stop", ["move_to", "_publish"])
def test_a_forced_write_abandoned_at_the_deadline_leaves_the_old_result_or_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    """A ``--force`` write that hangs past the deadline: before the new weights move in, the
    old result stays whole; after its replaced result went to the archive, there is no result
    (the run resumes from its checkpoint) and the replaced one is in the archive with its
    weights. Never a result without its weights, never a lock left."""
    from benchmark.core.files import load_checkpoint

    monkeypatch.setenv("PRUNEBENCH_SIGNAL_HOLD_S", "1")
    store = tmp_path / "s"
    Store(store).write_result(dict(OLD), {"w": torch.ones(3)})
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            owner = SecondName if stop == "move_to" else Store
            real = getattr(owner, stop)

            def hang(*args: object, **kwargs: object) -> object:
                os.write(writer, b"R")
                time.sleep(60)
                return real(*args, **kwargs)

            setattr(owner, stop, hang)
            with Store(store).lock("run-r"):
                Store(store).write_result(dict(NEW), {"w": torch.full((3,), 2.0)}, force=True,
                                          replaces=OLD)  # fmt: skip
        finally:
            os._exit(3)
    os.close(writer)
    with os.fdopen(reader, "rb") as ready:
        assert ready.read(1) == b"R"
    os.kill(pid, signal.SIGTERM)
    assert ended_by(pid) == signal.SIGTERM
    assert locks(store) == []
    result, weights = Store(store).read("r"), Store(store).weights_path("r")
    if stop == "move_to":
        assert result == OLD and torch.equal(load_checkpoint(weights)["w"], torch.ones(3))
    else:
        assert result is None
        (archived,) = Store(store).archive_dir().glob("*.json")
        assert json.loads(archived.read_text()) == OLD
        assert torch.equal(load_checkpoint(archived.with_suffix(".pt"))["w"], torch.ones(3))
