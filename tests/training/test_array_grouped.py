"""The grouped array layout (one wide model, activations [N, K*C, H, W]) computes what the K
models compute alone, the stacked parameters start aligned, and vmap's BatchNorm takes bf16."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from helpers import tiny_config
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.models.registry import build_model
from benchmark.training.array.check import Comparison, losses
from benchmark.training.array.fit import execute_array
from benchmark.training.array.grouped import grouped_unsupported
from benchmark.training.array.stack import ALIGN, StackedModels, default_layout


@pytest.mark.parametrize(
    ("name", "shape"),
    [("resnet20", (3, 32, 32)), ("cnn_small", (1, 8, 8)), ("resnet18", (3, 16, 16))],
)
def test_the_wide_model_gives_each_run_its_own_outputs_gradients_and_statistics(
    name: str, shape: tuple[int, int, int]
) -> None:
    torch.manual_seed(0)
    models = [build_model(name, 10, shape) for _ in range(3)]
    alone = [copy.deepcopy(m) for m in models]
    x = torch.randn(3, 4, *shape)
    stacked = StackedModels(models, "grouped")
    out = stacked.forward(x)
    expected = torch.stack([model(x[k]) for k, model in enumerate(alone)])
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    out.square().sum().backward()
    expected.square().sum().backward()
    for k, model in enumerate(alone):
        params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
        for n in stacked.names:
            torch.testing.assert_close(
                stacked.leaves[n].grad[k], params[n].grad, rtol=1e-3, atol=1e-4
            )
        for n in stacked.buffer_names:  # running statistics and batch counters, per run
            torch.testing.assert_close(stacked.buffers[n][k], buffers[n], rtol=1e-4, atol=1e-6)
            assert models[k].get_buffer(n).data_ptr() == stacked.buffers[n][k].data_ptr()


def test_in_eval_mode_the_wide_model_uses_each_runs_running_statistics() -> None:
    torch.manual_seed(1)
    models = [build_model("cnn_small", 10, (1, 8, 8)) for _ in range(2)]
    for model in models:  # distinct running statistics per run
        model.train()
        model(torch.randn(8, 1, 8, 8) * (1 + len(model.features)))
    stacked = StackedModels(models, "grouped")
    for model in models:
        model.eval()
    x = torch.randn(2, 5, 1, 8, 8)
    out = stacked.forward(x)
    torch.testing.assert_close(out, torch.stack([m(x[k]) for k, m in enumerate(models)]))


def test_the_grouped_layout_trains_what_vmap_trains(tmp_path: Path) -> None:
    def two(store: str) -> list:
        return [
            tiny_config(
                tmp_path / store,
                "method.name=dense",
                "budget.epochs=1",
                f"seed={s}",
                "runtime.device=cpu",
            )  # fmt: skip
            for s in (0, 1)
        ]

    vmapped = execute_array(two("a"), layout="vmap")
    grouped = execute_array(two("b"), layout="grouped")
    for a, b in zip(vmapped, grouped, strict=True):
        assert isinstance(a, dict) and isinstance(b, dict)
        assert losses(a) == pytest.approx(losses(b), rel=1e-4)
        assert b["metrics"]["array"]["layout"] == "grouped"


def test_a_model_with_an_unknown_module_is_refused_with_its_name() -> None:
    class Shuffle(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.flip(1)  # mixes channels: the wide model would mix runs

    model = nn.Sequential(nn.Conv2d(1, 4, 3), Shuffle(), nn.Flatten(), nn.Linear(144, 2))
    assert "module 1 (Shuffle)" in grouped_unsupported(model)
    with pytest.raises(ConfigError, match="array-layout.*grouped array layout cannot run"):
        StackedModels([model, copy.deepcopy(model)], "grouped")


def test_every_parameter_of_every_run_starts_aligned() -> None:
    # cnn_small's parameter sizes are not multiples of 16 (its BatchNorm has 16, its head 10).
    models = [build_model("cnn_small", 10, (1, 8, 8)) for _ in range(3)]
    stacked = StackedModels(models, "loop")
    assert any(size % ALIGN for size in stacked.sizes)
    for params in stacked.members:
        for p in params:
            assert p.data_ptr() % (ALIGN * p.element_size()) == 0
    # The gaps between parameters are zero and stay out of every run's parameters.
    used = sum(stacked.sizes)
    assert stacked.flat.count_nonzero() <= stacked.k * used


def test_vmaps_batchnorm_computes_in_the_statistics_dtype_and_returns_the_input_dtype() -> None:
    models = [build_model("cnn_small", 10, (1, 8, 8)) for _ in range(2)]
    stacked = StackedModels(models, "vmap")
    bn = stacked.template.features[1]
    bf16 = torch.ones(2, 16, 4, 4, dtype=torch.bfloat16)
    assert stacked._batchnorm_input(bn, (bf16,)) is None  # outside the array's forward: as is
    stacked._vmapping = True
    (cast,) = stacked._batchnorm_input(bn, (bf16,))
    assert cast.dtype == torch.float32
    assert stacked._batchnorm_output(bn, (cast,), bn(cast)).dtype == torch.bfloat16
    stacked._vmapping = False
    # The hooks live only during the array's forward: the run's model keeps none of them.
    stacked.forward(torch.randn(2, 3, 1, 8, 8))
    assert not bn._forward_pre_hooks and not bn._forward_hooks
    assert not any(m._forward_pre_hooks for m in models[0].modules())


def test_the_default_layout_is_grouped_on_a_gpu_for_the_models_it_knows() -> None:
    resnet = build_model("resnet20", 10, (3, 32, 32))
    unknown = nn.Sequential(nn.Conv2d(3, 4, 3), nn.GELU(), nn.Flatten(), nn.Linear(3600, 2))
    assert default_layout("cuda", resnet) == "grouped"
    assert default_layout("cuda", unknown) == "vmap"
    assert default_layout("cpu", resnet) == "loop"


def test_the_test_image_bound_is_one_image_or_the_floors_own_gap() -> None:
    def comparison(images: float, floor_images: float) -> Comparison:
        return Comparison(0.01, 0.015, images, 12, 10, floor_images)

    assert comparison(1, 0).holds()
    assert not comparison(3, 0).holds()  # the floor moved no test image: 3 is too many
    assert comparison(3, 2).holds()  # the runs alone move 2 images with other rounding
    assert not comparison(5, 2).holds()
    assert "floor's 2, bound 4" in comparison(3, 2).text()


def test_a_subclass_of_a_known_layer_is_refused_it_may_have_a_forward_of_its_own() -> None:
    class SyncedBatchNorm(nn.BatchNorm2d):
        pass

    model = build_model("cnn_small", 10, (1, 8, 8))
    model.features[1] = SyncedBatchNorm(16)
    assert "features.1 (SyncedBatchNorm)" in grouped_unsupported(model)
