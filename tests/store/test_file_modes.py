"""A store a group shares (issue 39): every file and folder it writes follows the umask, as
``open()`` and ``mkdir()`` would create them, so colleagues can read the records and weights."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from benchmark.core.files import save_checkpoint, write_json_atomic
from benchmark.store.results import Store


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run the block under ``mask`` (process-wide), restoring the old one after."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder that any user can enter (pytest's own tmp folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="prunebench-shared-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def write_store(root: Path) -> None:
    """A store written by every kind of write: records (one replaced: archive/), final weights,
    a checkpoint, a grid's submission record, lock files taken and released."""
    store = Store(root)
    weights = {"w": torch.zeros(4, 4)}
    store.write_result({"run_id": "a", "status": "finished"}, weights)
    store.write_result({"run_id": "a", "status": "finished", "n": 2}, weights, force=True)
    store.write({"run_id": "b", "status": "failed", "error": "boom"})
    save_checkpoint({"epoch": 1}, store.checkpoint_path("b"))
    write_json_atomic(root / "grids" / "g.json", {"grid": "g", "submissions": []})
    with store.lock("run-b"):
        pass


@pytest.mark.parametrize("mask", [0o002, 0o022])
def test_files_and_folders_follow_the_umask(
    shared_folder: Path, mask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = shared_folder / "runs"
    with umask(mask):
        write_store(root)
    paths = [root, *root.rglob("*")]
    assert len([p for p in paths if p.is_file()]) >= 6
    for path in paths:
        want = (0o777 if path.is_dir() else 0o666) & ~mask
        assert stat.S_IMODE(path.stat().st_mode) == want, (path, oct(path.stat().st_mode))
    readable = read_as_another_user(root)
    assert readable == (2, 0), "another user reads every record"


def read_as_another_user(root: Path) -> tuple[int, int]:
    """As user ``nobody``: how many records of ``root`` it reads, and how many files it cannot
    open. Skips where the test cannot change user."""
    files = [p for p in root.rglob("*") if p.is_file()]

    def read() -> int:
        denied = 0
        for path in files:
            try:
                path.read_bytes()
            except PermissionError:
                denied += 1
        print(len(Store(root).records()), denied, file=sys.stderr)
        return 0

    code, said = as_nobody(read)
    assert code == 0, said
    records, denied = said.split()
    return int(records), int(denied)


def as_nobody(work: Callable[[], int]) -> tuple[int, str]:
    """``work()`` in a forked child that is user nobody (in group nogroup only): its result
    and what it wrote to stderr. Skips where the test cannot change user."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root, to switch to user nobody")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("this machine has no user nobody")
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, work, exit at once with its result
        code = 99
        sys.stderr = os.fdopen(writer, "w", buffering=1)  # pytest's capture is not fd 2
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            code = work()
        except BaseException:  # noqa: BLE001 (said on stderr, for the test's message)
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    os.close(writer)
    with os.fdopen(reader) as fh:
        said = fh.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), said
