"""The half precisions a run can train in (``optim.bf16``, ``optim.fp16``) as torch dtypes."""

from __future__ import annotations

import torch

HALF_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype of ``precision`` ("fp32", "bf16" or "fp16"; None for fp32)."""
    return HALF_DTYPES.get(precision)


def half_autocast(device: torch.device, half: torch.dtype | None) -> torch.autocast:
    """Autocast to ``half`` on ``device`` (enabled only when ``half`` is a dtype)."""
    return torch.autocast(device.type, dtype=half or torch.bfloat16, enabled=half is not None)
