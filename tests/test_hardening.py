"""Hardening: store files run no code, no finished result is lost, bad input wastes no compute.

One block per finding of the adversarial review (issue 13); each test fails on the code before it.
"""

from __future__ import annotations

import json
import math
import pickle
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import (  # noqa: F401 (no_training is a fixture)
    cli_run,
    no_training,
    stored_files,
    tiny_config,
)

from benchmark.cli import main
from benchmark.core.errors import ConfigError
from benchmark.core.files import CorruptFileError, write_json_atomic
from benchmark.launch import JobRef, job_states
from benchmark.launch.grid import grid_from_dict, load_grid
from benchmark.store.frame import load_store
from benchmark.store.results import Store, StoreWarning
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer
from benchmark.training.validation import load_config

TINY = [
    "logging.progress=false",
    "data.batch_size=128",
    "runtime.threads=1",
    "runtime.deterministic=true",
]


class Payload:
    """A pickle that creates ``marker`` when unpickled: stands in for any code a file could run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


# --------------------------------------------------------------------------- 1: no code runs


def test_malicious_checkpoint_runs_nothing_and_is_moved_aside(tmp_path: Path) -> None:
    store = tmp_path / "s"
    cfg = tiny_config(store, "method.name=dense", "budget.epochs=1")
    ckpt = Store(store).checkpoint_path(cfg.run_id)
    ckpt.parent.mkdir(parents=True)
    marker = tmp_path / "ran"
    torch.save({"run_id": cfg.run_id, "state": Payload(marker)}, ckpt)
    with pytest.warns(StoreWarning, match=str(ckpt)):
        record = execute(cfg)
    assert not marker.exists()
    assert record["status"] == "finished" and not record["resumed"]
    assert len(list(ckpt.parent.glob(f"{ckpt.name}.corrupt-*"))) == 1


def test_malicious_parent_weights_run_nothing_and_are_named(tmp_path: Path) -> None:
    store = tmp_path / "s"
    common = ["method.name=imp", "budget.cycles=1", "method.parent_epochs=1", "budget.epochs=1"]
    cfg = tiny_config(store, *common)
    parent = execute(tiny_config(store, "method.name=dense", "budget.epochs=1"))
    from methods import get_method

    pid = get_method("imp")(cfg).parent_config().run_id
    assert Store(store).is_finished(pid) or parent
    marker = tmp_path / "ran"
    torch.save({"w": Payload(marker)}, Store(store).weights_path(pid))
    with pytest.raises(CorruptFileError, match=pid):
        execute(cfg)
    assert not marker.exists()


def test_grid_record_naming_a_crafted_result_pickle_is_never_unpickled(tmp_path: Path) -> None:
    import submitit

    folder = tmp_path / "jobs"
    folder.mkdir()
    marker = tmp_path / "ran"
    job = "999999999"  # no such process
    result = submitit.core.utils.JobPaths(folder, job).result_pickle
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_bytes(pickle.dumps(("success", Payload(marker))))
    ref = JobRef(job, "local", time.time(), str(folder), socket.gethostname(), "g")
    states = job_states([ref])
    assert not marker.exists()
    assert not states[job].active


# --------------------------------------------------------------------------- 2: nothing lost


def test_forced_writes_within_one_second_keep_every_earlier_result(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for i in range(4):
        store.write({"run_id": "a", "status": "finished", "v": i}, force=True)
    archived = sorted(json.loads(p.read_text())["v"] for p in (tmp_path / "archive").glob("*"))
    assert archived == [0, 1, 2] and store.read("a")["v"] == 3


def test_concurrent_forced_writes_lose_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write({"run_id": "a", "status": "finished", "v": -1})
    threads = [
        threading.Thread(
            target=lambda i=i: Store(tmp_path).write(
                {"run_id": "a", "status": "finished", "v": i}, force=True
            )
        )
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    kept = [json.loads(p.read_text())["v"] for p in (tmp_path / "archive").glob("*.json")]
    kept.append(store.read("a")["v"])
    assert sorted(kept) == list(range(-1, 8))


def test_a_failing_forced_write_keeps_the_old_result_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path)
    store.write({"run_id": "a", "status": "finished", "v": 0})

    def disk_full(path: Path, data: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("benchmark.store.results.write_json_atomic", disk_full)
    with pytest.raises(OSError, match="No space"):
        store.write({"run_id": "a", "status": "finished", "v": 1}, force=True)
    assert store.read("a") == {"run_id": "a", "status": "finished", "v": 0}


# --------------------------------------------------------------------------- 3: no silent result


@pytest.mark.usefixtures("no_training")
def test_excluding_every_weight_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    rc = cli_run(store, "method.name=gmp", 'method.exclude=["*"]', "budget.epochs=2")
    assert rc == 2
    assert "method.exclude" in capsys.readouterr().err
    assert stored_files(store) == []


@pytest.mark.usefixtures("no_training")
@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ('method.exclude=["*"]', "method.exclude"),
        ("method.sparsity=0.9999999", "method.sparsity"),
        ("schedule.warmup_epochs=1.999", "schedule.warmup_epochs"),
    ],
)
def test_a_config_error_found_with_the_model_or_data_leaves_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, field: str
) -> None:
    store = tmp_path / "results" / "runs"
    assert cli_run(store, "method.name=gmp", "budget.epochs=2", setting) == 2
    assert f"config error: {field} = " in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # not even an empty results/runs/


def test_a_missed_sparsity_goal_is_never_stored_as_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tiny_config(tmp_path / "s", "method.name=gmp", "budget.epochs=2")
    real_fit = Trainer.fit

    def dense_fit(self: Trainer, stop_after: int | None = None) -> Any:
        metrics = real_fit(self, stop_after)
        return {**metrics, "sparsity": 0.0}

    monkeypatch.setattr(Trainer, "fit", dense_fit)
    with pytest.raises(RuntimeError, match="misses the goal"):
        execute(cfg)
    assert Store(cfg.output.dir).status(cfg.run_id) == "failed"


# --------------------------------------------------------------------------- 4: damaged files


def test_a_damaged_record_is_named_and_skipped(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.write({"run_id": "good", "status": "finished", "metrics": {"x": 1}})
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.warns(StoreWarning) as caught:
        df = load_store(tmp_path)
    assert list(df["run_id"]) == ["good"]
    named = " ".join(str(w.message) for w in caught)
    assert "garbage.json" in named and "list.json" in named
    with pytest.warns(StoreWarning, match="list.json"):
        assert store.read("list") is None
    # Writing over a damaged record keeps it in the archive.
    with pytest.warns(StoreWarning, match="garbage.json"):
        store.write({"run_id": "garbage", "status": "failed"})
    assert len(list((tmp_path / "archive").glob("garbage-*.corrupt.json"))) == 1


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "missing-keys"])
def test_a_corrupt_checkpoint_is_named_moved_aside_and_the_run_restarts(
    tmp_path: Path, damage: str
) -> None:
    store = tmp_path / "s"
    cfg = tiny_config(store, "method.name=dense", "budget.epochs=2")
    ckpt = Store(store).checkpoint_path(cfg.run_id)
    assert Trainer(cfg, ckpt).fit(stop_after=1) is None
    data = ckpt.read_bytes()
    if damage == "truncated":
        ckpt.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        ckpt.write_bytes(b"\x00garbage" * 100)
    elif damage == "empty":
        ckpt.write_bytes(b"")
    else:
        torch.save({"run_id": cfg.run_id, "model": {}}, ckpt)
    with pytest.warns(StoreWarning, match=str(ckpt)):
        record = execute(cfg)
    assert record["status"] == "finished" and not record["resumed"]
    assert len(list(ckpt.parent.glob("*.corrupt-*"))) == 1


# --------------------------------------------------------------------------- 5: late failures


def _deep_toml(depth: int) -> str:
    return "a = " + "[" * depth + "]" * depth + "\n"


@pytest.mark.usefixtures("no_training")
def test_devices_this_machine_lacks_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    devices = [] if torch.cuda.is_available() else ["cuda"]
    if not torch.backends.mps.is_available():
        devices.append("mps")
    for device in devices:
        assert cli_run(tmp_path / "s", f"runtime.device={device!r}") == 2
        assert "runtime.device" in capsys.readouterr().err
    assert stored_files(tmp_path / "s") == []


@pytest.mark.usefixtures("no_training")
def test_an_unwritable_output_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert cli_run(blocker / "store") == 2
    assert "output.dir" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["config", "grid"])
@pytest.mark.parametrize("content", [b"name = '\xff\xfe'\n", _deep_toml(2000).encode()])
def test_undecodable_and_deep_toml_files_are_config_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, content: bytes
) -> None:
    path = tmp_path / "f.toml"
    path.write_bytes(content)
    args = ["run", str(path)] if kind == "config" else ["grid", "show", str(path)]
    assert main(args) == 2
    assert f"{kind} = " in capsys.readouterr().err


def test_json_output_is_valid_json(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "r.json", {"speedup": math.inf, "x": [math.nan, 1.0]})

    def refuse(name: str) -> None:
        raise AssertionError(f"invalid JSON constant {name}")

    data = json.loads((tmp_path / "r.json").read_text(), parse_constant=refuse)
    assert data == {"speedup": None, "x": [None, 1.0]}


# --------------------------------------------------------------------------- 6: grids


def _huge_grid(path: Path) -> None:
    axes = {
        "optim.weight_decay": [1e-4 * (i + 1) for i in range(10)],
        "optim.momentum": [0.5 + 0.01 * i for i in range(10)],
        "schedule.lr": [0.01 * (i + 1) for i in range(10)],
        "method.sparsity": [0.5 + 0.01 * i for i in range(10)],
        "optim.label_smoothing": [0.01 * i for i in range(10)],
        "data.split_seed": list(range(10)),
        "budget.epochs": list(range(1, 11)),
    }
    lines = ['name = "huge"', "[axes]"] + [f'"{k}" = {v!r}' for k, v in axes.items()]
    path.write_text("\n".join(lines) + "\n")


def test_a_huge_grid_is_refused_fast_unless_confirmed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "huge.toml"
    _huge_grid(path)
    start = time.monotonic()
    assert main(["grid", "show", str(path), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - start < 10
    assert "--max-runs" in err and "10000000 cells" in err and "axes.budget.epochs: 10" in err


def test_an_unknown_axis_section_is_blamed_on_the_axis() -> None:
    with pytest.raises(ConfigError) as info:
        grid_from_dict({"name": "g", "axes": {"foo": {"bar": [1, 2]}}})
    assert info.value.field == "axes.foo.bar"


def test_a_dry_run_writes_nothing(tmp_path: Path) -> None:
    grid = tmp_path / "g.toml"
    grid.write_text('name = "g"\n[base]\nbudget.epochs = 1\nmethod.name = "dense"\n')
    store = tmp_path / "s"
    args = ["submit", str(grid), "--executor", "local", "--dry-run", "--store", str(store)]
    assert main(args) == 0
    assert not store.exists()
    assert load_grid(grid).name == "g"


# --------------------------------------------------------------------------- 7: smaller


def test_orphan_temporary_files_and_a_stale_checkpoint_are_removed(tmp_path: Path) -> None:
    store = tmp_path / "s"
    cfg = tiny_config(store, "method.name=dense", "budget.epochs=1")
    st = Store(store)
    st.checkpoint_path(cfg.run_id).parent.mkdir(parents=True)
    orphans = [
        store / f".{cfg.run_id}.json.x1.tmp",
        st.checkpoint_path(cfg.run_id).parent / f".{cfg.run_id}.pt.x2.tmp",
    ]
    for orphan in orphans:
        orphan.write_text("half")
    execute(cfg)
    assert not any(o.exists() for o in orphans)
    # A kill after the result was written leaves the checkpoint: the next call removes it.
    st.checkpoint_path(cfg.run_id).write_bytes(b"stale")
    execute(cfg)
    assert not st.checkpoint_path(cfg.run_id).exists()


@pytest.mark.usefixtures("no_training")
def test_a_run_started_twice_says_already_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s"
    cfg = load_config(None, [f"output.dir={str(store)!r}", *TINY])
    with Store(store).lock(f"run-{cfg.run_id}"):
        assert cli_run(store) == 1
    assert "already running" in capsys.readouterr().err


def test_a_child_whose_parent_lost_its_weights_retrains_the_parent(tmp_path: Path) -> None:
    store = tmp_path / "s"
    common = ["method.name=imp", "budget.cycles=1", "method.parent_epochs=1", "budget.epochs=1"]
    first = execute(tiny_config(store, *common))
    pid = first["parent_run_id"]
    Store(store).weights_path(pid).unlink()
    with pytest.warns(StoreWarning, match="weights"):
        again = execute(tiny_config(store, *common, "method.sparsity=0.5"))
    assert again["status"] == "finished" and Store(store).weights_path(pid).exists()


def test_a_huge_unknown_key_is_not_echoed_in_full() -> None:
    key = "k" * 10_000_000
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"optim.{key}=1"])
    assert len(str(info.value)) < 2000


# --------------------------------------------------------------------------- structure


def test_config_imports_no_registry_and_no_torch() -> None:
    # The command line parses configs before anything heavy loads (tests/test_architecture.py
    # holds the layering as a whole).
    import subprocess
    import sys

    code = (
        "import sys, benchmark.config\n"
        "bad = [m for m in ('torch', 'benchmark.data', 'benchmark.models', 'benchmark.schedules',"
        " 'benchmark.training.validation', 'methods') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
