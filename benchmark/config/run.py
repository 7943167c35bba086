"""The run configuration: one typed dataclass per ``[section]`` of a run's TOML, and the run's
identity (a stable id hashed from what changes its result).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import typing
from dataclasses import dataclass, field, fields
from typing import Any

from benchmark.config.method_registry import changed_marks, get_method, method_params_class
from benchmark.core.errors import check as check


@dataclass
class DataConfig:
    """Which dataset to train on and how to batch it."""

    name: str = "digits"
    root: str = "data"
    download: bool = False
    check_integrity: bool = True
    batch_size: int = 64
    eval_batch_size: int = 1024
    val_fraction: float = 0.1
    split_seed: int = 0
    workers: int = 4
    # ImageNet: "pil" decodes in loader workers; "gpu" decodes on the run's device (nvJPEG).
    loader: str = "pil"
    # Segmentation: training crop side in pixels (0: the dataset's own, e.g. 480 for COCO).
    crop_size: int = 0
    # Translation: the part of a pass over the training data that one epoch is (1/k).
    epoch_fraction: float = 1.0
    # Translation: token limit of sources, targets and generated translations (the paper: 128).
    # Language modelling: the sequence length of every training, calibration and test window.
    max_length: int = 128
    # Language modelling: a transformers tokenizer folder (usually the model's own, or "hf:<repo>"
    # in the local Hub cache), or bytes (256 ids, what the embedded default and the tiny models
    # use). Unset: bytes for the tiny models, model.pretrained's folder for causal_lm (parse).
    tokenizer: str = ""
    # Language modelling: the references' slow tokenizer (use_fast=False; see
    # benchmark.data.lm_tokenizer) instead of the folder's fast one.
    slow_tokenizer: bool = False
    # Language modelling, retraining windows: "random" (a random window of a random document
    # longer than a window, SparseGPT's get_c4) or "documents" (PERP: each document's first
    # max_length tokens in a seeded shuffled order, padded, the padding left out of the loss).
    train_windows: str = "random"
    # Language modelling: training iterations per epoch (0: one pass over the training
    # windows), so that a retraining budget is budget.epochs * epoch_iters iterations.
    epoch_iters: int = 0


@dataclass
class ModelConfig:
    """Which architecture to build and how to initialise it (see models.py)."""

    name: str = "cnn_small"
    # "default": each model's own constructor (PyTorch's/torchvision's), as the paper's code;
    # "he_normal": He-normal convs/linears, zero biases.
    init: typing.Literal["default", "he_normal"] = "default"
    # A local checkpoint in the library's own format (a torchvision state dict file, a
    # transformers save_pretrained folder); empty: random initialisation.
    pretrained: str = ""
    # BatchNorm's batch statistics: 1 = over the whole batch, whatever number of processes
    # trains the run (the one-process experiment); N > 1 = over each of N data-parallel
    # processes' share of it (DDP's per-process BatchNorm, a different experiment: it is in
    # the run id, and such a run must be trained by exactly N processes).
    batchnorm_processes: int = 1
    # Language models: the precision the weights are loaded, evaluated and pruned in (calibration
    # statistics stay in float64, SparseGPT's update in float32). With a half precision a
    # retraining run keeps its trained parameters in float32 and runs the forward pass under
    # autocast to this precision (mixed precision).
    dtype: typing.Literal["float32", "bfloat16", "float16"] = "float32"


@dataclass
class OptimConfig:
    """Optimizer hyperparameters and loss options."""

    # "sgd" (the paper's), or "adamw" (language models; momentum and nesterov are then unused).
    name: typing.Literal["sgd", "adamw"] = "sgd"
    momentum: float = 0.9
    # Unset: as the paper's code, Nesterov exactly when weight_decay > 0 (see use_nesterov).
    nesterov: bool | None = None
    weight_decay: float = 5e-4
    label_smoothing: float = 0.0
    grad_clip: float = 0.0
    # Half-precision activations under autocast (weights, BatchNorm statistics and the
    # optimizer stay fp32): bfloat16, or float16 (its wider mantissa rounds less; its narrow
    # range has no loss scaling here, so small gradients may underflow). At most one of them.
    bf16: bool = False
    fp16: bool = False

    def precision(self) -> str:
        """The training precision: "bf16", "fp16" or "fp32"."""
        return "bf16" if self.bf16 else "fp16" if self.fp16 else "fp32"

    def use_nesterov(self) -> bool:
        """Whether SGD uses Nesterov momentum: ``nesterov`` when set, else the paper's rule.

        The paper's code (ZIB-IOL/BIMP) builds SGD with ``nesterov = weight_decay > 0``, which
        is every run of the paper; momentum 0 leaves nothing for Nesterov to act on.
        """
        if self.nesterov is not None:
            return self.nesterov
        return self.weight_decay > 0 and self.momentum > 0


@dataclass
class ScheduleConfig:
    """The original (dense training) learning-rate schedule."""

    name: str = "linear"
    lr: float = 0.1
    milestones: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    warmup_epochs: float = 0.0


@dataclass
class BudgetConfig:
    """Epoch budget: total epochs T, BIMP's initial epochs T0 and prune-retrain cycles J."""

    epochs: int = 10
    initial_epochs: int = 0
    cycles: int = 1


