"""A slice of a spec: some of its methods, goal sparsities, seeds and sections.

``prunebench reproduce ID --methods bimp,gmp --sparsities 90,95 --seeds 0,1 --section ...``
plans and runs only the part of a table a user can afford; ``table`` and ``plot`` take the same
flags and show every cell outside the slice as missing. A slice is checked against the plan it
cuts before anything runs: a value the spec does not have is an error naming the flag and the
values it has.

Methods without a goal sparsity (CS, STR, DST) have no sparsity to cut by: their runs are
placed in a goal column only after training, so ``--sparsities`` keeps all of them (and the
table still shows the columns outside the slice as missing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmark.core.errors import ConfigError, close_matches

if TYPE_CHECKING:  # pandas loads with the plans; parsing the flags must not wait for it
    import pandas as pd


@dataclass(frozen=True)
class Slice:
    """Which methods, goal sparsities (percent), seeds and sections to keep; empty: all."""

    methods: tuple[str, ...] = ()
    sparsities: tuple[float, ...] = ()
    seeds: tuple[int, ...] = ()
    sections: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        """Whether this slice keeps the whole plan."""
        return not (self.methods or self.sparsities or self.seeds or self.sections)

    def label(self) -> str:
        """E.g. ``methods bimp, gmp; sparsities 90%, 95%; seeds 0, 1``."""
        parts = []
        if self.sections:
            parts.append("section " + ", ".join(self.sections))
        if self.methods:
            parts.append("methods " + ", ".join(self.methods))
        if self.sparsities:
            parts.append("sparsities " + ", ".join(f"{s:g}%" for s in self.sparsities))
        if self.seeds:
            parts.append("seeds " + ", ".join(str(s) for s in self.seeds))
        return "; ".join(parts)

    def flags(self) -> str:
        """The command-line flags of this slice (to repeat it in another command)."""
        out = []
        if self.sections:
            out.append("--section " + _quote(",".join(self.sections)))
        if self.methods:
            out.append("--methods " + ",".join(self.methods))
        if self.sparsities:
            out.append("--sparsities " + ",".join(f"{s:g}" for s in self.sparsities))
        if self.seeds:
            out.append("--seeds " + ",".join(str(s) for s in self.seeds))
        return " ".join(out)

    def check(self, plan: pd.DataFrame, what: str) -> None:
        """Refuse a value ``plan`` (the plan of ``what``) does not have, naming the flag and the
        values it has."""
        goals = sorted({float(g) for g in plan["goal"].dropna()})
        have = {
            "--methods": (self.methods, list(dict.fromkeys(plan["method"]))),
            "--sparsities": (self.sparsities, goals),
            "--seeds": (self.seeds, sorted({int(s) for s in plan["seed"]})),
            "--section": (self.sections, list(dict.fromkeys(plan["section"]))),
        }
        for flag, (asked, allowed) in have.items():
            bad = [v for v in asked if v not in allowed]
            if bad:
                shown = ", ".join(_text(v) for v in allowed) or "none"
                # A misspelt method or section name: its closest value (numbers have none).
                near = close_matches(bad[0], map(str, allowed)) if isinstance(bad[0], str) else []
                raise ConfigError(
                    flag, _text(bad[0]), f"values of {what}: {shown}", suggest=near[:1]
                )

    def keeps(self, plan: pd.DataFrame) -> pd.Series:
        """Which rows of ``plan`` the slice keeps (runs without a goal sparsity stay whatever
        ``sparsities`` says: they are placed in a column after training)."""
        import pandas as pd

        keep = pd.Series(True, index=plan.index)
        if self.methods:
            keep &= plan["method"].isin(self.methods)
        if self.sparsities:
            keep &= plan["goal"].isna() | plan["goal"].isin(self.sparsities)
        if self.seeds:
            keep &= plan["seed"].isin(self.seeds)
        if self.sections:
            keep &= plan["section"].isin(self.sections)
        return keep

    def apply(self, plan: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``plan`` in the slice."""
        return plan[self.keeps(plan)].reset_index(drop=True)

    def outside(self, section: str, methods: Iterable[str], goal: float | None) -> bool:
        """Whether a table cell (its section, the methods of its row, its goal column; None for
        a per-row column) lies outside the slice."""
        if self.sections and section not in self.sections:
            return True
        if self.methods and not set(methods) & set(self.methods):
            return True
        if goal is None or (isinstance(goal, float) and math.isnan(goal)):
            return False
        return bool(self.sparsities) and float(goal) not in self.sparsities


def _text(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _quote(text: str) -> str:
    return text if text.replace("-", "").replace(",", "").isalnum() else repr(text)


def parse_slice(
    methods: str | None = None,
    sparsities: str | None = None,
    seeds: str | None = None,
    sections: str | None = None,
) -> Slice:
    """The slice of the comma-separated flag values (None: the flag was not given); a value
    that is not a number where one is needed is an error naming the flag."""
    return Slice(
        methods=_words(methods),
        sparsities=tuple(_number(w, "--sparsities", float) for w in _words(sparsities)),
        seeds=tuple(_number(w, "--seeds", int) for w in _words(seeds)),
        sections=_words(sections),
    )


def _words(text: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w.strip() for w in (text or "").split(",") if w.strip()))


def _number(word: str, flag: str, kind: type) -> float:
    try:
        value = kind(word.rstrip("%") if kind is float else word)
    except ValueError:
        unit = "goal sparsities in percent, e.g. 90,95" if kind is float else "integers, e.g. 0,1"
        raise ConfigError(flag, word, f"comma-separated {unit}") from None
    if kind is float and not 0 <= value < 100:
        raise ConfigError(flag, word, "goal sparsities in percent, in [0, 100), e.g. 90,95")
    return float(value) if kind is float else value
