"""What a dry run says of ``--array K``: the arrays and packs each job will form."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def array_lines(specs: Sequence[Any], size: int) -> list[str]:
    """Lines saying how many arrays of up to ``size`` runs the jobs of ``specs`` form, how many
    runs they pack instead, and why (each job forms its arrays from its own runs)."""
    from benchmark.training.array.fit import form_arrays

    arrays = in_arrays = 0
    why: Counter[str] = Counter()
    for spec in specs:
        for task in spec.tasks:
            formed, _rest, reasons = form_arrays([node.cfg for node in task], size)
            arrays += len(formed)
            in_arrays += sum(len(a) for a in formed)
            why.update(reasons.values())
    packed = sum(why.values())
    lines = [
        f"  arrays (--array {size}): {arrays} array{'s' * (arrays != 1)} of {in_arrays} runs "
        f"in all; {packed} run{'s' * (packed != 1)} packed instead"
    ]
    lines += [f"    {count} packed: {reason}" for reason, count in why.most_common()]
    return lines
