"""What a one-shot language-model run's phase before training costs, from finished runs.

A finished run with a setup phase (loading, the one-shot prune and its evaluations) measured
its seconds outside training: its ``setup_seconds`` plus its wall-clock less its epochs'. Where
its record holds its ``forward_tokens`` (calibration and evaluation,
:mod:`benchmark.training.forward_tokens`), those seconds give a rate in tokens per second of the
whole phase (loading included); a run to price takes its own tokens over the median rate of its
workload on the device (the same method's runs first, else any method's, marked as such), so a
run with another calibration size or window length is priced by its tokens. Where no finished
run recorded its tokens, or the run's evaluation tokens are not counted (its files are not
here), it takes the median seconds of finished runs instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field

from benchmark.config.run import RunConfig
from benchmark.training.forward_tokens import ForwardTokens


@dataclass(frozen=True)
class SetupPrice:
    """The seconds of a run's setup phase and how they were priced."""

    seconds: float
    other_method: bool  # priced at another method's finished runs
    by_tokens: bool  # tokens over a measured tokens/s (else seconds per run)


@dataclass
class OneShotTimes:
    """Seconds and tokens/s of the setup phases of a store's finished runs, by (workload,
    device, method or "")."""

    seconds: dict[tuple[Hashable, str, str], list[float]] = field(default_factory=dict)
    rates: dict[tuple[Hashable, str, str], list[float]] = field(default_factory=dict)

    def add(self, w: Hashable, device: str, method: str, metrics: Mapping) -> None:
        """A finished run's seconds outside its training epochs (its setup seconds and its
        wall-clock less its epochs') and, where it recorded its forward tokens, its rate."""
        seconds = float(metrics["setup_seconds"]) + float(metrics.get("wall_seconds", 0.0))
        seconds -= sum(float(x) for x in metrics.get("epoch_seconds") or [])
        tokens = recorded_tokens(metrics)
        for key in ((w, device, method), (w, device, "")):
            self.seconds.setdefault(key, []).append(seconds)
            if tokens and seconds > 0:
                self.rates.setdefault(key, []).append(tokens / seconds)

    def devices(self) -> set[str]:
        """The devices a setup phase was measured on."""
        return {d for _, d, _ in self.seconds}

    def measured(self, w: Hashable, device: str) -> bool:
        """Whether any finished run of ``w`` on ``device`` measured its setup phase."""
        return (w, device, "") in self.seconds

    def price(
        self, cfg: RunConfig, w: Hashable, device: str, tokens: ForwardTokens | None
    ) -> SetupPrice | None:
        """The setup seconds of ``cfg`` (its forward ``tokens``): its tokens over the median
        tokens/s where a rate and its tokens are known, else the median seconds; None when no
        finished run of ``w`` on ``device`` measured either."""
        total = tokens.total if tokens is not None else None
        method = cfg.method.name
        for table, by_tokens in ((self.rates, True), (self.seconds, False)):
            if by_tokens and not total:
                continue
            for key, other in (((w, device, method), False), ((w, device, ""), True)):
                found = table.get(key)
                if found:
                    median = statistics.median(found)
                    seconds = total / median if by_tokens and total else median
                    return SetupPrice(seconds, other, by_tokens)
        return None


def recorded_tokens(metrics: Mapping) -> int | None:
    """The forward tokens a finished run recorded (None: not recorded, or not counted)."""
    found = metrics.get("forward_tokens") or {}
    if found.get("evaluation") is None:
        return None
    return int(found.get("calibration") or 0) + int(found["evaluation"])
