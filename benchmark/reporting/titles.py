"""Titles that say what actually ran: at smoke scale, the dataset and model of the runs.

A smoke run of "ResNet-56/CIFAR-10 ..." trains a small CNN on digits; its figures and tables say
so, e.g. "ResNet-56/CIFAR-10 One Shot IMP ... (smoke scale: digits, cnn_wide)".
"""

from __future__ import annotations

from pathlib import Path

from benchmark.experiments.base import Experiment, Scale


def what_ran(
    experiment: Experiment, scale: Scale, store: str | Path, section: str | None = None
) -> str:
    """ "dataset, model" pairs of the runs of ``experiment`` at ``scale`` (sorted, joined); only
    those of ``section`` when given."""
    pairs = {
        (r.cfg.data.name, r.cfg.model.name)
        for r in experiment.runs(scale, store)
        if section is None or r.section == section
    }
    return "; ".join(f"{data}, {model}" for data, model in sorted(pairs))


def sections_not_run(experiment: Experiment, scale: Scale) -> list[str]:
    """Sections of the paper-scale table that ``scale`` does not run (a smoke grid often keeps
    one: the stable-unstable table's smoke runs stand in for CIFAR-10, not ImageNet). Figures
    without a table layout give none (their paper grids are not expanded to find out)."""
    if scale == "paper":
        return []
    paper, this = experiment.layout("paper"), experiment.layout(scale)
    if paper is None or this is None:
        return []
    ran = {s for b in this.blocks for s, _ in b.groups}
    return [s for s in dict.fromkeys(s for b in paper.blocks for s, _ in b.groups) if s not in ran]


def scale_text(experiment: Experiment, scale: Scale, store: str | Path) -> str:
    """ "paper scale", or "smoke scale: <dataset>, <model>" naming what the smoke runs train."""
    if scale != "smoke":
        return f"{scale} scale"
    ran = what_ran(experiment, scale, store)
    return f"smoke scale: {ran}" if ran else "smoke scale"


def title(experiment: Experiment, scale: Scale, store: str | Path) -> str:
    """The experiment's description followed by what ran, in parentheses."""
    return f"{experiment.description} ({scale_text(experiment, scale, store)})"
