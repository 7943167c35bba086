"""String-keyed registries for datasets, models, methods and schedules."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from benchmark.core.errors import ConfigError, close_matches

T = TypeVar("T")


class Registry(Generic[T]):
    """A named mapping from string keys to objects, filled by a decorator at import time."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Return a decorator that registers its argument under ``name``."""

        def decorator(obj: T) -> T:
            self.add(name, obj)
            return obj

        return decorator

    def add(self, name: str, obj: T) -> None:
        """Register ``obj`` under ``name``; a name may be registered only once."""
        if name in self._items and self._items[name] is not obj:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = obj

    def replace(self, name: str, obj: T) -> None:
        """Register ``obj`` under ``name``, replacing an earlier one (benchmarks re-register
        their synthetic data for every input shape)."""
        self._items[name] = obj

    def discard(self, name: str) -> None:
        """Forget ``name`` if it is registered (what a benchmark registered for its own run)."""
        self._items.pop(name, None)

    def get(self, name: str, field: str | None = None) -> T:
        """Return the object registered as ``name`` or raise a ConfigError listing the names."""
        try:
            return self._items[name]
        except KeyError:
            raise ConfigError(
                field or f"{self.kind}.name",
                name,
                self.names(),
                suggest=close_matches(str(name), self.names()),
            ) from None

    def names(self) -> list[str]:
        """Return the registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
