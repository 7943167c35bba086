"""What a dry run says of ``--array K``: the arrays and packs each job will form."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def array_lines(specs: Sequence[Any], size: int, layout: str | None = None) -> list[str]:
    """Lines saying how many arrays of up to ``size`` slots (in ``layout``; None: the device's
    default) the jobs of ``specs`` form, how full their slots stay (a run that ends gives its
    slot to the next), the share of the dataset passes they train, how many runs they pack
    instead, and why (each job forms its arrays from its own runs)."""
    from benchmark.training.array.fit import array_span, form_arrays
    from benchmark.training.passes import run_passes

    arrays = in_arrays = passes = arrayed = slot_epochs = slots = 0
    why: Counter[str] = Counter()
    for spec in specs:
        for task in spec.tasks:
            cfgs = [node.cfg for node in task]
            formed, _rest, reasons = form_arrays(cfgs, size, layout)
            passes += sum(run_passes(cfg) for cfg in cfgs)
            for group in formed:
                counts = [run_passes(cfg) for cfg in group]
                k = min(size, len(group))
                arrays, in_arrays, slots = arrays + 1, in_arrays + len(group), slots + k
                arrayed += sum(counts)
                slot_epochs += k * array_span(counts, k)
            why.update(reasons.values())
    packed = sum(why.values())
    full = f", {arrayed / slot_epochs:.0%} full" if slot_epochs else ""
    share = f" ({arrayed / passes:.1%})" if passes else ""
    lines = [
        f"  arrays (--array {size}): {arrays} array{'s' * (arrays != 1)} of {in_arrays} runs "
        f"in all ({slots} slots{full}); {packed} run{'s' * (packed != 1)} packed instead",
        f"    dataset passes in arrays: {arrayed:,} of {passes:,}{share}",
    ]
    lines += [f"    {count} packed: {reason}" for reason, count in why.most_common()]
    return lines
