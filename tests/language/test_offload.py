"""Half precision and layer-by-layer offload of language models, on the CPU: an offloaded run
computes every decoder layer only while it holds that layer alone, and gives the same masks and
perplexities as the model kept whole; bf16 perplexity is within 1% of fp32."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from benchmark.config.parse import config_from_dict
from benchmark.core.errors import ConfigError
from benchmark.pruning.offload import Placement, decoder_layers
from benchmark.training.trainer import Trainer
from benchmark.training.validation import validate


def lm_cfg(model: dict | None = None, runtime: dict | None = None, **method: object):
    cfg = config_from_dict(
        {
            "data": {
                "name": "pydoc",
                "max_length": 32,
                "batch_size": 4,
                "eval_batch_size": 64,
                "epoch_iters": 3,
            },
            "model": {"name": "llama_tiny", **(model or {})},
            "optim": {"name": "adamw", "weight_decay": 0.0},
            "budget": {"epochs": 1},
            "method": {"name": "sparsegpt", "sparsity": 0.5, "calibration_samples": 8, **method},
            "runtime": {"device": "cpu", "threads": 1, **(runtime or {})},
            "logging": {"progress": False},
        }
    )
    validate(cfg)
    return cfg


class FakeDevice(Placement):
    """An offloaded placement on the CPU that counts what is "on the device": the decoder layers
    fetched and not yet released. A linear map of a decoder layer that computes without its
    layer fetched fails the run (a forward pre-hook), as it would on a GPU with the layer in
    host memory."""

    def __init__(self) -> None:
        super().__init__("cpu", offload=True)
        self.held: set[int] = set()
        self.most = 0
        self.fetched = 0
        self.homed: list[int] = []  # layers fetched so far when each mask went home

    def place(self, model: nn.Module) -> None:
        for layer in decoder_layers(model):
            for linear in layer.modules():
                if isinstance(linear, nn.Linear):
                    linear.register_forward_pre_hook(lambda *_, at=layer: self._check(at))

    def _check(self, layer: nn.Module) -> None:
        if self.offload and id(layer) not in self.held:
            raise AssertionError("a decoder layer computed while in host memory")

    def fetch(self, layer: nn.Module) -> None:
        self.held.add(id(layer))
        self.most = max(self.most, len(self.held))
        self.fetched += 1

    def release(self, layer: nn.Module) -> None:
        self.held.discard(id(layer))

    def to_home(self, tensor: torch.Tensor) -> torch.Tensor:
        assert not self.held  # a layer's masks go home with it, not after the whole model
        self.homed.append(self.fetched)
        return tensor

    def end_offload(self, model: nn.Module) -> None:
        self.offload = False


@pytest.mark.parametrize("retrain", ["none", "perp"])
def test_offloaded_run_holds_one_layer_at_a_time_and_gives_the_same_result(retrain: str) -> None:
    cfg = lm_cfg(runtime={"offload": "off"}, retrain=retrain)
    torch.manual_seed(0)
    whole = Trainer(cfg)
    device = FakeDevice()
    torch.manual_seed(0)
    offloaded = Trainer(cfg, placement=device)
    layers = len(decoder_layers(offloaded.model))
    # Calibration, pruning and the evaluation after the prune ran layer by layer.
    assert device.most == 1 and device.fetched >= 2 * layers
    assert not device.held
    # Each layer's masks left the device as its layer did.
    assert len(device.homed) == len(offloaded.ctx.masks.params) and min(device.homed) == 1
    for a, b in zip(whole.ctx.masks.masks, offloaded.ctx.masks.masks, strict=True):
        assert torch.equal(a, b) and a.dtype == torch.bool
    got, want = offloaded.fit(), whole.fit()
    assert got is not None and want is not None
    assert got["test"]["ppl"] == want["test"]["ppl"]
    assert got["oneshot"] == want["oneshot"]
    assert got["offloaded"] and not want["offloaded"]
    if retrain == "none":  # the final evaluation and MAC count ran offloaded as well
        assert device.offload and got["speedup"] == want["speedup"]


def test_offload_on_runs_the_layer_by_layer_path_on_the_cpu() -> None:
    from benchmark.pruning import layerwise

    calls = []
    real = layerwise.layerwise_logits

    def counting(*args, **kwargs):
        calls.append(1)
        yield from real(*args, **kwargs)

    layerwise.layerwise_logits = counting
    try:
        metrics = Trainer(lm_cfg(runtime={"offload": "on"}, name="wanda")).fit()
    finally:
        layerwise.layerwise_logits = real
    assert metrics is not None and metrics["offloaded"] and calls
    # "auto" on a CPU: nothing to offload to; the run id is the same either way.
    auto = lm_cfg(runtime={"offload": "auto"}, name="wanda")
    assert Trainer(auto).placement.offload is False  # type: ignore[union-attr]
    assert auto.run_id == lm_cfg(runtime={"offload": "on"}, name="wanda").run_id


def _trained_parent() -> dict[str, torch.Tensor]:
    """A tiny Llama trained for 60 iterations (a perplexity far below the vocabulary's 256)."""
    cfg = config_from_dict(
        {
            "data": {"name": "pydoc", "max_length": 32, "batch_size": 16, "epoch_iters": 60},
            "model": {"name": "llama_tiny"},
            "optim": {"name": "adamw", "weight_decay": 0.0},
            "schedule": {"name": "linear", "lr": 0.003},
            "budget": {"epochs": 1},
            "method": {"name": "dense"},
            "runtime": {"device": "cpu", "threads": 1},
            "logging": {"progress": False},
        }
    )
    trainer = Trainer(cfg)
    trainer.fit()
    return trainer.final_weights()


def test_bf16_perplexity_within_one_percent_of_fp32_and_the_run_id_says_which() -> None:
    parent = _trained_parent()
    results = {}
    for dtype in ("float32", "bfloat16"):
        cfg = lm_cfg(model={"dtype": dtype}, name="wanda")
        trainer = Trainer(cfg, parent_state=parent)
        weights = trainer.ctx.masks.params
        assert all(w.dtype == getattr(torch, dtype) for w in weights)
        results[dtype] = trainer.fit()
    fp32, bf16 = results["float32"]["test"]["ppl"], results["bfloat16"]["test"]["ppl"]
    assert fp32 < 100  # trained: far from the uniform 256
    assert bf16 != fp32 and abs(bf16 - fp32) / fp32 < 0.01
    assert results["bfloat16"]["sparsity"] == pytest.approx(0.5, abs=1e-3)
    default = lm_cfg(name="wanda")
    assert default.run_id == lm_cfg(model={"dtype": "float32"}, name="wanda").run_id
    assert default.run_id != lm_cfg(model={"dtype": "bfloat16"}, name="wanda").run_id


def test_half_precision_retraining_keeps_trained_parameters_in_float32() -> None:
    trainer = Trainer(lm_cfg(model={"dtype": "bfloat16"}, retrain="perp", adapter="masklora"))
    trained = [p for g in trainer.optimizer.param_groups for p in g["params"]]
    assert trained and all(p.dtype == torch.float32 for p in trained)
    frozen = [w for w in trainer.ctx.masks.params]
    assert all(w.dtype == torch.bfloat16 and not w.requires_grad for w in frozen)
    masks = [m.clone() for m in trainer.ctx.masks.masks]
    metrics = trainer.fit()
    assert metrics is not None
    # The result is a bfloat16 model with exactly the one-shot mask.
    assert {p.dtype for p in trainer.model.parameters()} == {torch.bfloat16}
    for w, m in zip(trainer.ctx.masks.params, masks, strict=True):
        assert torch.equal(w != 0, m)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"model": {"name": "cnn_small", "dtype": "bfloat16"}, "method": {"name": "dense"}},
         "model.dtype"),
        ({"model": {"dtype": "float16"}, "method": {"retrain": "perp"}}, "model.dtype"),
        ({"model": {"dtype": "float16"}, "optim": {"bf16": True}}, "model.dtype"),
    ],
)  # fmt: skip
def test_half_precision_that_cannot_work_is_refused_by_name(overrides: dict, field: str) -> None:
    data = {
        "data": {"name": "pydoc"},
        "model": {"name": "llama_tiny"},
        "method": {"name": "wanda", "sparsity": 0.5},
    }
    for section, values in overrides.items():
        data[section] = {**data.get(section, {}), **values}
    if data["model"]["name"] == "cnn_small":
        data["data"] = {"name": "digits"}
    with pytest.raises(ConfigError) as err:
        validate(config_from_dict(data))
    assert err.value.field == field
