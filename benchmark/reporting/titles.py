"""Titles that say what actually ran: at smoke scale, the dataset and model of the runs.

A smoke run of "ResNet-56/CIFAR-10 ..." trains a small CNN on digits; its figures and tables say
so, e.g. "ResNet-56/CIFAR-10 One Shot IMP ... (smoke scale: digits, cnn_wide)".
"""

from __future__ import annotations

from pathlib import Path

from benchmark.experiments.base import Experiment, Scale


def what_ran(experiment: Experiment, scale: Scale, store: str | Path) -> str:
    """ "dataset, model" pairs of the runs of ``experiment`` at ``scale`` (sorted, joined)."""
    pairs = {(r.cfg.data.name, r.cfg.model.name) for r in experiment.runs(scale, store)}
    return "; ".join(f"{data}, {model}" for data, model in sorted(pairs))


def scale_text(experiment: Experiment, scale: Scale, store: str | Path) -> str:
    """ "paper scale", or "smoke scale: <dataset>, <model>" naming what the smoke runs train."""
    if scale != "smoke":
        return f"{scale} scale"
    ran = what_ran(experiment, scale, store)
    return f"smoke scale: {ran}" if ran else "smoke scale"


def title(experiment: Experiment, scale: Scale, store: str | Path) -> str:
    """The experiment's description followed by what ran, in parentheses."""
    return f"{experiment.description} ({scale_text(experiment, scale, store)})"
