"""Pruning methods: each module registers one or more methods in :data:`METHODS`.

Adding a method is adding one module here (``methods/<name>.py``, registering with
``@register_method``) and its test. Outside packages register methods through the entry-point
group ``prunebench.methods``: the entry point names a module (or callable) whose import registers
its methods. The registry (:mod:`benchmark.config.method_registry`) finds both on first use.

The methods build on the harness below them, never on ``training`` or above (which import them).

May import: core, config, schedules, pruning, data, models, measure.
"""

from __future__ import annotations

from benchmark.config.method_registry import (
    ENTRY_POINT_GROUP,
    METHODS,
    PluginError,
    get_method,
    load_methods,
    register_method,
)
from methods.base import Method, MethodInfo

__all__ = [
    "ENTRY_POINT_GROUP",
    "METHODS",
    "Method",
    "MethodInfo",
    "PluginError",
    "get_method",
    "load_methods",
    "register_method",
]
