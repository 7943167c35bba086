"""Named pretrained weights (issue 25.1): the segmentation and translation problems start from
pretrained networks named in the run id, found in the local caches (never downloaded), checked
against the hash in their file name, with a clear error naming the missing file.

The stand-in files are in the real formats: ``torch.save`` of a torchvision ResNet state dict
(fc head included) in the torch hub's checkpoints folder, and a transformers ``save_pretrained``
folder laid out as the Hugging Face Hub cache keeps it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from benchmark.config.run import run_identity
from benchmark.core.errors import ConfigError
from benchmark.experiments import get_experiment
from benchmark.models import pretrained as named
from benchmark.models.registry import build_model
from benchmark.models.segmentation import tiny_resnet
from benchmark.training.validation import load_config

RESNET50 = "torchvision:ResNet50_Weights.IMAGENET1K_V1"


@pytest.fixture
def torch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty TORCH_HOME (torch.hub reads it at every call)."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    return tmp_path / "torch" / "hub" / "checkpoints"


def _save_tiny_resnet(folder: Path, stem: str) -> tuple[Path, dict[str, torch.Tensor]]:
    """A tiny ResNet's state dict saved as torchvision ships weights: ``<stem>-<sha[:8]>.pth``."""
    torch.manual_seed(0)
    state = tiny_resnet().state_dict()
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "partial.pth"
    torch.save(state, tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    path = folder / f"{stem}-{digest[:8]}.pth"
    tmp.rename(path)
    return path, state


@pytest.mark.parametrize(
    ("table", "weights"),
    [
        ("appendix-schedule-comparison-coco-deeplab", RESNET50),
        (
            "appendix-schedule-comparison-cityscapes-pspnet",
            "torchvision:ResNet101_Weights.IMAGENET1K_V1",
        ),
        ("appendix-schedule-comparison-wmt-t5", "hf:t5-small"),
    ],
)
def test_segmentation_and_translation_runs_and_their_parents_start_pretrained(
    table: str, weights: str, tmp_path: Path
) -> None:
    from methods import get_method

    runs = get_experiment(table).runs("paper", tmp_path)
    assert runs
    for run in runs:
        assert run.cfg.model.pretrained == weights
        parent = get_method(run.cfg.method.name)(run.cfg).parent_config()
        assert parent is not None and parent.model.pretrained == weights
    # The name, not a path of this machine, is what the run id hashes.
    assert run_identity(runs[0].cfg)["model"]["pretrained"] == weights


def test_a_torchvision_name_is_the_torch_hub_file_and_a_missing_one_says_how_to_get_it(
    torch_home: Path,
) -> None:
    file = named.named_file(RESNET50)
    assert file.path == torch_home / "resnet50-0676ba61.pth"
    assert file.hash_prefix == "0676ba61"
    with pytest.raises(ConfigError) as err:
        named.require_available(RESNET50)
    message = str(err.value)
    assert err.value.field == "model.pretrained"
    assert "resnet50-0676ba61.pth" in message and str(torch_home) in message
    assert "get_weight('ResNet50_Weights.IMAGENET1K_V1').get_state_dict()" in message
    assert "TORCH_HOME" in message


@pytest.mark.parametrize(
    "bad", ["torchvision:NoSuchWeights.V1", "torchvision:", "hf:", "hf:not a repo!", "tv:x"]
)
def test_malformed_or_unknown_names_are_refused_when_planning(bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"model.pretrained={bad!r}"])
    assert err.value.field == "model.pretrained"


def test_a_named_weight_plans_without_its_file(torch_home: Path) -> None:
    # Planning (e.g. on a login node) needs no weights: only the run that loads them does.
    cfg = load_config(None, [f"model.pretrained={RESNET50!r}"])
    assert cfg.model.pretrained == RESNET50


def test_a_stand_in_in_the_real_format_loads_into_the_backbone(
    torch_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, state = _save_tiny_resnet(torch_home, "tiny_resnet")
    name = "test:tiny_resnet"
    monkeypatch.setitem(named.EXTRA_WEIGHTS, name, f"https://example.invalid/{path.name}")
    model = build_model("deeplabv3_tiny", 5, (3, 24, 24), pretrained=name)
    loaded = model.backbone.state_dict()
    assert len(loaded) == len([k for k in state if not k.startswith("fc.")])
    for key, value in loaded.items():
        assert torch.equal(value, state[key]), key


def test_a_different_file_under_the_real_name_is_refused(torch_home: Path) -> None:
    # A stand-in saved under resnet50-0676ba61.pth is not torchvision's file: its hash says so.
    path, _ = _save_tiny_resnet(torch_home, "stand_in")
    path.rename(torch_home / "resnet50-0676ba61.pth")
    with pytest.raises(ConfigError) as err:
        build_model("deeplabv3_tiny", 5, (3, 24, 24), pretrained=RESNET50)
    assert "0676ba61" in str(err.value) and "SHA-256" in str(err.value)


def _hf_stand_in(cache: Path, repo: str) -> dict[str, torch.Tensor]:
    """A tiny T5 ``save_pretrained`` folder in the Hub cache layout (refs/main -> snapshot)."""
    torch.manual_seed(0)
    model = build_model("t5_tiny", 128, (1, 1, 1))
    folder = cache / f"models--{repo.replace('/', '--')}"
    revision = "0" * 40
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(revision)
    model.save_pretrained(folder / "snapshots" / revision)
    return model.state_dict()


def test_an_hf_name_loads_from_the_local_hub_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    cache = tmp_path / "hf"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    with pytest.raises(ConfigError) as err:
        build_model("t5_tiny", 128, (1, 1, 1), pretrained="hf:t5-small")
    assert str(cache / "models--t5-small") in str(err.value)
    assert "from_pretrained('t5-small')" in str(err.value)
    state = _hf_stand_in(cache, "t5-small")
    torch.manual_seed(1)  # a different random init, replaced by the cached weights
    model = build_model("t5_tiny", 128, (1, 1, 1), pretrained="hf:t5-small")
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key


def test_a_run_without_its_named_weights_fails_before_writing_anything(
    torch_home: Path, tmp_path: Path
) -> None:
    from benchmark.training.preflight import check_weights
    from benchmark.training.runner import execute

    store = tmp_path / "runs"
    dense = load_config(
        None,
        [
            "method.name=dense",
            f"model.pretrained={RESNET50!r}",
            f"output.dir={str(store)!r}",
        ],
    )
    with pytest.raises(ConfigError) as err:
        execute(dense)
    assert "resnet50-0676ba61.pth" in str(err.value)
    assert not [p for p in store.rglob("*") if p.is_file()] if store.exists() else True
    # A child starts from its parent's weights: it does not need the file itself.
    child = load_config(
        None,
        ["method.name=imp", f"model.pretrained={RESNET50!r}", f"output.dir={str(store)!r}"],
    )
    check_weights(child)
