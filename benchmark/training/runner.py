"""Run one config end to end: dense parent, training, resume, result and weights in the store."""

from __future__ import annotations

import contextlib
import platform
import socket
import subprocess
import time
import traceback
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from benchmark.config.parse import config_to_dict
from benchmark.config.run import RunConfig, run_identity
from benchmark.core.errors import ConfigError
from benchmark.core.files import CorruptFileError, finite_json, load_checkpoint
from benchmark.measure.run_latency import measure_after_training
from benchmark.store.records import check_record
from benchmark.store.results import (
    FAILED,
    FINISHED,
    ResultExistsError,
    RunLockedError,
    Store,
    StoreWarning,
)
from benchmark.training.distributed import (
    barrier,
    broadcast_value,
    is_main,
    rank,
    spawn,
    world_size,
)
from benchmark.training.preflight import check_before_compute
from benchmark.training.process_checks import (
    check_batchnorm_processes,
    check_gpus,
    check_runs_for_processes,
)
from methods import get_method


class ResumeError(RuntimeError):
    """``--resume`` was asked for but there is no checkpoint to resume from."""


def environment(device: torch.device | str) -> dict[str, Any]:
    """Package versions, device and git commit, recorded in every result."""
    import numpy
    import torchvision

    dev = torch.device(device)
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "device": str(dev),
        "threads": torch.get_num_threads(),
    }
    if dev.type == "cuda":
        info["device_name"] = torch.cuda.get_device_name(dev)
    info["cpu_name"] = cpu_name()
    info["git_commit"] = _git_commit()
    return info


