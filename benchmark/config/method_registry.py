"""The method registry: every pruning method by name, found on first use.

A run's ``[method]`` section names a method and its typed hyperparameters (the method class's
``Params`` dataclass); the classes come from plugins that register themselves here with
:func:`register_method`: the built-in ``methods`` package (every module of it but ``base`` and
``_private`` ones) and every installed entry point of the group ``prunebench.methods``. Both are
found the same way, by import name when a method is first asked for, so that nothing in the
harness below the methods imports one (a method depends on the harness, never the reverse).

A plugin that fails to load (an import error, a name another method already has) is skipped with
a warning, so it never breaks the other methods; asking for the method it was meant to provide
reports its error.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import Any

from benchmark.core.errors import ConfigError, close_matches
from benchmark.core.registry import Registry

# Built-in methods: this package's modules, imported by name (a plugin like any other).
BUILTIN_PACKAGE = "methods"
ENTRY_POINT_GROUP = "prunebench.methods"
log = logging.getLogger("prunebench")

# Method classes (``methods.base.Method`` subclasses) by name.
METHODS: Registry[Any] = Registry("method")


def register_method(cls: type) -> type:
    """Class decorator: register a Method subclass under its ``name``."""
    if not getattr(cls, "name", ""):
        raise ValueError(f"{cls.__qualname__} has no name")
    METHODS.add(cls.name, cls)
    return cls


class PluginError(ConfigError):
    """The method asked for comes from a plugin that failed to load."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__("method.name", name, f"a method that loads; its plugin failed: {reason}")


def builtin_modules() -> tuple[str, ...]:
    """The modules of the built-in methods package that register methods."""
    package = importlib.import_module(BUILTIN_PACKAGE)
    return tuple(
        f"{BUILTIN_PACKAGE}.{m.name}"
        for m in pkgutil.iter_modules(package.__path__)
        if m.name != "base" and not m.name.startswith("_")
    )


@functools.cache
def load_methods() -> MappingProxyType[str, str]:
    """Import the built-in methods and every installed plugin (once).

    Returns the plugins that failed to load (entry-point name -> reason); each was skipped
    with a warning on the ``prunebench`` logger.
    """
    for module in builtin_modules():
        importlib.import_module(module)
    failed: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            _load_plugin(ep.load())
        except Exception as err:  # a plugin must never break the other methods
            failed[ep.name] = f"{ep.value}: {type(err).__name__}: {err}"
            log.warning(
                "prunebench: warning: method plugin %r (%s) failed to load and is skipped: %s",
                ep.name,
                ep.value,
                f"{type(err).__name__}: {err}",
            )
    return MappingProxyType(failed)


def _is_method_class(obj: object) -> bool:
    return isinstance(obj, type) and bool(getattr(obj, "name", "")) and hasattr(obj, "Params")


def _load_plugin(obj: object) -> None:
    """Register what an entry point names: a Method class, a registering callable or a module."""
    if _is_method_class(obj):
        if obj.name not in METHODS:  # type: ignore[attr-defined]
            register_method(obj)  # type: ignore[arg-type]
    elif callable(obj):
        obj()  # a registration function
    # A module registered its methods when it was imported.


def get_method(name: str) -> Any:
    """The method class registered as ``name``.

    Raises a ConfigError naming ``method.name`` and the registered names, or the plugin's error
    when ``name`` is the entry point of a plugin that failed to load.
    """
    failed = load_methods()
    if name not in METHODS and name in failed:
        raise PluginError(name, failed[name])
    if name not in METHODS:
        known = ", ".join(repr(n) for n in METHODS.names())
        raise ConfigError(
            "method.name",
            name,
            f"one of {known}; a method from a plugin is known once its package is installed "
            f"(pip install <the plugin's package> into this environment: it registers its "
            f"methods under the entry-point group {ENTRY_POINT_GROUP!r})",
            suggest=close_matches(name, METHODS.names()),
        )
    return METHODS.get(name, "method.name")


def method_params_class(method_name: str) -> type:
    """The hyperparameter dataclass declared by the registered method ``method_name``."""
    return get_method(method_name).Params


def changed_marks(cfg: Any) -> dict[str, Any]:
    """``{"changed": marks}`` where the method of run config ``cfg`` now computes something
    else for a config that an earlier version ran under the same run id, else ``{}``. A method
    says so with an optional classmethod ``identity_marks(cfg) -> dict`` (non-empty: marked), so
    that only those configs' ids move (``IDENTITY_VERSION`` would move every id)."""
    marks = getattr(get_method(cfg.method.name), "identity_marks", lambda _: {})(cfg)
    return {"changed": marks} if marks else {}
