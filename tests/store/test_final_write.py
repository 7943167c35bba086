"""The final write of a result (issue 36): a kill, Ctrl-C or ``SystemExit`` at any step of
``Store.write_result`` leaves the old state or the new one; a result always has its weights, a
forced rerun archives the weights of the result it replaces, and no leftover-cleanup deletes the
only copy of a result's weights.

A step is one call that changes the store (a link, rename or unlink): the write runs in a forked
child that is interrupted right before its N-th step, for every N until the write completes, as
the resume tests kill training right after a checkpoint.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmark.core.files import load_checkpoint
from benchmark.store.results import Store

RUN = "r"
STEPS = ("link", "replace", "rename", "unlink")
OLD = {"run_id": RUN, "status": "finished", "started": 1.0, "finished": 2.0}
NEW = {"run_id": RUN, "status": "finished", "started": 3.0, "finished": 4.0}


def weights_of(record: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Final weights that tell which result they belong to."""
    return {"w": torch.full((4,), record["started"])}


def interrupt(how: str) -> None:
    """Stop this process as ``how`` would: SIGKILL, Ctrl-C (SIGINT) or SystemExit (submitit's
    exit at a SLURM time limit or on preemption)."""
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "sigint":
        signal.raise_signal(signal.SIGINT)
    else:
        raise SystemExit(-1)


def write_interrupted(root: Path, how: str, at: int, force: bool) -> bool:
    """``write_result(NEW)`` in a forked child, interrupted before its ``at``-th store step;
    True when the write completed without reaching that step."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            count = [0]
            for name in STEPS:
                real = getattr(os, name)

                def step(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                    if str(args[0]).startswith(str(root)):
                        count[0] += 1
                        if count[0] == at:
                            interrupt(how)
                    return _real(*args, **kwargs)

                setattr(os, name, step)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            Store(root).write_result(dict(NEW), weights_of(NEW), force=force)
            code = 0
        except BaseException:  # noqa: BLE001 (the interruption: Ctrl-C, SystemExit)
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def results_with_weights(root: Path) -> dict[float, bool]:
    """Every finished record in the store (current and archived, by its start time): whether
    its weights are there and are its own."""
    store = Store(root)
    found: dict[float, bool] = {}
    current = store.read(RUN)
    if current is not None:
        found[current["started"]] = _matches(store.weights_path(RUN), current)
    for path in (root / "archive").glob("*.json"):
        record = json.loads(path.read_text())
        found[record["started"]] = _matches(path.with_suffix(".pt"), record)
    return found


def _matches(weights: Path, record: dict[str, Any]) -> bool:
    if not weights.exists():
        return False
    return torch.equal(load_checkpoint(weights)["w"], weights_of(record)["w"])


@pytest.mark.filterwarnings("ignore:run r has a result its killed writer staged")
@pytest.mark.parametrize("how", ["kill", "sigint", "exit"])
@pytest.mark.parametrize("force", [False, True], ids=["first", "forced-rerun"])
def test_an_interruption_at_any_step_of_the_final_write_loses_nothing(
    tmp_path: Path, how: str, force: bool
) -> None:
    at = 0
    while True:
        at += 1
        assert at < 60, "the write never completed"
        root = tmp_path / f"s{at}"
        store = Store(root)
        if force:
            store.write_result(dict(OLD), weights_of(OLD))
        completed = write_interrupted(root, how, at, force)
        current = store.read(RUN)
        # The run has its old result, its new one, or none (it resumes): always with weights.
        assert current is None or current["started"] in {OLD["started"], NEW["started"]}
        if current is None:
            assert not store.is_finished(RUN)
        kept = results_with_weights(root)
        assert all(kept.values()), f"step {at}: a result without its weights: {kept}"
        if force:
            assert kept.get(OLD["started"]), f"step {at}: the replaced result was lost"
        # Ten minutes later, the run's next start tidies up: nothing that is the only copy of a
        # result's weights goes, and the new result, if it was staged, is kept whole.
        store.clean_run_files(RUN, orphan_after_s=-1.0)
        after = results_with_weights(root)
        assert all(after.values()), f"step {at}: cleanup left a result without weights: {after}"
        assert set(kept) <= set(after)
        if completed:
            assert current is not None and current["started"] == NEW["started"]
            break
    assert at > 5  # the write has steps to interrupt


def test_a_forced_rerun_archives_the_weights_of_the_result_it_replaces(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write_result(dict(OLD), weights_of(OLD))
    store.write_result(dict(NEW), weights_of(NEW), force=True, replaces=store.read(RUN))
    (archived,) = (tmp_path / "archive").glob("*.json")
    assert json.loads(archived.read_text())["started"] == OLD["started"]
    assert _matches(archived.with_suffix(".pt"), OLD)
    assert _matches(store.weights_path(RUN), NEW)
    assert not list(tmp_path.rglob(".*staged"))


@pytest.mark.parametrize("how", ["sigint", "requeue"])
def test_a_signal_during_the_renames_lands_after_the_result_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Ctrl-C, or submitit's requeue signal (its handler exits through SystemExit), arriving
    while the result takes its place: the write completes first, then the signal acts."""
    from benchmark.store.names import SecondName

    sent = {"sigint": signal.SIGINT, "requeue": signal.SIGUSR2}[how]
    real = SecondName.move_to

    def signalled(*args: Any) -> bool:
        signal.raise_signal(sent)
        return real(*args)

    def requeue(signum: int, frame: Any) -> None:
        raise SystemExit(-1)  # as submitit's checkpoint_and_try_requeue does

    monkeypatch.setattr(SecondName, "move_to", signalled)
    before = signal.signal(signal.SIGUSR2, requeue)
    store = Store(tmp_path)
    try:
        with pytest.raises(KeyboardInterrupt if how == "sigint" else SystemExit):
            store.write_result(dict(NEW), weights_of(NEW))
    finally:
        signal.signal(signal.SIGUSR2, before)
    assert store.read(RUN) == NEW and _matches(store.weights_path(RUN), NEW)
    assert not list(tmp_path.rglob(".*staged")) and not list(tmp_path.rglob("*.lockfile"))
