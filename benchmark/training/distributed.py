"""Data-parallel runs: one run trained by N processes (torch.distributed; gloo on CPU, NCCL on GPU).

What stays identical to the one-process run (up to floating-point reduction order):

- the global batch: rank r trains on its contiguous slice of every single-process batch, drawn
  from the same ``(seed, epoch)`` generator (:func:`benchmark.data.shard_range`);
- the objective: each rank's loss is scaled by ``n_r * N / m`` (``n_r`` its samples, ``m`` the
  global batch), so the gradient that DistributedDataParallel averages is the gradient of the
  single-process batch mean, also for the smaller last batch of an epoch;
- every pruning decision: all ranks hold the same weights (gradients are all-reduced), the
  methods draw randomness only from seeded generators, and the mask checksums are compared
  across ranks after every epoch (a mismatch fails the run);
- BatchNorm: statistics over the global batch by default (torch's SyncBatchNorm on GPUs, an
  all-reduce implementation on CPUs, where torch's refuses to run), so BN models equal the
  one-process run too. Per-rank statistics (DDP's default; rank 0's running statistics are
  copied to every rank after each epoch) are another experiment: only with
  ``model.batchnorm_processes`` = the process count, which is in the run id.

Rank 0 writes checkpoints, weights and the result; every rank resumes from the same checkpoint;
a failure on any rank is recorded with that rank's error.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch import Tensor, nn

from benchmark.core.errors import ConfigError
from benchmark.training.process_checks import (
    check_batch,
    check_last_batch,
    check_runs_for_processes,
)

# How long a rank waits for the others in one collective before the run fails (a dead peer).
TIMEOUT_S = 600.0


class RankMismatchError(RuntimeError):
    """The ranks of one run disagree about something that must be identical (e.g. masks)."""


# --------------------------------------------------------------------------- the process group


def world_size() -> int:
    """Processes training the current run (1 outside a process group)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's rank in the run (0 outside a process group)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def is_main() -> bool:
    """Whether this process writes the run's files (rank 0, or no process group)."""
    return rank() == 0


def local_rank() -> int:
    """This process's index on its node (``LOCAL_RANK``; 0 when unset)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def barrier() -> None:
    """Wait for every rank (a no-op with one process)."""
    if world_size() > 1:
        dist.barrier()


def backend_for(device: torch.device) -> str:
    """The collective backend for ``device``: NCCL for CUDA, gloo otherwise."""
    return "nccl" if device.type == "cuda" else "gloo"


def init_from_env(device: torch.device, timeout_s: float = TIMEOUT_S) -> None:
    """Join the process group described by RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT."""
    import datetime

    if device.type == "cuda":
        torch.cuda.set_device(_local_gpu())
    dist.init_process_group(
        backend_for(device),
        init_method="env://",
        timeout=datetime.timedelta(seconds=timeout_s),
    )


def shutdown() -> None:
    """Leave the process group (if this process joined one)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def rank_device(device: torch.device) -> torch.device:
    """The device of this rank: ``cuda`` means ``cuda:LOCAL_RANK`` in a data-parallel run."""
    if device.type == "cuda" and device.index is None and world_size() > 1:
        return torch.device("cuda", _local_gpu())
    return device


def _local_gpu() -> int:
    """This rank's GPU index among the visible ones (one visible GPU per task: 0)."""
    return local_rank() % max(torch.cuda.device_count(), 1)