def cpu_name() -> str:
    """The processor's model ("AMD EPYC 9654"): /proc/cpuinfo's model name on Linux, else what
    ``platform`` knows (``processor()``, at worst the architecture)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model") and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def parent_weights(cfg: RunConfig, store: Store) -> tuple[str | None, Any]:
    """Train (once) or load the dense parent of ``cfg``; returns (parent run id, state dict)."""
    parent = get_method(cfg.method.name)(cfg).parent_config()
    if parent is None:
        return None, None
    pid = parent.run_id
    weights = store.weights_path(pid)
    if not store.is_finished(pid):
        execute(parent, wait_for_lock=True)
    elif not weights.exists():
        # The parent's result survived but its weights did not: train it again (the old result
        # goes to archive/), since a child can only start from those weights.
        warnings.warn(
            f"dense parent {pid} has finished but its weights {weights} are missing; "
            "training it again",
            StoreWarning,
            stacklevel=2,
        )
        execute(parent, force=True, wait_for_lock=True)
    try:
        return pid, load_checkpoint(weights)
    except CorruptFileError as err:
        raise CorruptFileError(
            err.path,
            f"{err.reason}; the weights of dense parent {pid} are unusable: delete the file and "
            f"rerun the parent (prunebench run --force with its config) to train them again",
        ) from None


def execute(
    cfg: RunConfig,
    *,
    force: bool = False,
    require_resume: bool = False,
    wait_for_lock: bool = False,
) -> dict[str, Any]:
    """Run ``cfg`` (resuming from its checkpoint when one exists) and store the result.

    Configuration errors, found before training (values, the device, the store, the prunable
    set), write nothing, not even the store's folder. The run holds a lock for its run id: a
    second process asking for the same run gets RunLockedError ("already running"), or waits
    with ``wait_for_lock``.
    """
    made = _missing_folders(Path(cfg.output.dir))
    try:
        return _execute(
            cfg, force=force, require_resume=require_resume, wait_for_lock=wait_for_lock
        )
    except ConfigError:
        # Found after the store folder was created (the checks that need the data or the
        # model): the empty folders go too.
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: something else is there now
                folder.rmdir()
        raise


def _missing_folders(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    return missing


def _execute(
    cfg: RunConfig, *, force: bool, require_resume: bool, wait_for_lock: bool
) -> dict[str, Any]:
    check_before_compute(cfg)
    check_batchnorm_processes(cfg.model.batchnorm_processes, cfg.runtime.sync_bn, world_size())
    store = Store(cfg.output.dir)
    rid = cfg.run_id
    # Data-parallel runs: rank 0 holds the lock and writes; the others only read.
    lock = store.lock(f"run-{rid}", wait=wait_for_lock) if is_main() else None
    try:
        held = lock.__enter__() if lock is not None else None
    except RunLockedError as err:
        raise RunLockedError(f"run {rid} is already running: {err}") from None
    try:
        if is_main():
            store.check_lock("store")  # a FIFO there would stop the final write: say so now
            store.clean_run_files(rid)
        barrier()  # every rank sees the same store from here on
        return _execute_locked(cfg, store, force=force, require_resume=require_resume)
    except ConfigError:
        # Some checks need the data or the model (the warm-up in iterations, the prunable
        # set): found under the lock, they still leave nothing behind, not even its file.
        if held is not None:
            held.discard()
        raise
    finally:
        if lock is not None:
            lock.__exit__(None, None, None)


def _execute_locked(
    cfg: RunConfig, store: Store, *, force: bool, require_resume: bool
) -> dict[str, Any]:
    session = begin(cfg, store, force=force, require_resume=require_resume)
    if not isinstance(session, Session):
        return session  # finished before
    try:
        metrics = session.trainer.fit()
    except Exception as err:
        session.fail(err)
        raise
    return session.finish(metrics)


@dataclass
class Session:
    """A run between its start (trainer built, resumed) and its stored result.

    :func:`begin` opens it; training is the trainer's (``trainer.fit()``, or its step generator
    driven with other runs', :mod:`benchmark.training.packing`); :meth:`finish` writes the
    finished record and weights, :meth:`fail` the failure record.
    """

    cfg: RunConfig
    store: Store
    trainer: Any
    parent_id: str | None
    resumed: bool
    started: float
    force: bool
    # The stored record this run started from (a forced rerun replaces only that one).
    replaces: dict[str, Any] | None = None

    def fail(self, err: BaseException) -> None:
        """Record ``err`` as the run's failure (a configuration error leaves no record)."""
        if not isinstance(err, ConfigError):
            _write_failure(self.store, self.cfg, err, self.started)

    def finish(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """Check and store the finished run (record, final weights); returns the record."""
        cfg, trainer, store, rid = self.cfg, self.trainer, self.store, self.cfg.run_id
        try:
            logger = _wandb_logger(cfg, rid) if is_main() else None
            if logger is not None:
                for entry in trainer.state.history:
                    logger.log(_flat_numbers(entry), step=entry["epoch"])
                logger.summary.update(_flat_numbers(metrics))
                logger.finish()
            _check_goal(cfg, metrics)
            distributed = trainer.dp.info(trainer.device)
        except Exception as err:
            self.fail(err)
            raise
        record = {
            "run_id": rid,
            "status": FINISHED,
            "method": cfg.method.name,
            "parent_run_id": self.parent_id,
            "config": config_to_dict(cfg),
            "identity": run_identity(cfg),
            "task": trainer.task.name,
            "metrics": metrics,
            "history": trainer.state.history,
            "resumed": self.resumed,
            "environment": environment(trainer.device),
            "distributed": distributed,
            "started": self.started,
            "finished": time.time(),
        }
        # The store's own reading of the record: what it would refuse is a bug here, not there.
        check_record(finite_json(record), rid)
        if is_main():
            # The first finished result wins even where locks fail: a forced rerun replaces only
            # the result it started from; a result that comes second is archived with its weights.
            store.write_result(
                record, trainer.final_weights(), force=self.force, replaces=self.replaces
            )
            store.checkpoint_path(rid).unlink(missing_ok=True)
            measure_after_training(cfg)  # only with latency.measure (grids' [latency], --set)
        barrier()  # the result and weights exist for every rank (children load the weights)
        return record


def begin(
    cfg: RunConfig, store: Store, *, force: bool = False, require_resume: bool = False
) -> Session | dict[str, Any]:
    """Start ``cfg`` under its lock: its finished record when it has one (and not ``force``),
    else a :class:`Session` with its trainer built, from its checkpoint when it has one."""
    rid = cfg.run_id
    ckpt_path = store.checkpoint_path(rid)
    existing = store.read(rid)
    if existing is not None and existing.get("status") == FINISHED and not force:
        if is_main():
            ckpt_path.unlink(missing_ok=True)  # left behind by a kill after the result was written
        return existing
    if require_resume and not ckpt_path.exists():
        raise ResumeError(f"run {rid} has no checkpoint at {ckpt_path} to resume from")
    if force and not require_resume and is_main():
        ckpt_path.unlink(missing_ok=True)
    started = broadcast_value(time.time())  # also: no rank reads the checkpoint before this
    try:
        pid, parent_state = parent_weights(cfg, store)
        trainer, resumed = _trainer(cfg, ckpt_path, parent_state)
    except ConfigError:
        raise  # a configuration error is the caller's to fix; it leaves no record
    except Exception as err:
        _write_failure(store, cfg, err, started)
        raise
    return Session(cfg, store, trainer, pid, resumed, started, force, existing)


def _trainer(cfg: RunConfig, ckpt_path: Path, parent_state: Any) -> tuple[Any, bool]:
    """A Trainer resumed from the run's checkpoint if it has a usable one."""
    from benchmark.training.trainer import CheckpointDiscarded, Trainer

    trainer = Trainer(cfg, ckpt_path, parent_state)
    try:
        return trainer, trainer.try_resume()
    except CheckpointDiscarded:
        return Trainer(cfg, ckpt_path, parent_state), False


class SparsityGoalMissed(RuntimeError):
    """A sparsity-specifiable method ended below its goal sparsity; never a finished result."""


# Measured sparsity may fall short of the goal by rounding (an entry) and nothing more.
SPARSITY_TOLERANCE = 1e-3


def _check_goal(cfg: RunConfig, metrics: dict[str, Any]) -> None:
    """Raise SparsityGoalMissed when a method that specifies its sparsity did not reach it."""
    method = get_method(cfg.method.name)
    # Structured (filter) pruning sets the fraction of filters, not of weights over P.
    structured = bool(getattr(cfg.method.params, "structured", False))
    if not method.info.sparsity_specifiable or structured:
        return
    goal, measured = cfg.method.sparsity, float(metrics.get("sparsity", 0.0))
    # Counting as the paper's code did (int(s N) for DNW) may fall one weight short of round(s N).
    tolerance = max(SPARSITY_TOLERANCE, 1.0 / max(int(metrics.get("num_prunable", 0)), 1))
    if measured < goal - tolerance:
        raise SparsityGoalMissed(
            f"measured sparsity {measured:.6f} misses the goal method.sparsity = {goal}"
        )


def failure_record(cfg: RunConfig, err: BaseException) -> dict[str, Any]:
    """The record of a run that raised ``err``: its config, the error and the traceback tail."""
    return {
        "run_id": cfg.run_id,
        "status": FAILED,
        "method": cfg.method.name,
        "config": config_to_dict(cfg),
        "error": f"{type(err).__name__}: {err}",
        "traceback": traceback.format_exc().splitlines()[-20:],
        "finished": time.time(),
    }


def _write_failure(store: Store, cfg: RunConfig, err: BaseException, started: float) -> None:
    """Record the failure; in a data-parallel run the failing rank writes it, with its rank
    (the first failure of an attempt is kept: the others are usually its consequences)."""
    existing = store.read(cfg.run_id)
    if existing is not None and existing.get("status") == FINISHED:
        return
    if existing is not None and "rank" in existing and existing.get("started") == started:
        return
    record = {**failure_record(cfg, err), "started": started}
    if world_size() > 1:
        record.update(rank=rank(), processes=world_size())
    with contextlib.suppress(ResultExistsError):  # a finished result appeared meanwhile
        store.write(record)


def _flat_numbers(data: dict[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat_numbers(value, f"{name}/"))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = value
    return out


def _wandb_logger(cfg: RunConfig, rid: str) -> Any:
    """An optional Weights & Biases run (offline by default); None when disabled."""
    if not cfg.logging.wandb or cfg.logging.wandb_mode == "disabled":
        return None
    import wandb

    return wandb.init(
        project=cfg.logging.wandb_project,
        mode=cfg.logging.wandb_mode,
        id=rid,
        name=rid,
        resume="allow",
        dir=str(Path(cfg.output.dir)),
        config=config_to_dict(cfg),
    )


# --------------------------------------------------------------------------- local launches


def execute_all(configs: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """Every rank's job in :func:`run_local`: execute the runs in order."""
    for cfg in configs:
        execute(cfg, **kwargs)


def run_local(configs: Sequence[Any], nproc: int, **kwargs: Any) -> None:
    """Train ``configs`` one after the other, each with ``nproc`` processes on this machine.

    ``kwargs`` go to :func:`execute` on every rank; rank 0 writes each result to the store.
    Raises RankFailed with the first failing rank's error.
    """
    device = check_runs_for_processes(configs, nproc)
    check_gpus(device, nproc)
    spawn(execute_all, nproc, device, list(configs), kwargs)
