"""Run one config end to end: dense parent, training, resume, result and weights in the store."""

from __future__ import annotations

import platform
import socket
import subprocess
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from benchmark.checkpoint import load_checkpoint, save_checkpoint
from benchmark.config import RunConfig, canonical_dict, config_to_dict, validate
from benchmark.distributed import barrier, broadcast_value, is_main, rank, world_size
from benchmark.store import FAILED, FINISHED, Store
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
    info["git_commit"] = _git_commit()
    return info


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
    if not store.is_finished(pid) or not store.weights_path(pid).exists():
        execute(parent)
    return pid, load_checkpoint(store.weights_path(pid))


def execute(cfg: RunConfig, *, force: bool = False, require_resume: bool = False) -> dict[str, Any]:
    """Run ``cfg`` (resuming from its checkpoint when one exists) and store the result."""
    from benchmark.trainer import Trainer

    validate(cfg)
    store = Store(cfg.output.dir)
    rid = cfg.run_id
    existing = store.read(rid)
    if existing is not None and existing.get("status") == FINISHED and not force:
        return existing
    ckpt_path = store.checkpoint_path(rid)
    if force and not require_resume and is_main():
        ckpt_path.unlink(missing_ok=True)
    if require_resume and not ckpt_path.exists():
        raise ResumeError(f"run {rid} has no checkpoint at {ckpt_path} to resume from")
    # Data-parallel runs: every rank sees the same store from here on, and rank 0 writes.
    started = broadcast_value(time.time())
    try:
        pid, parent_state = parent_weights(cfg, store)
        trainer = Trainer(cfg, ckpt_path, parent_state)
        resumed = trainer.try_resume()
        logger = _wandb_logger(cfg, rid) if is_main() else None
        metrics = trainer.fit()
        if logger is not None:
            for entry in trainer.state.history:
                logger.log(_flat_numbers(entry), step=entry["epoch"])
            logger.summary.update(_flat_numbers(metrics))
            logger.finish()
        distributed = trainer.dp.info(trainer.device)
    except Exception as err:
        _write_failure(store, cfg, err, started)
        raise
    record = {
        "run_id": rid,
        "status": FINISHED,
        "method": cfg.method.name,
        "parent_run_id": pid,
        "config": config_to_dict(cfg),
        "identity": canonical_dict(cfg),
        "metrics": metrics,
        "history": trainer.state.history,
        "resumed": resumed,
        "environment": environment(trainer.device),
        "distributed": distributed,
        "started": started,
        "finished": time.time(),
    }
    if is_main():
        save_checkpoint(trainer.final_weights(), store.weights_path(rid))
        store.write(record, force=force)
        ckpt_path.unlink(missing_ok=True)
    barrier()  # the result and weights exist for every rank (children load the weights)
    return record


def _write_failure(store: Store, cfg: RunConfig, err: BaseException, started: float) -> None:
    """Record the failure; in a data-parallel run the failing rank writes it, with its rank
    (the first failure of an attempt is kept: the others are usually its consequences)."""
    existing = store.read(cfg.run_id)
    if existing is not None and existing.get("status") == FINISHED:
        return
    if existing is not None and "rank" in existing and existing.get("started") == started:
        return
    record = {
        "run_id": cfg.run_id,
        "status": FAILED,
        "method": cfg.method.name,
        "config": config_to_dict(cfg),
        "error": f"{type(err).__name__}: {err}",
        "traceback": traceback.format_exc().splitlines()[-20:],
        "started": started,
        "finished": time.time(),
    }
    if world_size() > 1:
        record["rank"] = rank()
        record["processes"] = world_size()
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
