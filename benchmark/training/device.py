"""The run's device: choosing it, seeding every generator, choosing kernels, and waiting for it."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def resolve_device(name: str) -> torch.device:
    """The torch device for ``runtime.device`` ('auto' picks CUDA when available)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def configure_kernels(device: torch.device, deterministic: bool) -> None:
    """Pick reproducible GPU kernels, or the fastest ones (cuDNN autotuning) when not required."""
    # Always set: a CPU run after a deterministic GPU run in one process must not inherit it.
    torch.use_deterministic_algorithms(deterministic and device.type == "cuda")
    if device.type != "cuda":
        return
    if deterministic:
        # cuBLAS needs a fixed workspace to be deterministic; read at its first use.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic


def sync(device: torch.device) -> None:
    """Wait for queued work on ``device`` (a no-op on CPU), so wall-clock timings are real."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