def free_port() -> int:
    """A TCP port that was free a moment ago (for a local rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- BatchNorm


class GlobalBatchNorm2d(nn.BatchNorm2d):
    """BatchNorm over the global batch of all ranks, by differentiable all-reduces (CPU too).

    torch's SyncBatchNorm runs on GPUs only; this is the same computation for gloo. Mean and
    variance are computed in two passes (sum, then sum of squared deviations) like BatchNorm's
    own kernels, so values match the one-process layer up to rounding.
    """

    def forward(self, x: Tensor) -> Tensor:
        """Normalise with the global batch statistics while training; as BatchNorm otherwise."""
        if not (self.training and world_size() > 1):
            return super().forward(x)
        dims = [0, 2, 3]
        count = torch.tensor([x.numel() // x.shape[1]], dtype=x.dtype, device=x.device)
        totals = dist_fn.all_reduce(torch.cat([x.sum(dims), count]))
        n = totals[-1]
        mean = totals[:-1] / n
        centred = x - mean[None, :, None, None]
        var = dist_fn.all_reduce((centred * centred).sum(dims)) / n
        out = centred * torch.rsqrt(var + self.eps)[None, :, None, None]
        if self.affine:
            out = out * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        if self.track_running_stats and self.running_mean is not None:
            self._update_running(mean.detach(), var.detach(), n.detach())
        return out

    def _update_running(self, mean: Tensor, var: Tensor, n: Tensor) -> None:
        assert self.running_mean is not None and self.running_var is not None
        assert self.num_batches_tracked is not None
        self.num_batches_tracked.add_(1)
        momentum = self.momentum
        if momentum is None:  # cumulative moving average, as in BatchNorm
            momentum = 1.0 / float(self.num_batches_tracked)
        unbiased = var * n / (n - 1).clamp(min=1)
        with torch.no_grad():
            self.running_mean.lerp_(mean, momentum)
            self.running_var.lerp_(unbiased, momentum)


def convert_sync_bn(model: nn.Module, device: torch.device) -> nn.Module:
    """BatchNorm layers with global batch statistics: SyncBatchNorm on GPUs, GlobalBatchNorm2d
    on CPUs (same parameters, buffers and state-dict keys, so weights load either way)."""
    if device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(model)
    for module in model.modules():
        if type(module) is nn.BatchNorm2d:
            # Same object, new class: the parameters the masks and optimizer hold stay valid.
            module.__class__ = GlobalBatchNorm2d
    return model


# --------------------------------------------------------------------------- training helpers


@dataclass
class DataParallel:
    """What the trainer asks of a data-parallel run; every call is a no-op with one process."""

    world: int = 1
    rank: int = 0
    sync_bn: bool = False
    _ddp: nn.Module | None = None
    _ddp_params: tuple[int, ...] = ()
    checks: int = 0  # epochs whose masks were compared across ranks

    @classmethod
    def current(cls, sync_bn: bool) -> DataParallel:
        """The data-parallel context of this process (one process when no group exists)."""
        return cls(world=world_size(), rank=rank(), sync_bn=sync_bn)

    @property
    def active(self) -> bool:
        """Whether more than one process trains the run."""
        return self.world > 1

    def shard(self, data: Any) -> None:
        """Give this rank its slice of every batch of ``data`` (a DataSource); refuse batches
        that the processes cannot share (ConfigError naming data.batch_size)."""
        if not self.active:
            return
        # Only classification sources slice their batches and splits per process; mIoU and BLEU
        # are not sums over samples either.
        if getattr(data, "task", "classification") != "classification":
            raise ConfigError(
                "--nproc", self.world, f"1 for data.name = {data.name!r} (a {data.task} dataset)"
            )
        check_batch(data.batch_size, self.world)
        check_last_batch(data.num_train, data.batch_size, self.world)
        smallest = min(data.num_train, data.num_val, data.num_test)
        if smallest < self.world:
            raise ConfigError(
                "data", smallest, f"splits of at least {self.world} samples (one per process)"
            )
        data.shard = (self.rank, self.world)

    def prepare_model(self, model: nn.Module, device: torch.device) -> nn.Module:
        """Convert BatchNorm layers to whole-batch statistics unless the run normalises per
        process (``sync_bn`` False; before masks and optimizer exist)."""
        if self.active and self.sync_bn:
            return convert_sync_bn(model, device)
        return model

    def wrap(self, model: nn.Module) -> nn.Module:
        """The module to call for training forward passes (DDP around ``model`` when active).

        Wrapped again when the trainable parameters changed (a method removed its
        reparametrization at its final prune), since DDP fixes its parameter set.
        """
        if not self.active:
            return model
        params = tuple(id(p) for p in model.parameters() if p.requires_grad)
        if self._ddp is None or params != self._ddp_params:
            from torch.nn.parallel import DistributedDataParallel

            device = next(model.parameters()).device
            # Buffers are copied from rank 0 once per epoch instead (sync_buffers); newer torch
            # renamed the option.
            names = inspect.signature(DistributedDataParallel.__init__).parameters
            new = "forward_sync_buffers"
            no_sync = new if new in names else "broadcast_buffers"
            self._ddp = DistributedDataParallel(
                model,
                device_ids=[device] if device.type == "cuda" else None,
                **{no_sync: False},
            )
            self._ddp_params = params
        return self._ddp

    def loss_scale(self, step_in_epoch: int, local: int, num_train: int, batch: int) -> float:
        """Factor on this rank's mean loss so that DDP's average is the global batch mean."""
        if not self.active:
            return 1.0
        global_batch = min(batch, num_train - step_in_epoch * batch)
        return local * self.world / global_batch

    def reduce_epoch(
        self, loss_sum: Tensor, seen: int, images: int, seconds: float
    ) -> tuple[Tensor, int, int, float]:
        """Global loss sum, samples and timed images (sums) and timed seconds (slowest rank)."""
        if not self.active:
            return loss_sum, seen, images, seconds
        # On the device: NCCL reduces device tensors only.
        device = loss_sum.device
        sums = torch.tensor([float(loss_sum), seen, images], dtype=torch.float64, device=device)
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(sums)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        total = sums.to(loss_sum.dtype)[0]
        return total, int(sums[1]), int(sums[2]), float(slowest)

    def combine_eval(
        self, result: dict[str, float], part: tuple[int, int], device: torch.device
    ) -> dict[str, float]:
        """The whole split's metrics from each process's metrics on its ``part`` of it."""
        if not self.active:
            return result
        keys = sorted(k for k in result if k != "n")  # "n" (examples) sums: the total below
        count = part[1] - part[0]
        sums = torch.tensor(
            [result[k] * count for k in keys] + [count], dtype=torch.float64, device=device
        )
        dist.all_reduce(sums)
        total = float(sums[-1])
        out = {}
        for i, key in enumerate(keys):
            value = float(sums[i])
            # Accuracies are counts of hits: round away the division's rounding.
            out[key] = (value if key == "loss" else round(value)) / total
        return out | ({"n": round(total)} if "n" in result else {})

    def sync_buffers(self, model: nn.Module) -> None:
        """Copy rank 0's buffers (BatchNorm running statistics) to every rank."""
        if not self.active:
            return
        for buf in model.buffers():
            dist.broadcast(buf, 0)

    def check_same(self, tensors: Iterable[Tensor], what: str) -> None:
        """Raise RankMismatchError on every rank unless ``tensors`` are identical on all ranks."""
        if not self.active:
            return
        digest = checksum(tensors)
        digests: list[Any] = [None] * self.world
        dist.all_gather_object(digests, digest)
        self.checks += 1
        if len(set(digests)) != 1:
            detail = ", ".join(f"rank {r}: {d[:12]}" for r, d in enumerate(digests))
            raise RankMismatchError(f"{what} differ between ranks ({detail})")

    def info(self, device: torch.device) -> dict[str, Any]:
        """The record's description of who trained the run: processes, devices and nodes."""
        local = (socket.gethostname(), str(device))
        everyone: list[Any] = [local]
        if self.active:
            everyone = [None] * self.world
            dist.all_gather_object(everyone, local)
        return {
            "processes": self.world,
            "devices": len(set(map(tuple, everyone))),
            "nodes": len({host for host, _ in everyone}),
            "backend": dist.get_backend() if self.active else None,
            "sync_bn": self.sync_bn and self.active,
            "rank_checks": self.checks,
        }


