"""Validation of a whole run config against the registries (datasets, models, schedules, methods).

This module sits above the registries and :mod:`benchmark.config` below them: config is typed
data with TOML I/O, and the rules that need to know which datasets, models, schedules and methods
exist (and each method's own checks) live here. :func:`load_config` reads, parses and validates.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from benchmark.config.parse import DEFAULT_CONFIG, apply_overrides, config_from_dict
from benchmark.config.run import MAX_EPOCHS, MAX_THREADS, RunConfig
from benchmark.core.errors import check
from benchmark.core.tomlfile import load_toml
from benchmark.data.base import DATASETS, validate_data_config
from benchmark.measure.run_latency import validate_latency
from benchmark.models.causal_lm import LM_MODELS, validate_lm
from benchmark.models.registry import (
    MODELS,
    validate_model_data,
    validate_model_determinism,
    validate_model_init,
    validate_pretrained,
)
from benchmark.schedules.original import validate_schedule
from benchmark.tasks.zero_shot import validate_zero_shot
from methods import get_method

# More data-parallel processes than any cluster job here would start.
MAX_PROCESSES = 4096


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """Read a TOML file (default: BIMP on digits), apply overrides, parse and validate."""
    data: dict[str, Any] = {}
    if path is None:
        path = DEFAULT_CONFIG
    if path is not None:
        data = load_toml(path, "config")
    data = apply_overrides(data, overrides or [])
    cfg = config_from_dict(data)
    validate(cfg)
    return cfg


def validate(cfg: RunConfig) -> None:
    """Check every value and cross-field rule before any compute; raises ConfigError."""
    check(cfg.seed >= 0, "seed", cfg.seed, "an integer >= 0")
    DATASETS.get(cfg.data.name, "data.name")
    validate_data_config(cfg.data)
    MODELS.get(cfg.model.name, "model.name")
    validate_model_data(cfg.model.name, cfg.data.name)
    validate_model_init(cfg.model.init)
    validate_pretrained(cfg.model.pretrained)
    validate_lm(cfg.model.name, cfg.model.pretrained, cfg.data.max_length, cfg.data.tokenizer)
    validate_model_determinism(cfg.model.name, cfg.runtime.device, cfg.runtime.deterministic)
    bn = cfg.model.batchnorm_processes
    check(
        1 <= bn <= MAX_PROCESSES,
        "model.batchnorm_processes",
        bn,
        f"an integer in [1, {MAX_PROCESSES}] (1: BatchNorm over the whole batch)",
    )
    check(
        bn == 1 or cfg.runtime.sync_bn is not True,
        "runtime.sync_bn",
        cfg.runtime.sync_bn,
        f"false or unset with model.batchnorm_processes = {bn} (BatchNorm per process)",
    )
    o = cfg.optim
    check(o.name in ("sgd", "adamw"), "optim.name", o.name, "one of 'sgd', 'adamw'")
    check(0 <= o.momentum < 1, "optim.momentum", o.momentum, "a number in [0, 1)")
    check(
        not o.nesterov or o.momentum > 0,
        "optim.nesterov",
        o.nesterov,
        "false unless optim.momentum > 0 (Nesterov momentum needs momentum)",
    )
    check(o.weight_decay >= 0, "optim.weight_decay", o.weight_decay, "a number >= 0")
    check(0 <= o.label_smoothing < 1, "optim.label_smoothing", o.label_smoothing, "[0, 1)")
    check(o.grad_clip >= 0, "optim.grad_clip", o.grad_clip, "a number >= 0 (0 disables clipping)")
    check(not (o.bf16 and o.fp16), "optim.fp16", o.fp16, "false with optim.bf16 = true (one half)")
    check(cfg.schedule.lr > 0, "schedule.lr", cfg.schedule.lr, "a number > 0")
    b = cfg.budget
    check(
        0 < b.epochs <= MAX_EPOCHS, "budget.epochs", b.epochs, f"an integer > 0 and <= {MAX_EPOCHS}"
    )
    check(b.cycles >= 1, "budget.cycles", b.cycles, "an integer >= 1")
    check(b.initial_epochs >= 0, "budget.initial_epochs", b.initial_epochs, "an integer >= 0")
    m = cfg.method
    check(0 <= m.sparsity < 1, "method.sparsity", m.sparsity, "a number in [0, 1)")
    ft = cfg.finetune.epochs
    check(0 <= ft <= MAX_EPOCHS, "finetune.epochs", ft, f"an integer >= 0 and <= {MAX_EPOCHS}")
    check(cfg.eval.val_every >= 1, "eval.val_every", cfg.eval.val_every, "an integer >= 1")
    validate_zero_shot(cfg, language_model=cfg.model.name in LM_MODELS)
    modes = ("offline", "online", "disabled")
    check(
        cfg.logging.wandb_mode in modes,
        "logging.wandb_mode",
        cfg.logging.wandb_mode,
        "one of " + ", ".join(modes),
    )
    dev = cfg.runtime.device
    check(
        dev in ("auto", "cpu", "cuda", "mps") or re.fullmatch(r"cuda:\d{1,4}", dev) is not None,
        "runtime.device",
        dev,
        "one of 'auto', 'cpu', 'cuda', 'cuda:N' (N a device index), 'mps'",
    )
    threads = cfg.runtime.threads
    check(
        0 <= threads <= MAX_THREADS,
        "runtime.threads",
        threads,
        f"an integer in [0, {MAX_THREADS}] (0: torch's default)",
    )
    check(
        bool(cfg.output.dir.strip()),
        "output.dir",
        cfg.output.dir,
        "a folder path (empty would write into the current folder)",
    )
    validate_latency(cfg)
    method_cls = get_method(m.name)
    validate_dtype(cfg, getattr(method_cls, "half_precision", False))
    method_cls.validate(cfg)
    # The original schedule spans the epochs it is defined over for this method (the dense
    # parent's for IMP, T0 for BIMP), not necessarily the run's own budget.
    validate_schedule(cfg.schedule, method_cls(cfg).original_epochs())


def validate_dtype(cfg: RunConfig, method_allows_half: bool) -> None:
    """``model.dtype`` other than float32: a language model, a method that runs one in half
    precision, and no float16 beside ``optim.bf16``."""
    from benchmark.models.causal_lm import LM_MODELS

    dtype = cfg.model.dtype
    if dtype == "float32":
        return
    check(
        cfg.model.name in LM_MODELS and method_allows_half,
        "model.dtype",
        dtype,
        "'float32' unless a language model (model.name in "
        f"{', '.join(LM_MODELS)}) is pruned by a one-shot method (wanda, sparsegpt, "
        "oneshot_magnitude); other runs train in float32 (bf16 autocast: optim.bf16)",
    )
    training = cfg.optim.precision()
    own = {"bfloat16": "bf16", "float16": "fp16"}[dtype]
    check(
        training in ("fp32", own),
        "model.dtype",
        dtype,
        f"one that agrees with optim.{training} = true ({training} autocast of a {dtype} "
        f"model): {'bfloat16' if training == 'bf16' else 'float16'} or 'float32'",
    )