@dataclass
class EvalConfig:
    """Evaluation options."""

    val_every: int = 1
    # Language models: zero-shot tasks of lm-evaluation-harness (the optional extra .[llm]) run
    # on the final model: lm-eval task names ("boolq", "arc_easy", ...; their data from the
    # local Hugging Face datasets cache), task YAML files, or the shipped "pydoc_cloze".
    zero_shot: list[str] = field(default_factory=list)
    # Requests per forward pass of the zero-shot evaluation (padding only: results agree to
    # float noise).
    zero_shot_batch_size: int = 32


@dataclass
class LoggingConfig:
    """Progress and optional Weights & Biases logging (never required)."""

    progress: bool = True
    wandb: bool = False
    wandb_project: str = "prunebench"
    wandb_mode: str = "offline"


# The store's folder when neither a config nor a command names one.
DEFAULT_STORE = "results/runs"


@dataclass
class OutputConfig:
    """Where results and checkpoints go."""

    dir: str = DEFAULT_STORE


@dataclass
class RuntimeConfig:
    """Where and how the run executes; never part of the run id."""

    device: str = "auto"
    threads: int = 0
    # Bitwise-reproducible GPU kernels (slower): same seed, same result, and a resumed run equal
    # to an uninterrupted one. CPU runs are reproducible either way.
    deterministic: bool = False
    # Data-parallel runs: BatchNorm statistics over the global batch (SyncBatchNorm). Unset:
    # as model.batchnorm_processes says (whole batch by default); true agrees only with
    # model.batchnorm_processes = 1; false (per-process statistics) only with
    # model.batchnorm_processes = the process count, so that the run id says so. No effect
    # with one process.
    sync_bn: bool | None = None
    # The training step on CUDA replayed as captured CUDA graphs (benchmark.training.fast_step):
    # "auto" captures wherever it can (one CUDA process, a method whose hooks are graph-safe) and
    # says in one warning line why not otherwise; "off" steps eagerly as on the CPU.
    cuda_graphs: typing.Literal["auto", "off"] = "auto"
    # Conv weights and inputs in NHWC memory layout: "auto" for convolutional models on CUDA
    # (where it is faster), "on" also on the CPU, "off" never. Results agree to float noise.
    channels_last: typing.Literal["auto", "on", "off"] = "auto"
    # STR, CS and DST: every layer's reparametrized weight from one pass over all of P
    # ("batched": a few dozen kernels per iteration instead of ~20 per layer, which on a GPU
    # cost more than the convolutions) or layer by layer ("per-layer"). Results agree to float
    # noise (the extra parameters' gradients are summed in another order).
    reparam: typing.Literal["batched", "per-layer"] = "batched"
    # Language models: keep the model in host memory and move one decoder layer at a time to
    # the device for calibration, pruning and evaluation (as SparseGPT and Wanda prune 70B models
    # on one GPU). "auto": when the weights do not fit the device's free memory; "on", "off".
    offload: typing.Literal["auto", "on", "off"] = "auto"
    # Language models: recompute each decoder layer's activations in the backward pass of
    # retraining instead of keeping them ("auto": on CUDA). The same result, less memory.
    grad_checkpointing: typing.Literal["auto", "on", "off"] = "auto"
    # An array's captured step (benchmark.training.array) compiled with torch.compile, so that
    # Inductor fuses each BatchNorm with its ReLU and residual add: "on" for every captured
    # array step, "auto" on CUDA for the grouped layout, "off" (the default until the compiled
    # step has run through the harness on a GPU: its bare step measured 1.34x the uncompiled
    # one, ResNet-56, K = 32, bf16 on an H200). About a minute of compiling when an array
    # starts, counted as capture, not training. Results agree to float noise (on the CPU).
    compile: typing.Literal["auto", "on", "off"] = "off"


@dataclass
class LatencyConfig:
    """Measure the real inference speedup right after training; never part of the run id.

    With ``measure`` the job that trains a run times it at once, as ``prunebench latency`` does
    (:mod:`benchmark.measure.run_latency`), and keeps ``metrics.latency`` /
    ``metrics.measured_speedup``.
    """

    measure: bool = False
    device: str = "auto"
    batches: list[int] = field(default_factory=lambda: [1, 64])
    warmup: int = 10
    repeats: int = 50


