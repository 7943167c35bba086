"""Pruning methods: each module registers one or more methods in :data:`METHODS`.

Outside packages register methods through the entry-point group ``prunebench.methods``: the
entry point names a module (or callable) whose import registers its methods.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from importlib.metadata import entry_points

from methods.base import METHODS, Method, MethodInfo, register_method

# Every module of this package except the interface registers built-in methods on import,
# so adding a method is adding one file.
BUILTIN_MODULES = tuple(
    f"{__name__}.{m.name}"
    for m in pkgutil.iter_modules(__path__)
    if m.name != "base" and not m.name.startswith("_")
)
ENTRY_POINT_GROUP = "prunebench.methods"


@functools.cache
def load_methods() -> None:
    """Import the built-in method modules and every installed plugin (once)."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as err:
            raise RuntimeError(
                f"prunebench method plugin {ep.name!r} ({ep.value}) failed to load: {err}"
            ) from err
        if isinstance(obj, type) and issubclass(obj, Method):
            if obj.name not in METHODS:
                register_method(obj)
        elif callable(obj):
            obj()  # a registration function


def get_method(name: str) -> type[Method]:
    """The method class registered as ``name`` (raises ConfigError naming method.name)."""
    load_methods()
    return METHODS.get(name, "method.name")


__all__ = ["METHODS", "Method", "MethodInfo", "get_method", "load_methods", "register_method"]
