"""Pruning selection criteria (Global, Uniform, Uniform+, ERK, LAMP) with FT and SLR."""

import dataclasses

from benchmark.experiments.figure_specs import CriteriaGrid, SelectionCriteriaFigure
from benchmark.experiments.problems import (
    RESNET50_IMAGENET,
    RESNET56_CIFAR10,
    SMOKE,
    VGG16_CIFAR10,
    WRN_CIFAR100,
)

CRITERIA = ("global", "uniform", "uniform+", "erk", "lamp")
SCHEDULES = ("FT", "SLR")
SPARSITIES = (50.0, 70.0, 80.0, 90.0, 95.0, 98.0, 99.0)
SMOKE_GRID = CriteriaGrid(SMOKE, (50, 80, 90), CRITERIA, SCHEDULES, 2)

CIFAR10 = SelectionCriteriaFigure(
    "appendix-confidence-cifar10-oneshot",
    "ResNet-56/CIFAR-10 One Shot: selection criteria, sparsity/speedup vs accuracy",
    smoke=SMOKE_GRID,
    paper=CriteriaGrid(
        dataclasses.replace(RESNET56_CIFAR10, weight_decays=(1e-4, 5e-4, 1e-3), seeds=(0, 1, 2)),
        SPARSITIES,
        CRITERIA,
        SCHEDULES,
        30,
    ),
)
CIFAR100 = SelectionCriteriaFigure(
    "appendix-confidence-cifar100-oneshot",
    "WRN-28-10/CIFAR-100 One Shot: selection criteria, sparsity/speedup vs accuracy",
    smoke=SMOKE_GRID,
    paper=CriteriaGrid(
        dataclasses.replace(WRN_CIFAR100, weight_decays=(1e-4,), seeds=(0, 1, 2)),
        SPARSITIES,
        CRITERIA,
        SCHEDULES,
        30,
    ),
)
IMAGENET = SelectionCriteriaFigure(
    "appendix-confidence-imagenet-oneshot",
    "ResNet-50/ImageNet One Shot: selection criteria, sparsity/speedup vs accuracy (one seed)",
    smoke=SMOKE_GRID,
    paper=CriteriaGrid(
        dataclasses.replace(RESNET50_IMAGENET, seeds=(0,)),
        (70.0, 80.0, 90.0, 95.0),
        CRITERIA,
        SCHEDULES,
        10,
    ),
)
# One Shot (30 epochs) against 3 cycles of 10: the same retraining budget, but One Shot
# collapses layers under some criteria at high sparsity. Three seeds: "The CIFAR-10 and
# CIFAR-100 results are averaged over three seeds" (the paragraph naming this figure).
LAYER_COLLAPSE = SelectionCriteriaFigure(
    "appendix-distribution-layer-collapse",
    "VGG-16/CIFAR-10: selection criteria One Shot vs iterative with FT and SLR (layer collapse)",
    smoke=dataclasses.replace(SMOKE_GRID, cycles=(1, 2)),
    paper=CriteriaGrid(
        dataclasses.replace(VGG16_CIFAR10, seeds=(0, 1, 2)),
        SPARSITIES,
        CRITERIA,
        SCHEDULES,
        30,
        cycles=(1, 3),
    ),
)
SPECS = (CIFAR10, CIFAR100, IMAGENET, LAYER_COLLAPSE)
