"""Data-parallel runs on CPU (gloo): batch slices, checks, resume, failures and the command line.

The equality of a 2-process run with the 1-process run, for every method, is in the contract
suite (tests/training/test_contract.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import (
    comparable,
    execute_diverging_masks,
    execute_failing_on_rank,
    execute_then_die,
    tiny_config,
)
from torch import nn

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.data.base import build_dataset, shard_range
from benchmark.store.results import Store
from benchmark.training.distributed import (
    DataParallel,
    GlobalBatchNorm2d,
    RankFailed,
    convert_sync_bn,
    spawn,
)
from benchmark.training.process_checks import (
    check_batch,
    check_batchnorm_processes,
    check_last_batch,
)
from benchmark.training.runner import execute, execute_all
from benchmark.training.validation import load_config


def two_rank_config(store: Path, *overrides: str) -> RunConfig:
    """A short BIMP run on digits (T0 = 2, two cycles) for 2 processes."""
    return tiny_config(
        store,
        "method.name=bimp",
        "runtime.device='cpu'",  # gloo processes, also where there is one GPU
        "method.sparsity=0.8",
        "budget.epochs=4",
        "budget.initial_epochs=2",
        "budget.cycles=2",
        *overrides,
    )


# --------------------------------------------------------------------------- one run id, one BN


def test_several_processes_normalise_over_the_whole_batch_unless_the_id_says_otherwise(
    tmp_path: Path,
) -> None:
    """A 2-process run with default settings is the 1-process experiment (same id, whole-batch
    BatchNorm); per-process BatchNorm is another experiment and only runs under its own id."""
    default = two_rank_config(tmp_path)
    assert default.runtime.sync_bn is not False  # per-process statistics were the default
    check_batchnorm_processes(default.model.batchnorm_processes, default.runtime.sync_bn, 2)
    per_process = two_rank_config(tmp_path, "model.batchnorm_processes=2")
    assert per_process.run_id != default.run_id
    check_batchnorm_processes(2, None, 2)
    check_batchnorm_processes(2, False, 2)
    # runtime.sync_bn = false alone would store the per-process result under the default id.
    with pytest.raises(ConfigError) as err:
        check_batchnorm_processes(1, False, 2)
    assert err.value.field == "runtime.sync_bn" and "model.batchnorm_processes = 2" in str(
        err.value
    )
    for processes in (1, 4):  # a per-process id trained by another number of processes
        with pytest.raises(ConfigError, match="model.batchnorm_processes"):
            check_batchnorm_processes(2, None, processes)
    with pytest.raises(ConfigError, match="runtime.sync_bn"):
        two_rank_config(tmp_path, "model.batchnorm_processes=2", "runtime.sync_bn=true")


def test_local_launch_refuses_sync_bn_false_before_any_process_starts(tmp_path: Path) -> None:
    from benchmark.training.runner import run_local

    cfg = two_rank_config(tmp_path / "runs", "runtime.sync_bn=false")
    with pytest.raises(ConfigError, match="runtime.sync_bn"):
        run_local([cfg], 2)
    assert not (tmp_path / "runs").exists()


# --------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize("n,world", [(128, 2), (13, 2), (7, 4), (100, 8), (3, 3)])
def test_shard_range_splits_a_batch_into_contiguous_slices(n: int, world: int) -> None:
    parts = [shard_range(10, 10 + n, r, world) for r in range(world)]
    assert parts[0][0] == 10 and parts[-1][1] == 10 + n
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
    sizes = [hi - lo for lo, hi in parts]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_rank_batches_are_slices_of_the_one_process_batches() -> None:
    cfg = tiny_config(Path("unused"), "data.batch_size=256")
    whole = build_dataset(cfg.data, torch.device("cpu"))
    ranks = [build_dataset(cfg.data, torch.device("cpu")) for _ in range(2)]
    for r, source in enumerate(ranks):
        source.shard = (r, 2)
    per_rank = [list(s.train_batches(3, 7)) for s in ranks]
    for step, (x, y) in enumerate(whole.train_batches(3, 7)):
        assert torch.equal(torch.cat([per_rank[0][step][0], per_rank[1][step][0]]), x)
        assert torch.equal(torch.cat([per_rank[0][step][1], per_rank[1][step][1]]), y)
    assert len(per_rank[0]) == len(per_rank[1]) == whole.iters_per_epoch()


def test_batches_that_processes_cannot_share_are_refused() -> None:
    check_batch(128, 4)
    with pytest.raises(ConfigError, match="data.batch_size"):
        check_batch(128, 3)
    with pytest.raises(ConfigError, match="--nproc"):
        check_batch(128, 0)
    check_last_batch(1293, 128, 8)  # last batch of 13 samples: one for each of 8 ranks
    with pytest.raises(ConfigError, match="last batch"):
        check_last_batch(1281, 128, 2)


def test_one_process_is_a_no_op() -> None:
    dp = DataParallel.current(sync_bn=True)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    assert not dp.active and dp.wrap(model) is model
    assert dp.prepare_model(model, torch.device("cpu")) is model
    assert type(model[1]) is nn.BatchNorm2d
    assert dp.loss_scale(9, 13, 1293, 128) == 1.0
    dp.check_same([torch.ones(3)], "masks")
    assert dp.info(torch.device("cpu"))["processes"] == 1


def test_only_classification_data_is_split_over_processes() -> None:
    class Segmentation:
        name, task = "coco", "segmentation"

    with pytest.raises(ConfigError, match="--nproc"):
        DataParallel(world=2, rank=0).shard(Segmentation())


def test_global_batchnorm_keeps_parameters_and_matches_batchnorm_alone() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4))
    weight = model[1].weight
    reference = nn.BatchNorm2d(4)
    reference.load_state_dict(model[1].state_dict())
    convert_sync_bn(model, torch.device("cpu"))
    assert isinstance(model[1], GlobalBatchNorm2d) and model[1].weight is weight
    x = torch.randn(6, 4, 5, 5)
    # Without a process group it is ordinary BatchNorm (train and eval).
    assert torch.equal(model[1](x), reference(x))
    assert torch.equal(model[1].running_var, reference.running_var)


# --------------------------------------------------------------------------- process groups


@pytest.mark.slow
def test_killed_two_process_run_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    done = two_rank_config(tmp_path / "uninterrupted")
    killed = two_rank_config(tmp_path / "killed")
    # Both ranks die right after the checkpoint of epoch 3 (after the first prune-retrain cycle).
    with pytest.raises(RankFailed, match="exited with code 17"):
        spawn(execute_then_die, 2, "cpu", done, killed, 3, 17)
    store = Store(killed.output.dir)
    assert store.read(killed.run_id) is None and store.checkpoint_path(killed.run_id).exists()
    from benchmark.training.runner import run_local

    run_local([killed], 2)
    resumed, whole = store.read(killed.run_id), Store(done.output.dir).read(done.run_id)
    assert resumed is not None and whole is not None
    assert resumed["resumed"] and not whole["resumed"]
    assert comparable(resumed["metrics"]) == comparable(whole["metrics"])
    assert resumed["history"] == whole["history"]
    assert resumed["distributed"]["processes"] == 2


@pytest.mark.slow
def test_a_failing_rank_fails_the_run_with_its_error(tmp_path: Path) -> None:
    cfg = two_rank_config(tmp_path / "runs")
    with pytest.raises(RankFailed, match="rank 1"):
        spawn(execute_failing_on_rank, 2, "cpu", cfg, 1, 1)
    record = Store(cfg.output.dir).read(cfg.run_id)
    assert record is not None and record["status"] == "failed"
    assert record["rank"] == 1 and record["processes"] == 2
    assert record["error"] == "ValueError: disk full on rank 1"


@pytest.mark.slow
def test_ranks_with_different_masks_fail_the_run(tmp_path: Path) -> None:
    cfg = two_rank_config(tmp_path / "runs")
    with pytest.raises(RankFailed):
        spawn(execute_diverging_masks, 2, "cpu", cfg, 1)
    record = Store(cfg.output.dir).read(cfg.run_id)
    assert record is not None and record["status"] == "failed"
    # BIMP's first prune is at the start of epoch 3; it is caught at that epoch's end.
    assert "masks after epoch 3 differ between ranks" in record["error"]


@pytest.mark.slow
def test_run_with_nproc_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmark.cli import main

    args = ["run", "--set", f"output.dir={str(tmp_path)!r}", "--set", "logging.progress=false"]
    args += [
        "--set",
        "budget.epochs=2",
        "--set",
        "budget.initial_epochs=1",
        "--set",
        "budget.cycles=1",
    ]
    args += ["--set", "runtime.threads=1", "--set", "runtime.device='cpu'", "--json"]
    assert main([*args, "--nproc", "3"]) == 2
    assert "data.batch_size" in capsys.readouterr().err
    assert main([*args, "--nproc", "2"]) == 0
    out = capsys.readouterr().out
    import json

    record = json.loads(out)
    # Whole-batch BatchNorm by default: the one-process experiment, under its run id.
    assert record["distributed"]["processes"] == 2 and record["distributed"]["sync_bn"]
    assert record["run_id"] == load_config(None, [a for a in args if "=" in a]).run_id
    assert record["metrics"]["images_per_s"] > 0


@pytest.mark.slow
def test_two_processes_with_default_settings_train_the_one_process_run(tmp_path: Path) -> None:
    """BIMP on digits: 2 processes with default settings end where 1 process does (to float
    noise: gloo's all-reduce sums in another order); per-process BatchNorm did not."""
    one = two_rank_config(tmp_path / "one", "budget.epochs=3", "budget.cycles=1")
    two = two_rank_config(tmp_path / "two", "budget.epochs=3", "budget.cycles=1")
    assert one.run_id == two.run_id
    execute(one)
    spawn(execute_all, 2, "cpu", [two], {})
    a, b = Store(one.output.dir).read(one.run_id), Store(two.output.dir).read(two.run_id)
    assert a is not None and b is not None and b["distributed"]["sync_bn"]
    # Per-process statistics ended 9.6% apart in training loss on the full digits run.
    ma, mb = a["metrics"], b["metrics"]
    assert mb["train_loss"] == pytest.approx(ma["train_loss"], rel=1e-3)
    for split in ("val", "test"):
        assert mb[split]["loss"] == pytest.approx(ma[split]["loss"], rel=1e-3)
    assert abs(mb["test"]["top1"] - ma["test"]["top1"]) <= 2 / 360  # two test images at most


def test_more_cuda_processes_than_gpus_are_refused_before_any_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from benchmark.training.process_checks import check_gpus

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    check_gpus("cuda", 1)
    check_gpus("cpu", 4)
    for device in ("cuda", "auto", "cuda:0"):
        with pytest.raises(ConfigError) as err:
            check_gpus(device, 2)
        assert err.value.field == "--nproc" and "at most 1" in str(err.value)


# --------------------------------------------------------------------------- launcher


def test_profile_asks_for_one_task_per_gpu_on_several_nodes(tmp_path: Path) -> None:
    from benchmark.launch import load_profile

    old = load_profile("dev")  # written before data-parallel runs: one process per run
    assert old.processes_per_run == 1 and "ntasks_per_node" not in old.executor_parameters()
    profile = load_profile("example-gpu", {"tasks_per_node": 4, "nodes": 2})
    params = profile.executor_parameters()
    assert profile.processes_per_run == 8
    assert params["ntasks_per_node"] == 4 and params["nodes"] == 2
    assert params["gpus_per_task"] == 1 and "--kill-on-bad-exit=1" in params["srun_args"]
    with pytest.raises(ConfigError, match="--nodes"):
        load_profile("dev", {"nodes": 0})


@pytest.mark.slow
def test_a_two_task_submitit_job_trains_one_run_data_parallel(tmp_path: Path) -> None:
    import submitit

    from benchmark.launch.task import GridTask

    cfg = two_rank_config(tmp_path / "runs", "budget.epochs=3", "budget.cycles=1")
    executor = submitit.LocalExecutor(folder=tmp_path / "jobs")
    executor.update_parameters(tasks_per_node=2, timeout_min=10)
    job = executor.submit(GridTask([cfg], threads=1))
    assert job.results() == [{cfg.run_id: "finished"}] * 2
    record = Store(cfg.output.dir).read(cfg.run_id)
    assert record is not None and record["distributed"]["processes"] == 2
