"""Pruning methods: each module registers one or more methods in :data:`METHODS`.

Outside packages register methods through the entry-point group ``prunebench.methods``: the
entry point names a module (or callable) whose import registers its methods. A plugin that fails
to load (an import error, a name another method already has) is skipped with a warning, so it
never breaks the other methods; asking for the method it was meant to provide reports its error.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
from importlib.metadata import entry_points
from types import MappingProxyType

from benchmark.errors import ConfigError
from methods.base import METHODS, Method, MethodInfo, register_method

# Every module of this package except the interface registers built-in methods on import,
# so adding a method is adding one file.
BUILTIN_MODULES = tuple(
    f"{__name__}.{m.name}"
    for m in pkgutil.iter_modules(__path__)
    if m.name != "base" and not m.name.startswith("_")
)
ENTRY_POINT_GROUP = "prunebench.methods"
log = logging.getLogger("prunebench")


class PluginError(ConfigError):
    """The method asked for comes from a plugin that failed to load."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__("method.name", name, f"a method that loads; its plugin failed: {reason}")


@functools.cache
def load_methods() -> MappingProxyType[str, str]:
    """Import the built-in methods and every installed plugin (once).

    Returns the plugins that failed to load (entry-point name -> reason); each was skipped
    with a warning on the ``prunebench`` logger.
    """
    for module in BUILTIN_MODULES:
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


def _load_plugin(obj: object) -> None:
    """Register what an entry point names: a Method class, a registering callable or a module."""
    if isinstance(obj, type) and issubclass(obj, Method):
        if obj.name not in METHODS:
            register_method(obj)
    elif callable(obj):
        obj()  # a registration function
    # A module registered its methods when it was imported.


def get_method(name: str) -> type[Method]:
    """The method class registered as ``name``.

    Raises a ConfigError naming ``method.name`` and the registered names, or the plugin's error
    when ``name`` is the entry point of a plugin that failed to load.
    """
    failed = load_methods()
    if name not in METHODS and name in failed:
        raise PluginError(name, failed[name])
    return METHODS.get(name, "method.name")


__all__ = [
    "METHODS",
    "Method",
    "MethodInfo",
    "PluginError",
    "get_method",
    "load_methods",
    "register_method",
]