@dataclass
class MethodConfig:
    """The pruning method, its goal sparsity and its typed hyperparameters."""

    name: str = "dense"
    sparsity: float = 0.9
    exclude: list[str] = field(default_factory=list)
    params: Any = None


@dataclass
class FinetuneConfig:
    """Optional post-training retraining with FT (the paper uses 30 epochs); 0 disables it."""

    epochs: int = 0


@dataclass
class RunConfig:
    """Everything that defines one run; its run id excludes logging/output/runtime/latency."""

    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    method: MethodConfig = field(default_factory=MethodConfig)
    finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    latency: LatencyConfig = field(default_factory=LatencyConfig)

    @property
    def run_id(self) -> str:
        """The stable identity of this run (see :func:`run_id`)."""
        return run_id(self)


# Longer than any real training budget; larger values only exhaust memory (schedule arrays).
MAX_EPOCHS = 10_000


MAX_THREADS = 1024


SECTIONS: dict[str, type] = {
    f.name: typing.get_type_hints(RunConfig)[f.name] for f in fields(RunConfig) if f.name != "seed"
}


# Sections that change where or how a run executes, never what it computes.
NON_IDENTITY_SECTIONS = frozenset({"logging", "output", "runtime", "latency"})


# Keys that say where and how the files are read, not what the run computes: the same run on a
# cluster whose data lives elsewhere keeps its id (and is found by the tables that plan it).
# Loader workers change nothing either: every augmentation draw is seeded per item.
NON_IDENTITY_KEYS: dict[str, frozenset[str]] = {
    "data": frozenset({"root", "download", "check_integrity", "workers"})
}


METHOD_COMMON_KEYS = ("name", "sparsity", "exclude")


# Immutable leaves of a config: shared by copies, never copied.
_ATOMS = (int, float, str, bool, type(None))
_ATOM_TYPES = frozenset(_ATOMS)


def _plain(value: Any) -> Any:
    """``value`` with dataclasses as dicts and lists/dicts copied (what asdict gives)."""
    if isinstance(value, _ATOMS):
        return value
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return fields_dict(value)
    return value


def fields_dict(obj: Any) -> dict[str, Any]:
    """``dataclasses.asdict(obj)`` without its deep copy of every leaf: a run id hashes ~7 of
    these per run, and asdict made a paper-scale plan's ids cost seconds."""
    return {
        f.name: v if type(v := getattr(obj, f.name)) in _ATOM_TYPES else _plain(v)
        for f in dataclass_fields(type(obj))
    }


