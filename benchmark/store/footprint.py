"""The disk a store's final weights take: bytes per run from its tensors, added up for a plan.

Dry runs print :meth:`DiskEstimate.line` beside the run count, so a grid is sized against a
quota before it is submitted. The bytes follow the weights format
(:func:`benchmark.core.packed.packed_nbytes`): pruned tensors packed, the others dense, plus
torch.save's own bytes per stored tensor. The tensors of a run's model come from the caller
(:mod:`benchmark.training.footprint` builds the model without memory to list them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from benchmark.core.packed import packed_nbytes

# torch.save's zip entry, alignment and pickle bytes per stored tensor (measured: 315 bytes on
# ResNet-56, WRN-28-10 and the digits CNN, PyTorch 2.x).
TENSOR_OVERHEAD = 320
# A packed tensor is stored as values, positions and zero signs, with its shape.
PACKED_TENSORS = 3


@dataclass(frozen=True)
class TensorSize:
    """One entry of a state dict: its element count and size, and whether it is pruned."""

    numel: int
    itemsize: int
    prunable: bool = False


def run_bytes(tensors: Iterable[TensorSize], density: float) -> tuple[int, int]:
    """(dense, packed) bytes of a run's weights file whose prunable tensors keep ``density``
    of their entries. The pruned zeros are counted as signed (masks applied by
    multiplication leave ``-0.0`` for every negative weight they prune), as runs store them."""
    dense = packed = 0
    for t in tensors:
        size = t.numel * t.itemsize
        dense += size + TENSOR_OVERHEAD
        if t.prunable and density < 1.0:
            nonzero = round(t.numel * density)
            small = packed_nbytes(t.numel, nonzero, t.itemsize, signed_zeros=True)
            if small < size:
                packed += small + PACKED_TENSORS * TENSOR_OVERHEAD
                continue
        packed += size + TENSOR_OVERHEAD
    return dense, packed


@dataclass
class DiskEstimate:
    """Bytes of final weights over a set of runs, as stored now (packed) and as stored before
    (dense); runs whose model could not be sized are counted in ``unknown``."""

    runs: int = 0
    dense: int = 0
    packed: int = 0
    unknown: dict[str, int] = field(default_factory=dict)  # model name -> runs

    def add(self, sizes: tuple[int, int] | None, model: str = "") -> None:
        """Count one run of ``(dense, packed)`` bytes (None: its model could not be sized)."""
        if sizes is None:
            self.unknown[model] = self.unknown.get(model, 0) + 1
            return
        self.runs += 1
        self.dense += sizes[0]
        self.packed += sizes[1]

    def line(self, what: str) -> str:
        """E.g. ``weights of the 4440 missing runs: ~58.4 GB (dense: 650.2 GB)``."""
        packed, dense = format_bytes(self.packed), format_bytes(self.dense)
        text = f"weights of {what}: ~{packed} (dense: {dense})"
        if self.unknown:
            models = ", ".join(f"{n} of {m}" for m, n in sorted(self.unknown.items()))
            text += f"; not sized: {models} runs"
        return text


def format_bytes(n: float) -> str:
    """``1234567`` -> ``1.2 MB`` (decimal units, as quotas are usually given)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")
