"""Locks of another user's process on the same host: where /proc hides other users' processes
(``hidepid=2``, common on shared nodes) a missing /proc entry proves nothing; ``kill(pid, 0)``
answering EPERM says a process runs under that pid, and the heartbeat decides."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from benchmark.store import locking
from benchmark.store.errors import RunLockedError, StoreWarning


def _dead_pid() -> int:
    """A pid no process has now (so /proc has no entry for it, as under hidepid)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _foreign_lock(path: Path, pid: int, age_s: float) -> None:
    """A lock file of process ``pid`` on this host and boot, its heartbeat ``age_s`` old."""
    owner = locking.Owner.me()
    fields = dict(json.loads(owner.text()), pid=pid, token=uuid.uuid4().hex, start="")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fields))
    then = time.time() - age_s
    os.utime(path, (then, then))


@pytest.fixture
def hidden(monkeypatch: pytest.MonkeyPatch) -> int:
    """A pid that /proc does not show but the kernel says another user's process holds:
    ``kill(pid, 0)`` answers EPERM for it, as for a live foreign process under hidepid=2."""
    pid = _dead_pid()
    real_kill = os.kill

    def kill(target: int, sig: int) -> None:
        if target == pid:
            raise PermissionError(1, "Operation not permitted")
        real_kill(target, sig)

    monkeypatch.setattr(os, "kill", kill)
    return pid


def test_a_live_process_of_another_user_keeps_its_lock_while_its_heartbeat_beats(
    tmp_path: Path, hidden: int
) -> None:
    path = tmp_path / "run-x.lockfile"
    _foreign_lock(path, hidden, age_s=5.0)
    assert not Path(f"/proc/{hidden}").exists()
    with pytest.raises(RunLockedError, match=f"pid {hidden} on {socket.gethostname()}"):
        locking.LockFile(path).acquire(wait=False)
    assert path.exists() and locking.is_held(path)


def test_a_hidden_owner_whose_heartbeat_stopped_loses_its_lock(
    tmp_path: Path, hidden: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(locking.STALE_ENV, "60")
    path = tmp_path / "run-x.lockfile"
    _foreign_lock(path, hidden, age_s=3600.0)
    lock = locking.LockFile(path)
    with pytest.warns(StoreWarning, match=f"heartbeat stopped .* cannot see its process {hidden}"):
        lock.acquire(wait=False)
    lock.release()


def test_a_pid_the_kernel_does_not_know_is_dead_at_once(tmp_path: Path) -> None:
    path = tmp_path / "run-x.lockfile"
    pid = _dead_pid()
    _foreign_lock(path, pid, age_s=0.0)
    lock = locking.LockFile(path)
    with pytest.warns(StoreWarning, match=f"pid {pid} .*no longer exists"):
        lock.acquire(wait=False)
    lock.release()