def copy_value(value: Any) -> Any:
    """A deep copy of a config or any value in it (``copy.deepcopy`` costs ~20x more for the
    flat dataclasses of a config, and a paper-scale plan copies thousands)."""
    kind = type(value)
    if kind in _ATOM_TYPES:
        return value
    if kind is dict:  # (a dict subclass is deep-copied below)
        return {k: v if type(v) in _ATOM_TYPES else copy_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return kind(v if type(v) in _ATOM_TYPES else copy_value(v) for v in value)
    names = _dataclass_names(kind)
    if names is not None:
        new = _shallow_copy(value)
        for name in names:
            item = getattr(value, name)
            if type(item) not in _ATOM_TYPES:
                object.__setattr__(new, name, copy_value(item))
        return new
    return copy.deepcopy(value)


@functools.cache
def _dataclass_names(cls: type) -> tuple[str, ...] | None:
    """The field names of dataclass ``cls``; None when it is no dataclass."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in fields(cls))


def _shallow_copy(obj: Any) -> Any:
    """``copy.copy(obj)``; for a plain instance (attributes in its ``__dict__``, no copy hooks)
    without copy's generic reduce protocol, which was half the cost of copying a config."""
    if not _plain_instances(type(obj)):
        return copy.copy(obj)
    new = object.__new__(type(obj))
    new.__dict__.update(obj.__dict__)
    return new


@functools.cache
def _plain_instances(cls: type) -> bool:
    """Whether ``copy.copy`` of a ``cls`` instance is a new instance with the same ``__dict__``."""
    hooks = ("__copy__", "__setstate__", "__reduce__", "__getnewargs__", "__getnewargs_ex__")
    return (
        not hasattr(cls, "__slots__")
        and cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
        and not any(hasattr(cls, h) for h in hooks if h != "__reduce__")
    )


@functools.cache
def dataclass_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    """``dataclasses.fields(cls)``, cached (it costs 0.2 ms a call)."""
    return fields(cls)


@functools.cache
def _defaults(cls: type) -> dict[str, Any]:
    """The field values of ``cls()`` (read only: shared by every call)."""
    return fields_dict(cls())


def _method_to_dict(method: MethodConfig) -> dict[str, Any]:
    out = {k: getattr(method, k) for k in METHOD_COMMON_KEYS}
    if method.params is not None:
        out.update(fields_dict(method.params))
    return out


def canonical_dict(cfg: RunConfig) -> dict[str, Any]:
    """The identity of a run: its config without non-identity sections and default values."""
    out: dict[str, Any] = {}
    if cfg.seed != RunConfig.seed:
        out["seed"] = cfg.seed
    for name, cls in SECTIONS.items():
        if name in NON_IDENTITY_SECTIONS:
            continue
        section = getattr(cfg, name)
        skip = NON_IDENTITY_KEYS.get(name, frozenset())
        if name == "budget":
            # Budget fields a method does not use (e.g. T0 for GMP) are not part of its identity.
            used = get_method(cfg.method.name).budget_fields
            items = [(k, getattr(section, k)) for k in _field_names(section) if k in used]
            defaults = _defaults(cls)
        elif name == "method":
            # Likewise the [method] keys it ignores (the goal sparsity of CS, STR and DST).
            skip = skip | get_method(cfg.method.name).ignored_fields()
            items = _method_items(section)
            defaults = _method_defaults(_params_class(section))
        else:
            items = [(k, getattr(section, k)) for k in _field_names(section)]
            defaults = _defaults(cls)
        diff = _changed(items, defaults, skip)
        if diff:
            out[name] = diff
    return out


def _field_names(obj: Any) -> tuple[str, ...]:
    """The field names of dataclass instance ``obj``, in order."""
    names = _dataclass_names(type(obj))
    if names is None:
        raise TypeError(f"{type(obj).__qualname__} is not a dataclass")
    return names


def _changed(
    items: list[tuple[str, Any]], defaults: dict[str, Any], skip: frozenset[str]
) -> dict[str, Any]:
    """The plain values of ``items`` that differ from ``defaults``, but those named in ``skip``
    (the leaves are made plain only where they are not atoms: most fields of a run are)."""
    out: dict[str, Any] = {}
    for key, value in items:
        if key in skip:
            continue
        if type(value) not in _ATOM_TYPES:
            value = _plain(value)
        if defaults.get(key, _MISSING) != value:
            out[key] = value
    return out


def _method_items(method: MethodConfig) -> list[tuple[str, Any]]:
    """The [method] keys and values, hyperparameters flattened in (as :func:`_method_to_dict`)."""
    items = {k: getattr(method, k) for k in METHOD_COMMON_KEYS}
    if method.params is not None:
        params = method.params
        items.update((k, getattr(params, k)) for k in _field_names(params))
    return list(items.items())


_MISSING = object()


def _params_class(method: MethodConfig) -> type:
    """The class of the method's hyperparameters (the parsed params' own class)."""
    if dataclasses.is_dataclass(method.params) and not isinstance(method.params, type):
        return type(method.params)
    return method_params_class(method.name)


@functools.cache
def _method_defaults(params: type) -> dict[str, Any]:
    """The [method] keys at their defaults for hyperparameter class ``params`` (read only)."""
    defaults = _method_to_dict(MethodConfig(params=params()))
    defaults["name"] = None  # the method name is always part of the identity
    return defaults


# Version of what a config computes, hashed into every run id. Bump it when a default changes
# what runs compute without a new field (ids of results stored before must never match runs of
# the new code). 1 (implicit, not hashed): up to He-normal init, plain momentum and the standard
# WRN-28-10; 2: the paper's code's PyTorch-default init, Nesterov and WRN-28-10, and every
# method's defaults as the paper's code ran them (GMP soft with the paper's step labels, LC's
# constant decay, GSM/LC ranking BatchNorm parameters too, CS/DST's doubled decay, BatchNorm
# recomputed after the final prune, BIMP's fresh optimizer at the first cycle, filter pruning
# masking the BatchNorm behind a dropout, i.e. WRN's bn2); 3: pruning counts as the paper's
# code counted them (method.counting = "reference": DNW prunes int(s N) plus ties, GSM/LC keep
# int((1 - s) N), hard GMP prunes round(q n) of the n alive weights per step), CS evaluates after
# an epoch at the temperature after its last iteration, CS/DST's logged train_loss holds the
# paper's code's 1/2 wd ||w||^2 term, and a data-parallel run normalises BatchNorm over the whole
# batch unless model.batchnorm_processes says otherwise (before, N processes normalised per
# process by default and stored that under the one-process run's id).
IDENTITY_VERSION = 3


def run_identity(cfg: RunConfig) -> dict[str, Any]:
    """The identity version, the canonical config and the method's ``changed`` marks, if any."""
    return {"identity_version": IDENTITY_VERSION, **canonical_dict(cfg), **changed_marks(cfg)}


def run_id(cfg: RunConfig) -> str:
    """A stable id: method name plus a hash of :func:`run_identity` (defaults left out)."""
    text = json.dumps(run_identity(cfg), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{cfg.method.name}-{digest}"