def checksum(tensors: Iterable[Tensor]) -> str:
    """A SHA-1 over the bytes of ``tensors`` (on the CPU), in order."""
    h = hashlib.sha1()
    for t in tensors:
        h.update(t.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def broadcast_value(value: Any) -> Any:
    """Rank 0's ``value`` on every rank (a picklable object)."""
    if world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, 0)
    return box[0]


# --------------------------------------------------------------------------- SLURM jobs


def _job_tasks() -> int:
    """Tasks of the submitit job this process belongs to (1 outside a job)."""
    import submitit

    try:
        return int(submitit.JobEnvironment().num_tasks)
    except (RuntimeError, KeyError):  # not inside a submitit job
        return 1


def _device_of(name: str) -> torch.device:
    """``runtime.device`` resolved without a process group ('auto' -> CUDA when available)."""
    cuda = name.startswith("cuda") or (name == "auto" and torch.cuda.is_available())
    return torch.device("cuda" if cuda else "cpu")


@contextmanager
def job_process_group(configs: Sequence[Any]) -> Iterator[bool]:
    """Inside a submitit job of several tasks, join them in one process group (yields True).

    The rendezvous comes from the SLURM environment (submitit's TorchDistributedEnvironment:
    first node's host, a port derived from the job id, ranks from SLURM_PROCID). Outside such a
    job nothing happens and it yields False.
    """
    import submitit

    tasks = _job_tasks()
    if tasks <= 1:
        yield False
        return
    device = check_runs_for_processes(configs, tasks)
    # Each task may see only its own GPU (SLURM's --gpus-per-task): keep CUDA_VISIBLE_DEVICES.
    submitit.helpers.TorchDistributedEnvironment().export(
        set_cuda_visible_devices=False, overwrite=True
    )
    init_from_env(_device_of(device))
    try:
        yield True
    finally:
        shutdown()


# --------------------------------------------------------------------------- local launches


class RankFailed(RuntimeError):
    """A rank of a local data-parallel run raised; carries that rank's error."""


def _local_worker(
    index: int, nproc: int, port: int, device: str, fn: Callable[..., Any], args: tuple[Any, ...]
) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(index),
        WORLD_SIZE=str(nproc),
        LOCAL_RANK=str(index),
        LOCAL_WORLD_SIZE=str(nproc),
    )
    init_from_env(_device_of(device))
    try:
        fn(*args)
    finally:
        shutdown()


def spawn(fn: Callable[..., Any], nproc: int, device: str, *args: Any) -> None:
    """Call ``fn(*args)`` in ``nproc`` new processes that form one process group (like torchrun).

    ``device`` is the runs' ``runtime.device`` (it picks NCCL or gloo). Blocks until every
    process is done; raises RankFailed with the first failing rank's error (the others are
    stopped).
    """
    import torch.multiprocessing as mp

    if nproc < 1:
        raise ConfigError("--nproc", nproc, "an integer >= 1")
    worker_args = (nproc, free_port(), device, fn, args)
    try:
        mp.start_processes(_local_worker, args=worker_args, nprocs=nproc, start_method="spawn")
    except mp.ProcessRaisedException as err:
        raise RankFailed(f"rank {err.error_index} failed:\n{err}") from None
    except mp.ProcessExitedException as err:
        raise RankFailed(f"rank {err.error_index} exited with code {err.exit_code}") from None
