"""Pruned weights stored compactly: the nonzero values and where they are, loaded back exactly.

A pruned model's state dict is mostly zeros (90-99% of the prunable weights). Each floating
tensor is stored in whichever of three forms is smallest:

* ``mask``: a bitmask of the nonzero entries, packed 8 to a byte, and the nonzero values:
  ``numel / 8 + nonzero * itemsize`` bytes (the smallest between about 3% and 90% density);
* ``index``: the flat positions of the nonzero entries (int32, int64 beyond 2**31 entries) and
  the values: ``nonzero * (4 + itemsize)`` bytes (the smallest below about 3% density);
* dense, as it is (dense models, batch-norm statistics, small tensors).

Entries are compared by their bits, so NaN and ``-0.0`` come back as they were: the state dict
loads back bit for bit. Pruning by multiplying with a mask leaves ``-0.0`` wherever it pruned a
negative weight; those zeros cost one sign bit each (``zero_signs``) rather than a stored value.
torch's own sparse formats are larger at the densities the paper uses (COO keeps an int64 index
per dimension and entry, CSR an int64 column index per entry). Everything is plain tensors,
lists, numbers and strings, so the file still loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

FORMAT = "prunebench.packed-state-dict"
VERSION = 1
INDEX_BYTES = 4  # int32 positions (int64 beyond 2**31 entries)


def packed_nbytes(numel: int, nonzero: int, itemsize: int, signed_zeros: bool = False) -> int:
    """The bytes of one tensor's data in its smallest form (mask, index or dense).

    ``signed_zeros``: some zeros are ``-0.0`` (masks applied by multiplication leave one for
    every negative weight they prune); their signs cost a bit per zero.
    """
    dense = numel * itemsize
    signs = math.ceil((numel - nonzero) / 8) if signed_zeros else 0
    mask = math.ceil(numel / 8) + nonzero * itemsize + signs
    index_size = INDEX_BYTES if numel < 2**31 else 8
    index = nonzero * (index_size + itemsize) + signs
    return min(dense, mask, index)


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` (floating, contiguous) as integers of the same width: zero bits <=> +0.0."""
    import torch

    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return tensor.view(ints[tensor.element_size()])


def _packbits(flags: torch.Tensor) -> torch.Tensor:
    """Booleans packed 8 to a byte, the first in the highest bit (numpy's packbits order)."""
    import torch

    pad = (-flags.numel()) % 8
    bits = torch.cat([flags.reshape(-1), flags.new_zeros(pad)]).view(-1, 8).to(torch.uint8)
    shifts = torch.arange(7, -1, -1, dtype=torch.uint8, device=bits.device)
    return (bits << shifts).sum(dim=1, dtype=torch.uint8)


def _unpackbits(packed: torch.Tensor, count: int) -> torch.Tensor:
    import torch

    shifts = torch.arange(7, -1, -1, dtype=torch.uint8, device=packed.device)
    return ((packed.unsqueeze(1) >> shifts) & 1).reshape(-1)[:count].bool()


def _pack_tensor(tensor: torch.Tensor) -> dict[str, Any] | None:
    """The smallest packed form of ``tensor``, or None when dense is smallest.

    Entries whose bits are not all zero are kept as values; ``-0.0`` entries either count as
    values too or, when that is smaller, become zeros with a sign bit each (``zero_signs``).
    """
    if not tensor.is_floating_point() or tensor.is_sparse or tensor.numel() < 64:
        return None
    flat = tensor.detach().contiguous().reshape(-1)
    numel, itemsize = flat.numel(), flat.element_size()
    by_bits = _bits(flat) != 0
    by_value = flat != 0  # NaN is nonzero; -0.0 is not
    bits_nonzero, value_nonzero = int(by_bits.sum()), int(by_value.sum())
    as_values = packed_nbytes(numel, bits_nonzero, itemsize)
    with_signs = (
        packed_nbytes(numel, value_nonzero, itemsize, signed_zeros=True)
        if value_nonzero < bits_nonzero
        else as_values + 1
    )
    size = min(as_values, with_signs)
    if size >= numel * itemsize:
        return None
    keep = by_value if with_signs < as_values else by_bits
    nonzero = value_nonzero if keep is by_value else bits_nonzero
    entry: dict[str, Any] = {"shape": list(tensor.shape), "values": flat[keep]}
    if keep is by_value:
        entry["zero_signs"] = _packbits(by_bits[~by_value])
    signs = math.ceil((numel - nonzero) / 8) if keep is by_value else 0
    if size == math.ceil(numel / 8) + nonzero * itemsize + signs:
        entry["mask"] = _packbits(keep)
    else:
        import torch

        dtype = torch.int32 if numel < 2**31 else torch.int64
        entry["index"] = keep.nonzero().reshape(-1).to(dtype)
    return entry


def _unpack_tensor(entry: Mapping[str, Any]) -> torch.Tensor:
    import torch

    shape = [int(n) for n in entry["shape"]]
    values: torch.Tensor = entry["values"]
    numel = math.prod(shape)
    out = torch.zeros(numel, dtype=values.dtype, device=values.device)
    if "mask" in entry:
        where = _unpackbits(entry["mask"], numel)
    else:
        where = torch.zeros(numel, dtype=torch.bool, device=values.device)
        where[entry["index"].long()] = True
    if int(where.sum()) != values.numel():
        raise ValueError("the positions and the values disagree on the number of nonzeros")
    out[where] = values
    if "zero_signs" in entry:
        zeros = (~where).nonzero().reshape(-1)
        negative = _unpackbits(entry["zero_signs"], zeros.numel())
        out[zeros[negative]] = -0.0
    return out.reshape(shape)


def pack_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` (a state dict) in packed form; returned as it is when nothing packs smaller."""
    import torch

    packed: dict[str, Any] = {}
    dense: dict[str, Any] = {}
    for name, value in state.items():
        entry = _pack_tensor(value) if isinstance(value, torch.Tensor) else None
        if entry is None:
            dense[name] = value
        else:
            packed[name] = entry
    if not packed:
        return dict(state)
    return {
        "format": FORMAT,
        "version": VERSION,
        "order": list(state),
        "dense": dense,
        "packed": packed,
    }


def is_packed(data: Any) -> bool:
    """Whether ``data`` (a loaded file) is a packed state dict."""
    return isinstance(data, dict) and data.get("format") == FORMAT


def unpack_state(data: Mapping[str, Any]) -> dict[str, Any]:
    """The state dict a :func:`pack_state` result holds, in its order; raises ValueError when
    the file is not a packed state dict this version reads."""
    if data.get("version") != VERSION:
        raise ValueError(f"packed state dict version {data.get('version')!r}, not {VERSION}")
    try:
        dense, packed, order = data["dense"], data["packed"], data["order"]
        return {n: dense[n] if n in dense else _unpack_tensor(packed[n]) for n in order}
    except (KeyError, TypeError, RuntimeError, IndexError) as err:
        raise ValueError(f"damaged packed state dict ({type(err).__name__}: {err})") from None
