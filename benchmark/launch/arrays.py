"""What a dry run says of ``--array K``: the arrays and packs each job will form."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def array_lines(specs: Sequence[Any], size: int, layout: str | None = None) -> list[str]:
    """Lines saying how many arrays of up to ``size`` runs (in ``layout``; None: the device's
    default) the jobs of ``specs`` form, the share of the dataset passes they train, how many
    runs they pack instead, and why (each job forms its arrays from its own runs)."""
    from benchmark.training.array.fit import form_arrays
    from benchmark.training.passes import run_passes

    arrays = in_arrays = passes = arrayed_passes = 0
    why: Counter[str] = Counter()
    for spec in specs:
        for task in spec.tasks:
            cfgs = [node.cfg for node in task]
            formed, _rest, reasons = form_arrays(cfgs, size, layout)
            arrays += len(formed)
            in_arrays += sum(len(a) for a in formed)
            passes += sum(run_passes(cfg) for cfg in cfgs)
            arrayed_passes += sum(run_passes(cfg) for a in formed for cfg in a)
            why.update(reasons.values())
    packed = sum(why.values())
    share = f"{arrayed_passes / passes:.1%}" if passes else "-"
    lines = [
        f"  arrays (--array {size}): {arrays} array{'s' * (arrays != 1)} of {in_arrays} runs "
        f"in all; {packed} run{'s' * (packed != 1)} packed instead",
        f"    dataset passes in arrays: {arrayed_passes:,} of {passes:,} ({share})",
    ]
    lines += [f"    {count} packed: {reason}" for reason, count in why.most_common()]
    return lines
