"""The prunable set P: the weights of every conv and linear layer, minus exclusions."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

from torch import nn

PRUNABLE_TYPES: tuple[type[nn.Module], ...] = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)


def _param_name(module_name: str, attr: str) -> str:
    """The ``named_parameters`` name of ``attr`` on the module called ``module_name``."""
    return f"{module_name}.{attr}" if module_name else attr


def _excluded(module_name: str, exclude: Sequence[str]) -> bool:
    """Whether ``module_name`` matches one of the fnmatch patterns in ``exclude``."""
    return any(fnmatchcase(module_name, pattern) for pattern in exclude)


def _as_patterns(exclude: Sequence[str] | str) -> tuple[str, ...]:
    """Normalise ``exclude``; a bare string is one pattern, not a sequence of characters."""
    return (exclude,) if isinstance(exclude, str) else tuple(exclude)


def prunable_parameters(
    model: nn.Module, exclude: Sequence[str] = ()
) -> list[tuple[str, nn.Parameter]]:
    """Return the weights of every conv/linear layer as ``("<module>.weight", parameter)``.

    Layers come in module registration order, first and last layers included; biases and
    batch-norm parameters are never returned. ``exclude`` holds fnmatch patterns matched against
    module names (e.g. ``"fc"``, ``"layer1.*"``). A weight shared by several layers is listed once.
    """
    patterns = _as_patterns(exclude)
    seen: set[int] = set()
    prunable: list[tuple[str, nn.Parameter]] = []
    for name, module in model.named_modules():
        if not isinstance(module, PRUNABLE_TYPES) or _excluded(name, patterns):
            continue
        weight = module.weight
        # Tied weights must be masked (and counted) once, like named_parameters() does.
        if id(weight) in seen:
            continue
        seen.add(id(weight))
        prunable.append((_param_name(name, "weight"), weight))
    return prunable
