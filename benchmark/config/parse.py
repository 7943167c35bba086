"""Reading and writing run configurations: nested dicts and TOML to typed sections (with a clear
error naming the field and the allowed values), ``section.key=value`` overrides, and back.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
import types
import typing
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import tomli_w

from benchmark.config.method_registry import method_params_class
from benchmark.config.run import (
    METHOD_COMMON_KEYS,
    SECTIONS,
    MethodConfig,
    RunConfig,
    _method_to_dict,
    copy_value,
    dataclass_fields,
)
from benchmark.core.errors import ConfigError, close_matches
from benchmark.core.errors import check as check
from benchmark.core.tomlfile import MAX_DEPTH, nesting_depth

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is list:
        return f"list of {_type_name(typing.get_args(tp)[0])}"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


def coerce(path: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the annotation ``tp`` (int accepted for float); return it."""
    return _checker(tp)(path, value)


Checker = typing.Callable[[str, Any], Any]


@functools.cache
def _checker(tp: Any) -> Checker:
    """The check of annotation ``tp``, resolved once per annotation (a paper-scale plan parses
    thousands of configs with a few dozen annotations)."""
    origin = typing.get_origin(tp)
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        item = _checker(item_tp)

        def check_list(path: str, value: Any) -> Any:
            if not isinstance(value, list | tuple):
                raise ConfigError(path, value, _type_name(tp))
            return [item(f"{path}[{i}]", v) for i, v in enumerate(value)]

        return check_list
    if origin is typing.Literal:
        return functools.partial(_check_literal, typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        inner = _checker(next(a for a in args if a is not type(None)))
        return functools.partial(_check_optional, type(None) in args, inner)
    return _ATOM_CHECKS.get(tp, _unchecked)


def _check_literal(allowed: tuple[Any, ...], path: str, value: Any) -> Any:
    if value not in allowed:
        raise ConfigError(path, value, allowed)
    return value


def _check_optional(nullable: bool, inner: Checker, path: str, value: Any) -> Any:
    if value is None and nullable:
        return None
    return inner(path, value)


def _unchecked(path: str, value: Any) -> Any:
    # An annotation without a check (Any, dict, a class): a copy, so that the parsed config
    # shares nothing with the dict it was read from (the checks above return atoms or new lists).
    return copy_value(value)


def _check_bool(path: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise ConfigError(path, value, "true or false")
    return value


def _check_int(path: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(path, value, "an integer")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ConfigError(path, value, "an integer that fits 64 bits")
    return value


def _check_float(path: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, value, "a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(path, value, "a finite number")
    return number


def _check_str(path: str, value: Any) -> Any:
    if not isinstance(value, str):
        raise ConfigError(path, value, "a string")
    return value


_ATOM_CHECKS: dict[Any, Checker] = {
    bool: _check_bool,
    int: _check_int,
    float: _check_float,
    str: _check_str,
}


def dataclass_from_dict(cls: type, data: dict[str, Any], path: str) -> Any:
    """Build dataclass ``cls`` from ``data``, rejecting unknown keys and wrong types."""
    if not isinstance(data, dict):
        raise ConfigError(path, data, f"a table with keys {sorted(_field_names(cls))}")
    checks = _field_checks(cls)
    kwargs = {}
    for key, value in data.items():
        if key not in checks:
            known = ", ".join(sorted(checks))
            field = f"{path}.{key}"
            own = [f"{path}.{k}" for k in checks]
            raise ConfigError(
                field,
                value,
                f"a key of [{path}]: {known}",
                unknown=True,
                suggest=close_matches(field, [*own, *config_keys()]),
            )
        kwargs[key] = checks[key](f"{path}.{key}", value)
    return cls(**kwargs)


@functools.cache
def _field_checks(cls: type) -> dict[str, Checker]:
    """The check of each field of dataclass ``cls``, by name."""
    hints = _type_hints(cls)
    return {name: _checker(hints[name]) for name in _field_names(cls)}


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    # Resolving the annotations is most of the cost of parsing a config; classes do not change.
    return typing.get_type_hints(cls)


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


@functools.cache
def config_keys() -> tuple[str, ...]:
    """Every dotted key of a run config's sections (a method's own keys aside)."""
    keys = [
        f"{name}.{f}"
        for name, cls in SECTIONS.items()
        if name != "method"  # its keys are the common ones and each method's own
        for f in sorted(_field_names(cls))
    ]
    return ("seed", *keys, *(f"method.{k}" for k in METHOD_COMMON_KEYS))


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Parse a nested dict (as read from TOML) into a RunConfig; raises ConfigError.

    ``data`` is only read: every value of the config is new or an atom (see the checks)."""
    allowed = ["seed", *SECTIONS]
    for key in data:
        if key not in allowed:
            raise ConfigError(
                key,
                data[key],
                f"a section: {', '.join(allowed)}",
                unknown=True,
                suggest=close_matches(key, allowed),
            )
    kwargs: dict[str, Any] = {}
    if "seed" in data:
        kwargs["seed"] = coerce("seed", data["seed"], int)
    for name, cls in SECTIONS.items():
        if name == "method":
            kwargs[name] = _method_from_dict(data.get(name, {}))
        elif name in data:
            kwargs[name] = dataclass_from_dict(cls, data[name], name)
    return _tokenizer_of_the_model(RunConfig(**kwargs))


def _tokenizer_of_the_model(cfg: RunConfig) -> RunConfig:
    """``cfg`` with an unset ``data.tokenizer`` of a pretrained language model (``causal_lm``)
    set to ``model.pretrained``: a model's folder holds its tokenizer, and bytes would give
    meaningless perplexities (``"bytes"`` asks for them). Written into the config, so the run
    id is that of the same config with the folder written out."""
    if cfg.model.name != "causal_lm" or cfg.data.tokenizer or not cfg.model.pretrained:
        return cfg
    return replace_section(cfg, data=dataclasses.replace(cfg.data, tokenizer=cfg.model.pretrained))


def _method_from_dict(data: dict[str, Any]) -> MethodConfig:
    if not isinstance(data, dict):
        raise ConfigError("method", data, "a table with at least a name")
    name = coerce("method.name", data.get("name", MethodConfig.name), str)
    params_cls = method_params_class(name)
    common = {k: data[k] for k in METHOD_COMMON_KEYS if k in data}
    rest = {k: v for k, v in data.items() if k not in METHOD_COMMON_KEYS}
    known = set(METHOD_COMMON_KEYS) | set(_field_names(params_cls))
    for key, value in rest.items():
        if key not in known:
            allowed = ", ".join(sorted(known))
            field = f"method.{key}"
            raise ConfigError(
                field,
                value,
                f"a key of method {name!r}: {allowed}",
                unknown=True,
                suggest=close_matches(field, [*(f"method.{k}" for k in known), *config_keys()]),
            )
    base = dataclass_from_dict(MethodConfig, common, "method")
    base.params = dataclass_from_dict(params_cls, rest, "method")
    return base


def parse_override(text: str) -> tuple[list[str], Any]:
    """Parse one ``section.key=value`` override; the value is read as TOML, else as a string."""
    if "=" not in text:
        raise ConfigError("--set", text, "section.key=value, e.g. method.sparsity=0.95")
    key, raw = text.split("=", 1)
    path = [p for p in key.strip().split(".") if p]
    if not path:
        raise ConfigError("--set", text, "section.key=value, e.g. method.sparsity=0.95")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        value = raw.strip()
    if nesting_depth(value) > MAX_DEPTH:
        raise ConfigError(".".join(path), raw[:80], f"a value nested at most {MAX_DEPTH} deep")
    return path, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with every ``section.key=value`` override applied."""
    data = copy_value(data)
    for text in overrides:
        path, value = parse_override(text)
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(".".join(path), value, f"{part} is not a section")
            node = child
        node[path[-1]] = value
    return data


# The default run: BIMP on digits.
DEFAULT_CONFIG = Path(__file__).resolve().parent / "default.toml"


def config_to_dict(cfg: RunConfig) -> dict[str, Any]:
    """The full config as a nested dict, method hyperparameters flattened into [method]."""
    out: dict[str, Any] = {"seed": cfg.seed}
    for name in SECTIONS:
        section = getattr(cfg, name)
        if name == "method":
            out[name] = _method_to_dict(section)
        else:
            out[name] = asdict(section)
    return out


def config_to_toml(cfg: RunConfig) -> str:
    """The full config as TOML text that :func:`load_config` reads back unchanged.

    TOML has no null, so an unset optional key is shown as a comment in its table.
    """
    data = config_to_dict(cfg)
    text = tomli_w.dumps(_drop_none(data))
    for section, values in data.items():
        unset = [k for k, v in values.items() if v is None] if isinstance(values, dict) else []
        for key in reversed(unset):
            line = f"# {key} = ...  (unset; optional)\n"
            text = text.replace(f"[{section}]\n", f"[{section}]\n{line}", 1)
    return text


def _drop_none(data: Any) -> Any:
    # TOML has no null; an unset optional field is simply left out.
    if isinstance(data, dict):
        return {k: _drop_none(v) for k, v in data.items() if v is not None}
    return data


def replace_section(cfg: RunConfig, **sections: Any) -> RunConfig:
    """A copy of ``cfg`` with whole sections (or ``seed``) replaced."""
    names = (f.name for f in dataclass_fields(RunConfig))
    kept = {name: getattr(cfg, name) for name in names if name not in sections}
    return RunConfig(**copy_value(kept), **sections)
