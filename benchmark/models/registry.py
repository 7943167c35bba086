"""The model registry: builders by name, the datasets each model fits, initialisation and
pretrained weights.

Every builder takes ``(num_classes, input_shape)`` with ``input_shape = (C, H, W)`` (no batch
dimension) and returns a freshly initialised ``nn.Module``.

Initialisation (``model.init``, applied by :func:`build_model`):

* ``"default"`` (the default): every model keeps the initialisation its constructor gives it, as
  in the paper's code (ZIB-IOL/BIMP), which builds its models without re-initialising them.

  - ResNet-20/32/44/56/110, ResNet-18, VGG-16, WRN-28-10 and the small CNN get PyTorch's default:
    Conv2d/Linear weights Kaiming-uniform with ``a = sqrt(5)``, i.e. U(-b, b) with
    ``b = 1/sqrt(fan_in)`` (std ``1/sqrt(3 fan_in)``), biases U(-b, b); BatchNorm weight 1,
    bias 0. The reference defines ResNet-56, ResNet-18 and WRN-28-10 exactly so; the other
    depths of the CIFAR ResNet share ResNet-56's code, and VGG-16 and the small CNN (which the
    reference does not define) follow the same rule so that every hand-built model trains alike.
  - ResNet-50 and MaxViT-T get torchvision's own initialisation (the reference builds ResNet-50
    with ``torchvision.models.resnet50`` too).

* ``"he_normal"``: He et al. (2015) normal, fan_in with the ReLU gain (std ``sqrt(2/fan_in)``,
  about 2.45x the default) on every Conv2d/Linear, zero biases, BatchNorm as the identity. It is
  what ShrinkBench's CIFAR ResNets (which ResNet-56 comes from) apply and what prunebench used
  before; a reasonable choice of its own, kept as an option. Behind BatchNorm its larger weights
  mean a smaller effective learning rate early on and larger initial logits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from benchmark.core.errors import ConfigError
from benchmark.core.files import CorruptFileError, load_checkpoint
from benchmark.core.registry import Registry
from benchmark.models.pretrained import (
    HF,
    hf_cache,
    hf_repo,
    is_named,
    require_available,
    validate_named,
    verified_path,
)

InputShape = tuple[int, int, int]


ModelBuilder = Callable[[int, InputShape], nn.Module]


MODELS: Registry[ModelBuilder] = Registry("model")


# Models that work on some datasets only: name -> the registered datasets they accept.
MODEL_DATASETS: dict[str, tuple[str, ...]] = {"maxvit_t": ("imagenet",)}


# Datasets that need models of their own task: name -> the models that can train on it.
DATASET_MODELS: dict[str, tuple[str, ...]] = {}


# Models built from a local folder alone (``model.pretrained``): name -> loader(folder, dtype),
# dtype a torch dtype name ("float32", "bfloat16", "float16") the weights are loaded in.
FOLDER_MODELS: dict[str, Callable[[str, str], nn.Module]] = {}
# Models whose CUDA backward has no deterministic kernel (bilinear upsampling): name -> why.
CUDA_NONDETERMINISTIC: dict[str, str] = {}


def validate_model_determinism(model: str, device: str, deterministic: bool) -> None:
    """Refuse ``runtime.deterministic`` for a model torch cannot train deterministically on CUDA
    (torch would raise at the first backward, after the data is loaded and a record written)."""
    reason = CUDA_NONDETERMINISTIC.get(model)
    if not deterministic or reason is None:
        return
    on_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if on_cuda:
        raise ConfigError(
            "runtime.deterministic",
            True,
            f"false for model.name = {model!r} on CUDA ({reason}); or runtime.device = 'cpu'",
        )


def validate_model_data(model: str, data: str) -> None:
    """Raise ConfigError("model.name", ...) when ``model`` cannot train on dataset ``data``."""
    needed = DATASET_MODELS.get(data)
    if needed is not None and model not in needed:
        raise ConfigError("model.name", model, f"a model for data.name = {data!r}: {needed}")
    allowed = MODEL_DATASETS.get(model)
    if allowed is not None and data not in allowed:
        datasets = ", ".join(repr(d) for d in allowed)
        raise ConfigError(
            "model.name",
            model,
            f"a model for data.name = {data!r} ({model} needs data.name in {datasets})",
        )


# The values of ``model.init`` (see the module docstring).
MODEL_INITS: tuple[str, ...] = ("default", "he_normal")


def build_model(
    name: str,
    num_classes: int,
    input_shape: InputShape,
    init: str = "default",
    pretrained: str = "",
    dtype: str = "float32",
) -> nn.Module:
    """Build the registered model ``name`` initialised by ``init`` (one of :data:`MODEL_INITS`),
    then with the weights of the local checkpoint ``pretrained`` when given, in ``dtype`` (a
    folder model is loaded in it directly, so a large one is never held in float32).

    Unknown names raise ConfigError("model.name", ...), unknown inits ConfigError("model.init").
    """
    validate_model_init(init)
    builder = MODELS.get(name, "model.name")
    if name in FOLDER_MODELS:
        return FOLDER_MODELS[name](pretrained, dtype)
    model = builder(num_classes, tuple(input_shape))
    if init == "he_normal":
        kaiming_init(model)
    if pretrained:
        load_pretrained(model, pretrained)
    if dtype != "float32":
        model.to(getattr(torch, dtype))
    return model


def validate_model_init(init: str) -> None:
    """Raise ConfigError("model.init", ...) unless ``init`` is one of :data:`MODEL_INITS`."""
    if init not in MODEL_INITS:
        raise ConfigError("model.init", init, MODEL_INITS)


def validate_pretrained(value: str) -> None:
    """Raise ConfigError("model.pretrained", ...) unless ``value`` is '', an existing path or a
    well-formed weight name (:mod:`benchmark.models.pretrained`; its file is checked when a run
    that loads it starts, not when it is planned)."""
    if is_named(value):
        validate_named(value)
    elif value and not Path(value).exists():
        raise ConfigError(
            "model.pretrained",
            value,
            "an existing checkpoint (a torchvision state-dict file or a transformers "
            "save_pretrained folder), a named weight ('torchvision:<Enum>.<Value>', "
            "'hf:<repo id>'), or '' for random initialisation",
        )


def load_pretrained(model: nn.Module, value: str | Path) -> None:
    """Load local weights into ``model`` (no download).

    ``value`` is a path or a name (:mod:`benchmark.models.pretrained`: a ``torchvision:`` name
    is the checked file in the torch hub cache, an ``hf:`` name the model in the local Hugging
    Face cache). A folder is a transformers ``save_pretrained`` checkpoint of the model's own
    class. A file is a torch state dict of the whole model or, for a model with a ``backbone``
    (torchvision's segmentation models), of the backbone's classifier network (e.g. an ImageNet
    ResNet; its ``fc`` head is dropped). Missing or mismatching weights raise ConfigError.
    """
    source = str(value)
    validate_pretrained(source)
    try:
        if source.startswith(HF):
            require_available(source)  # the clear message, before transformers' own
            cls = type(model)
            loaded = cls.from_pretrained(  # type: ignore[attr-defined]
                hf_repo(source), cache_dir=str(hf_cache()), local_files_only=True
            )
            state = loaded.state_dict()
        else:
            path = verified_path(source) if is_named(source) else Path(source)
            if path.is_dir():
                state = type(model).from_pretrained(str(path)).state_dict()  # type: ignore[attr-defined]
            else:
                state = load_checkpoint(
                    path
                )  # no code runs; any unreadable file is CorruptFileError
        if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
            state = state["model"]  # torchvision's reference scripts save {"model": ...}
        target = model
        if not _matches(model, state) and hasattr(model, "backbone"):
            target = model.backbone
            state = {k: v for k, v in state.items() if not k.startswith("fc.")}
        target.load_state_dict(state)
    except ConfigError:
        raise  # already names the file and what to do
    except CorruptFileError as err:
        raise ConfigError(
            "model.pretrained", source, f"a torch state-dict file ({err.reason})"
        ) from None
    except (OSError, RuntimeError, ValueError, AttributeError, KeyError) as err:
        raise ConfigError(
            "model.pretrained", source, f"weights that fit {type(model).__name__} ({err})"
        ) from None


def _matches(model: nn.Module, state: dict) -> bool:
    """Whether ``state`` holds every entry of ``model``'s state dict."""
    return set(model.state_dict()) <= set(state)


def kaiming_init(model: nn.Module) -> nn.Module:
    """Apply He (Kaiming) normal initialisation to convs/linears; BN starts as the identity."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d | nn.Linear):
            # fan_in with the ReLU gain, as in He et al. (2015) and ShrinkBench's CIFAR ResNets.
            nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d | nn.BatchNorm1d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    return model
