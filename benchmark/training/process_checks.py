"""Checks, before any process starts, that runs can train with N processes: the batch split,
the BatchNorm grouping the run id states, one device, enough GPUs. Raises ConfigError naming the
field and what it allows. Imports no torch at module level (the command line runs these checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmark.core.errors import ConfigError, check


def check_batch(batch_size: int, nproc: int, field: str = "data.batch_size") -> None:
    """Refuse a global batch that ``nproc`` processes cannot share equally (ConfigError)."""
    if nproc < 1:
        raise ConfigError("--nproc", nproc, "an integer >= 1")
    if batch_size % nproc:
        raise ConfigError(
            field, batch_size, f"a multiple of the {nproc} processes (each takes batch/{nproc})"
        )


def check_last_batch(num_train: int, batch_size: int, nproc: int) -> None:
    """Refuse an epoch whose last batch has fewer samples than processes (a rank would idle)."""
    last = num_train % batch_size
    if 0 < last < nproc:
        raise ConfigError(
            "data.batch_size",
            batch_size,
            f"a batch size whose last batch of the {num_train} training samples has at least "
            f"{nproc} samples (it has {last}), so that every process gets one",
        )


def check_batchnorm_processes(batchnorm_processes: int, sync_bn: bool | None, nproc: int) -> None:
    """Refuse a BatchNorm grouping the run id would not state (ConfigError): per-process
    statistics need ``model.batchnorm_processes`` = ``nproc``, which is in the id."""
    check(
        nproc == 1 or sync_bn is not False or batchnorm_processes > 1,
        "runtime.sync_bn",
        sync_bn,
        f"true or unset (whole-batch BatchNorm, the one-process experiment); for BatchNorm per "
        f"process set model.batchnorm_processes = {nproc}: it is in the run id, so the result "
        "is never taken for the one-process run's",
    )
    check(
        batchnorm_processes in (1, nproc),
        "model.batchnorm_processes",
        batchnorm_processes,
        f"1 (whole-batch BatchNorm) or the processes training the run ({nproc} here)",
    )


def check_runs_for_processes(configs: Sequence[Any], nproc: int) -> str:
    """Check that every run of ``configs`` can train with ``nproc`` processes (batch split,
    BatchNorm statistics) and that they share one device; return that device."""
    for cfg in configs:
        check_batch(cfg.data.batch_size, nproc)
        check_batchnorm_processes(cfg.model.batchnorm_processes, cfg.runtime.sync_bn, nproc)
    devices = {cfg.runtime.device for cfg in configs}
    if len(devices) != 1:
        raise ConfigError("runtime.device", sorted(devices), "one device for the runs of a job")
    return devices.pop()


def check_gpus(device: str, nproc: int) -> None:
    """Refuse more CUDA processes than GPUs before any starts (NCCL needs one GPU each)."""
    import torch

    on_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    count = torch.cuda.device_count() if on_cuda else 0
    if on_cuda and nproc > count:
        raise ConfigError(
            "--nproc",
            nproc,
            f"at most {count}, the GPUs of this machine (NCCL needs one GPU per process); "
            "runtime.device = 'cpu' trains CPU processes (gloo)",
        )
