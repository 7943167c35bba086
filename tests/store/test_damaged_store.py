"""Damaged stores (issues 36 and 39): records of the wrong shape, copies under another name,
entries that are not regular files, and files left by killed writes are named and skipped (or
cleaned) by ``table``, ``status``, ``free`` and ``export``, which all finish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from reporting.test_keep import fake_result, smoke_runs

from benchmark.cli import main
from benchmark.store.errors import StoreWarning
from benchmark.store.leftovers import find_leftovers
from benchmark.store.records import MAX_RECORD_BYTES
from benchmark.store.results import STAGED_SUFFIX, Store

SPEC = "gmp-vs-bimp-cifar100"
GRID = """\
name = "tiny"
seeds = [0]
[base]
data.name = "digits"
model.name = "cnn_small"
budget.epochs = 1
logging.progress = false
[methods.dense]
"""
# How each damage is made from a finished record, and a word its reason names.
DAMAGES = {
    "metrics": (lambda r: r | {"metrics": "oops"}, "metrics"),
    "status": (lambda r: r | {"status": 5}, "status"),
    "top1": (lambda r: r | {"metrics": {**r["metrics"], "test": {"top1": "0.9"}}}, "top1"),
    "config": (lambda r: r | {"config": "x"}, "config"),
    "parent": (lambda r: r | {"parent_run_id": ["a"]}, "parent_run_id"),
    "latency": (lambda r: r | {"metrics": {**r["metrics"], "latency": "1 ms"}}, "latency"),
    "nan": (lambda r: r | {"metrics": {**r["metrics"], "val": {"top1": float("nan")}}}, "NaN"),
}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """The smoke runs of SPEC, finished with weights (no training)."""
    root = tmp_path / "s"
    for i, run in enumerate(smoke_runs(root)):
        if not Store(root).is_finished(run.cfg.run_id):
            fake_result(root, run.cfg, 0.5 + 0.01 * (i % 7))
    return root


def _commands(store: Path, grid: Path, grid_store: Path) -> dict[str, list[str]]:
    at = ["--store", str(store)]
    return {
        "table": ["table", SPEC, *at, "--scale", "smoke"],
        "export": ["export", SPEC, *at, "--scale", "smoke", "--format", "csv"],
        "status": ["status", str(grid), "--store", str(grid_store)],
        "free --dry-run": ["free", SPEC, *at, "--scale", "smoke", "--dry-run"],
        "free": ["free", SPEC, *at, "--scale", "smoke"],
    }


def _grid(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(GRID)
    return path


def _grid_run_id(grid: Path, store: Path) -> str:
    from benchmark.launch import LaunchSettings, prepare
    from benchmark.launch.grid import load_grid

    return prepare(load_grid(grid), store, LaunchSettings(threads=1)).runs[0].run_id


def test_records_of_the_wrong_shape_and_a_copy_are_named_and_counted_by_every_command(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victims = _victims(store, len(DAMAGES))
    weights = []
    for (_name, (make, _word)), victim in zip(sorted(DAMAGES.items()), victims, strict=True):
        record = json.loads(victim.read_text())
        weights.append(Store(store).weights_path(record["run_id"]))
        victim.write_text(json.dumps(make(record)))
    # A copy of a finished record under another run's name is not a second seed of its run.
    copy = store / "imp-000000000000.json"
    copy.write_text(_victims(store, len(DAMAGES) + 1)[-1].read_text())
    # status reads only its grid's runs: its store holds the grid's run, damaged.
    grid, grid_store = _grid(tmp_path), tmp_path / "g"
    grid_run = _grid_run_id(grid, grid_store)
    make, grid_word = DAMAGES["metrics"]
    Store(grid_store).write({"run_id": grid_run, "status": "finished"})
    grid_record = Store(grid_store).result_path(grid_run)
    grid_record.write_text(json.dumps(make(json.loads(grid_record.read_text()))))
    outputs = {}
    for name, args in _commands(store, grid, grid_store).items():
        code, text = _run(args, capsys)
        assert code == 0, (name, text)
        outputs[name] = text
    for name, text in outputs.items():
        if name == "status":
            assert grid_record.name in text and grid_word in text, text
            assert "1 unusable store record(s) skipped, their runs count as missing" in text
            continue
        for (_damage, (_make, word)), victim in zip(sorted(DAMAGES.items()), victims, strict=True):
            assert victim.name in text and word in text, (name, victim.name, text)
        assert copy.name in text and "not 'imp-000000000000'" in text, (name, text)
    skipped = len(DAMAGES) + 1
    assert f"{skipped} unusable store record(s) skipped" in outputs["table"]
    planned = len({r.cfg.run_id for r in smoke_runs(store)})
    found = planned - len(DAMAGES)
    assert f"{found} of {planned} planned runs found" in outputs["table"]
    assert outputs["export"].count(",unusable,") == len(DAMAGES)
    assert all(w.exists() for w in weights)  # a record that cannot be read keeps its weights


def _victims(store: Path, n: int) -> list[Path]:
    """``n`` records of non-dense runs (no other run names them as parent)."""
    paths = [p for p in sorted(store.glob("*.json")) if not p.name.startswith("dense-")]
    return paths[:n]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``main(args)``: its exit code and everything it said (warnings included)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(args)
    out, err = capsys.readouterr()
    return code, "\n".join([out, err, *(str(w.message) for w in caught)])


COMMANDS_SCRIPT = textwrap.dedent(
    """
    import json, sys, time, warnings
    from benchmark.cli import main
    warnings.simplefilter("always")
    for args in json.loads(sys.argv[1]):
        start = time.perf_counter()
        code = main(args)
        print(f"DONE {args[0]} {code} {time.perf_counter() - start:.1f}s", flush=True)
    """
)


@pytest.mark.slow
def test_a_fifo_and_a_link_to_dev_zero_are_named_and_skipped_without_hanging(
    store: Path, tmp_path: Path
) -> None:
    grid = _grid(tmp_path)
    fifos = [store / f"{_grid_run_id(grid, store)}.json", store / "grids" / "g.json"]
    for fifo in fifos:
        fifo.parent.mkdir(exist_ok=True)
        os.mkfifo(fifo)
    (store / "zero.json").symlink_to("/dev/zero")
    commands = [*_commands(store, grid, store).values(), ["list", "--store", str(store)]]
    # One process runs them all (imports once); a read that blocked would hit the timeout.
    done = subprocess.run(
        [sys.executable, "-c", COMMANDS_SCRIPT, json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).parents[2],
    )
    ended = [line for line in done.stdout.splitlines() if line.startswith("DONE")]
    assert [line.split()[1:3] for line in ended] == [[c[0], "0"] for c in commands], done.stderr
    for fifo in fifos:
        assert f"{fifo.name}: not a regular file (a FIFO)" in done.stderr or (
            f"{fifo}: not a regular file (a FIFO)" in done.stderr
        )
    assert "zero.json: not a regular file (a character device)" in done.stderr
    assert "unusable store record(s) skipped" in done.stdout


def test_a_record_over_the_size_limit_is_refused_without_reading_it(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write({"run_id": "big", "status": "finished"})
    with store.result_path("big").open("ab") as fh:
        fh.truncate(MAX_RECORD_BYTES + 1)  # sparse: nothing is written
    with pytest.warns(StoreWarning, match=f"big.json: {MAX_RECORD_BYTES + 1} bytes, over"):
        assert store.records() == []
    assert list(store.skipped) == [store.result_path("big")]


def _staged(target: Path, token: str, data: bytes = b"{}") -> Path:
    """A staged file of ``target`` as the final write names it."""
    path = target.with_name(f".{target.name}.{token}{STAGED_SUFFIX}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_files_of_killed_writes_are_named_by_status_and_cleaned_by_free(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = Store(store)
    done, running, bare, broken = (json.loads(p.read_text())["run_id"] for p in _victims(store, 4))
    st.weights_path(bare).unlink()  # a finished run whose weights never got into place
    st.result_path(broken).write_text("{")  # a record that cannot be read
    dead = "imp-0123456789ab"  # killed in its final write: record and weights staged
    record = {"run_id": dead, "status": "finished", "method": "imp"}
    files = {
        "extra weights": _staged(st.weights_path(done), "a1"),
        "dead record": _staged(st.result_path(dead), "b2", json.dumps(record).encode()),
        "dead weights": _staged(st.weights_path(dead), "b2", b"weights"),  # its record's token
        "partial": st.result_path(dead).with_name(f".{dead}.json.x7.tmp"),
        "running": _staged(st.weights_path(running), "d4"),
        "only copy": _staged(st.weights_path(bare), "e5"),
        "unreadable": _staged(st.weights_path(broken), "g7"),
    }
    files["partial"].write_text("{")
    assert {f.path for f in find_leftovers(st)} == set(files.values())
    # status names those of its grid's runs, and says whether a process holds the run.
    grid = _grid(tmp_path)
    grid_run = _grid_run_id(grid, store)
    staged_grid = _staged(st.result_path(grid_run), "f6")
    code, text = _run(["status", str(grid), "--store", str(store)], capsys)
    assert code == 0 and "files left by killed writes (1;" in text
    assert f"{staged_grid} (staged record of {grid_run}" in text
    assert "no process holds its run" in text
    staged_grid.unlink()
    with st.lock(f"run-{running}"):
        code, dry = _run(
            ["free", SPEC, "--store", str(store), "--scale", "smoke", "--dry-run"], capsys
        )
        assert code == 0 and all(p.exists() for p in files.values())
        assert f"would clean {len(files)} file(s) left by killed writes" in dry
        code, text = _run(["free", SPEC, "--store", str(store), "--scale", "smoke"], capsys)
    assert code == 0, text
    assert not files["extra weights"].exists() and not files["partial"].exists()
    archived = sorted((store / "archive").glob(f"{dead}-*"))
    assert [p.suffix for p in archived] == [".json", ".pt"]
    assert json.loads(archived[0].read_text()) == record  # a complete result is never deleted
    assert archived[1].read_bytes() == b"weights"
    assert files["running"].exists() and f"kept {files['running']}: its run is running" in text
    assert files["only copy"].exists() and "finished without weights in place" in text
    assert files["unreadable"].exists() and f"the record of run {broken} cannot be read" in text


def test_free_pairs_staged_records_with_their_own_weights_by_token(tmp_path: Path) -> None:
    """Two killed final writes of one run (each record and weights under one token): each
    record is archived with its own weights, none deleted; a staged record that is a second
    name of the result (killed after publishing) goes, the result stays."""
    from benchmark.store.leftovers import clean_leftovers

    st = Store(tmp_path / "runs")
    run = "imp-0123456789ab"
    for token, data in (("t1", b"first"), ("t2", b"second")):
        record = {"run_id": run, "status": "finished", "method": "imp", "token": token}
        _staged(st.result_path(run), token, json.dumps(record).encode())
        _staged(st.weights_path(run), token, data)
    with pytest.warns(StoreWarning):
        done = clean_leftovers(st, find_leftovers(st))
    assert not find_leftovers(st), done
    archived = sorted((tmp_path / "runs" / "archive").iterdir())
    pairs = {json.loads(p.read_text())["token"]: p.with_suffix(".pt") for p in archived
             if p.suffix == ".json"}  # fmt: skip
    assert {t: p.read_bytes() for t, p in pairs.items()} == {"t1": b"first", "t2": b"second"}
    # Killed between publishing and unlinking: the staged name is the result itself.
    st.result_path(run).write_text(json.dumps({"run_id": run, "status": "finished"}))
    second = _staged(st.result_path(run), "t3")
    second.unlink()
    os.link(st.result_path(run), second)
    clean_leftovers(st, find_leftovers(st))
    assert not second.exists() and st.result_path(run).exists()
    assert len(list((tmp_path / "runs" / "archive").glob("*.json"))) == 2


def test_free_skips_leftovers_whose_writer_finished_after_they_were_listed(
    tmp_path: Path,
) -> None:
    from benchmark.store.leftovers import clean_leftovers

    st = Store(tmp_path / "runs")
    run = "imp-0123456789ab"
    _staged(st.result_path(run), "t1", json.dumps({"run_id": run, "status": "finished"}).encode())
    listed = find_leftovers(st)
    listed[0].path.unlink()  # its writer published and tidied meanwhile
    assert clean_leftovers(st, listed) == []


def test_a_copied_record_in_place_of_a_result_is_set_aside_by_the_runs_own_write(
    tmp_path: Path,
) -> None:
    """B's record copied to A.json is not A's result: A's finished write replaces it (the copy
    is archived as damaged) instead of being archived as 'finished by another process first'."""
    st = Store(tmp_path / "runs")
    a, b = "imp-aaaaaaaaaaaa", "imp-bbbbbbbbbbbb"
    st.result_path(a).parent.mkdir(parents=True, exist_ok=True)
    st.result_path(a).write_text(json.dumps({"run_id": b, "status": "finished"}))
    import torch

    with pytest.warns(StoreWarning, match="unreadable"):
        st.write_result({"run_id": a, "status": "finished", "method": "imp"}, {"w": torch.ones(2)})
    assert json.loads(st.result_path(a).read_text())["run_id"] == a
    assert st.weights_path(a).exists() and st.read(a) is not None
    assert not list((tmp_path / "runs" / "archive").glob(f"{a}-*.pt"))  # nothing came second


def test_publish_gives_up_when_its_reads_disagree_instead_of_looping(tmp_path: Path) -> None:
    """A result that reads as damaged at its name but as another finished result once set
    aside would be put back and set aside for ever (inside the final write, where signals are
    held): publish stops with an error instead."""
    from benchmark.store.publish import publish

    path, staged = tmp_path / "a.json", tmp_path / ".a.json.t.staged"
    path.write_text("{}")
    staged.write_text("{}")
    archive = tmp_path / "archive.json"

    def set_aside(p: Path, current: dict | None) -> Path:
        os.replace(p, archive)
        return archive

    def read(p: Path) -> dict | None:
        return {"status": "finished"} if p == archive else None

    with pytest.raises(RuntimeError, match="no stable state"):
        publish(staged, path, {"status": "finished"}, force=False, replaces=None, read=read,
                set_aside=set_aside)  # fmt: skip
    assert path.exists() and staged.exists()  # nothing lost
