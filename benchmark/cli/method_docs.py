"""What every ``[method]`` key of a method means, from one source: its Params dataclass.

A key's meaning is the entry for it in the ``Attributes:`` section of the docstring of the
Params class (or of a base class it inherits the field from), or ``field(metadata={"help": ...})``
on the field itself. ``prunebench methods NAME`` prints them with types, defaults and the
method's presets, and ``prunebench methods --markdown`` prints the method list of
``methods/README.md``.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmark.config.run import METHOD_COMMON_KEYS, MethodConfig

# The [method] keys every method has (besides its name), and what they mean.
COMMON_MEANINGS = {
    "sparsity": "goal sparsity over the prunable weights",
    "exclude": "module-name patterns left out of the prunable set",
}
IGNORED = "ignored by this method (not part of its run id)"
_ENTRY = re.compile(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


@dataclass(frozen=True)
class KeyDoc:
    """One ``[method]`` key: its type, default and meaning."""

    key: str
    type: str
    default: Any
    meaning: str


def attribute_docs(doc: str | None) -> dict[str, str]:
    """The ``Attributes:`` section of a Google-style docstring as {name: text}."""
    if not doc:
        return {}
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return {}
    out: dict[str, str] = {}
    indent: int | None = None
    current: str | None = None
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if width == 0:
            break  # the section ended
        if indent is None:
            indent = width
        match = _ENTRY.match(line.strip())
        if width == indent and match:
            current = match.group(1)
            out[current] = match.group(2).strip()
        elif current is not None:
            out[current] = f"{out[current]} {line.strip()}".strip()
    return out


def field_meanings(params_cls: type) -> dict[str, str]:
    """Every documented field of ``params_cls`` (its own docstring, base classes, metadata)."""
    out: dict[str, str] = {}
    for klass in reversed(params_cls.__mro__):
        out.update(attribute_docs(klass.__dict__.get("__doc__")))
    for f in dataclasses.fields(params_cls):
        if "help" in f.metadata:
            out[f.name] = str(f.metadata["help"])
    return {f.name: out[f.name] for f in dataclasses.fields(params_cls) if f.name in out}


def undocumented(params_cls: type) -> list[str]:
    """The fields of ``params_cls`` that have no meaning."""
    meanings = field_meanings(params_cls)
    return [f.name for f in dataclasses.fields(params_cls) if not meanings.get(f.name)]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _type_text(tp: Any) -> str:
    args = typing.get_args(tp)
    if typing.get_origin(tp) is list:
        return f"list of {_type_text(args[0])}"
    if typing.get_origin(tp) is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return f"{_type_text(inner[0])} or unset"
    return getattr(tp, "__name__", str(tp))


def method_keys(method_cls: type) -> list[KeyDoc]:
    """Every ``[method]`` key of a registered method class, common keys first."""
    common_types = typing.get_type_hints(MethodConfig)
    ignored = method_cls.ignored_fields()
    out = []
    for key in METHOD_COMMON_KEYS:
        if key == "name":
            continue
        meaning = IGNORED if key in ignored else COMMON_MEANINGS[key]
        default = _default(next(f for f in dataclasses.fields(MethodConfig) if f.name == key))
        out.append(KeyDoc(key, _type_text(common_types[key]), default, meaning))
    params = method_cls.Params
    hints = typing.get_type_hints(params)
    meanings = field_meanings(params)
    for f in dataclasses.fields(params):
        meaning = IGNORED if f.name in ignored else meanings.get(f.name, "(undocumented)")
        out.append(KeyDoc(f.name, _type_text(hints[f.name]), _default(f), meaning))
    return out


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def describe(name: str) -> str:
    """``prunebench methods NAME``: properties, every key (type, default, meaning), presets."""
    from methods import get_method

    cls = get_method(name)
    i = cls.info
    yes = {True: "yes", False: "no"}
    lines = [
        f"{name}: {i.summary}",
        f"  sparsity specifiable: {yes[i.sparsity_specifiable]}; pruning stable: "
        f"{yes[i.pruning_stable]}; sparsity-agnostic training: {yes[i.sparsity_agnostic]}; "
        f"the paper counts {i.extra_hyperparameters} additional hyperparameter(s)",
        f"  budget fields it reads: {', '.join(f'budget.{b}' for b in sorted(cls.budget_fields))}",
        "",
        f"[method] keys (--set method.KEY=VALUE; method.name = {name!r}):",
    ]
    keys = method_keys(cls)
    rows = [(k.key, k.type, _toml(k.default), k.meaning) for k in keys]
    lines += _aligned(("key", "type", "default", "meaning"), rows)
    lines += ["", "presets (a grid file's [methods.NAME] preset = true picks the dataset's):"]
    if not cls.presets:
        lines.append("  none")
    for preset, axes in cls.presets.items():
        lines.append(f"  {preset}:")
        for key, values in axes.items():
            lines.append(f"    {key} = {_toml(list(values))}")
    return "\n".join(lines)


def _aligned(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    from benchmark.core.textwidth import fit_table, width_of

    return fit_table([header, *rows], width_of(), prose=True, margin="  ").split("\n")


def markdown_table(names: Iterable[str]) -> str:
    """The method list of ``methods/README.md``: each method's name, summary, and its own
    ``[method]`` keys with defaults, as Markdown list items wrapped at 100 columns."""
    import textwrap

    from methods import get_method

    items = []
    for name in names:
        cls = get_method(name)
        own = [k for k in method_keys(cls) if k.key not in METHOD_COMMON_KEYS]
        keys = ", ".join(f"`{k.key}` ({_toml(k.default)})" for k in own)
        said = f"Its keys (defaults): {keys}." if own else "No keys of its own."
        text = f"`{name}`: {cls.info.summary}. {said}"
        # break_on_hyphens=False: a hyphen inside a `code` name is not a place to break.
        items.append(
            textwrap.fill(
                text,
                width=100,
                initial_indent="- ",
                subsequent_indent="  ",
                break_on_hyphens=False,
                break_long_words=False,
            )
        )
    return "\n".join(items) + "\n"
