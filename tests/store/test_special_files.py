"""Store files that are not regular files (a FIFO, a device) are named and refused, never read:
lock files (a FIFO there used to hang every run at its final write, a device to read until memory
ran out), weights (a FIFO hung ``latency`` and every child of that parent) and staged files."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from benchmark.core.errors import CorruptFileError
from benchmark.core.files import load_checkpoint, save_weights
from benchmark.store.errors import StoreWarning
from benchmark.store.leftovers import find_leftovers
from benchmark.store.results import Store

# A call that hangs (a FIFO opened or read) fails the test after this long instead of hanging.
HANG_S = 10.0


def finishes(call: Callable[[], object]) -> object:
    """``call()``'s result or exception, failing the test if it does not return in HANG_S."""
    out: list[object] = []

    def target() -> None:
        try:
            out.append(call())
        except BaseException as err:  # noqa: BLE001 (handed to the test)
            out.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert out, "the call hangs"
    return out[0]


@pytest.mark.parametrize("kind", ["fifo", "device"])
@pytest.mark.parametrize("name", ["store", "run-x"])
def test_a_lock_name_that_is_not_a_file_is_refused_by_name(
    tmp_path: Path, kind: str, name: str
) -> None:
    store = Store(tmp_path / "s")
    path = store.root / ".locks" / f"{name}.lockfile"
    path.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/null")  # a device: /dev/zero would be read until memory ran out
    what = "FIFO" if kind == "fifo" else "character device"

    def take() -> None:
        with store.lock(name):
            pass

    err = finishes(take)
    assert isinstance(err, CorruptFileError), err
    assert str(path) in str(err) and what in str(err) and "remove it" in str(err)
    with pytest.warns(StoreWarning, match=what):
        assert finishes(lambda: store.lock_held(name)) is True  # nothing acts on its run


def test_a_run_refuses_a_fifo_store_lock_before_training(tmp_path: Path) -> None:
    from helpers import tiny_config

    from benchmark.training.runner import execute

    cfg = tiny_config(tmp_path / "s", "method.name=dense", "budget.epochs=1", "runtime.device=cpu")
    path = Path(cfg.output.dir) / ".locks" / "store.lockfile"
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    err = finishes(lambda: execute(cfg))
    assert isinstance(err, CorruptFileError) and "FIFO" in str(err), err
    assert not Store(cfg.output.dir).checkpoint_path(cfg.run_id).exists()  # nothing trained


def test_weights_that_are_a_fifo_are_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "weights" / "parent.pt"
    path.parent.mkdir()
    os.mkfifo(path)
    err = finishes(lambda: load_checkpoint(path))
    assert isinstance(err, CorruptFileError) and "FIFO" in str(err) and str(path) in str(err)
    regular = tmp_path / "w.pt"
    save_weights({"w": torch.ones(3)}, regular)
    assert torch.equal(load_checkpoint(regular)["w"], torch.ones(3))


def test_a_staged_name_that_is_a_fifo_is_left_alone(tmp_path: Path) -> None:
    store = Store(tmp_path / "s")
    store.write({"run_id": "a", "status": "failed", "error": "x"})
    fifo = store.root / ".a.json.0123abcd.staged"
    os.mkfifo(fifo)
    old = 0.0
    os.utime(fifo, (old, old))
    with pytest.warns(StoreWarning, match="not a regular file"):
        assert find_leftovers(store) == []
    assert finishes(lambda: store.clean_run_files("a")) == []
    assert fifo.exists() and not store.archive_dir().exists()
    assert json.loads(store.result_path("a").read_text())["status"] == "failed"


def test_a_log_name_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    from benchmark.core.files import append_regular

    fifo = tmp_path / "controllers.log"
    os.mkfifo(fifo)
    err = finishes(lambda: append_regular(fifo))
    assert isinstance(err, CorruptFileError) and "FIFO" in str(err), err
    with append_regular(tmp_path / "new.log") as fh:
        fh.write(b"x")
    assert (tmp_path / "new.log").read_bytes() == b"x"
