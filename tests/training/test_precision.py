"""``optim.fp16``: float16 activations beside bfloat16, refused together, in the run id, and a
precision of its own wherever runs are grouped by precision (arrays, cost estimates)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config

from benchmark.core.errors import ConfigError
from benchmark.launch.estimate import workload
from benchmark.training.array.fit import array_key
from benchmark.training.runner import execute
from benchmark.training.trainer import Trainer

DENSE = ["method.name=dense", "budget.epochs=1", "runtime.device=cpu"]


def test_fp16_trains_under_float16_autocast_and_is_its_own_run(tmp_path: Path) -> None:
    half = tiny_config(tmp_path, *DENSE, "optim.fp16=true")
    plain = tiny_config(tmp_path, *DENSE)
    bf16 = tiny_config(tmp_path, *DENSE, "optim.bf16=true")
    assert len({half.run_id, plain.run_id, bf16.run_id}) == 3
    trainer = Trainer(half)
    assert trainer.half is torch.float16
    with trainer._autocast:
        assert torch.get_autocast_dtype("cpu") == torch.float16
    record = execute(half)
    assert record["status"] == "finished" and record["metrics"]["test"]["top1"] > 0.3


def test_bf16_and_fp16_together_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"optim\.fp16.*one half"):
        Trainer(tiny_config(tmp_path, *DENSE, "optim.fp16=true", "optim.bf16=true"))


def test_precisions_never_share_an_array_or_a_cost_estimate(tmp_path: Path) -> None:
    cfgs = [tiny_config(tmp_path, *DENSE, *extra) for extra in ([], ["optim.bf16=true"],
                                                                  ["optim.fp16=true"])]  # fmt: skip
    assert len({array_key(c) for c in cfgs}) == 3
    assert [workload(c).precision for c in cfgs] == ["fp32", "bf16", "fp16"]
