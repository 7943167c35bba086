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
# At smoke scale (issue 38) cnn_wide shows the collapse: global One Shot pruning empties its
# middle conv (73,728 of its 79,424 weights, the smallest magnitudes) from about 98.5% on (9-14
# of its weights survive at 98%, none at 99%). The retraining is 30 epochs One Shot against 3 x
# 10, as the paper's, here 3x the original 10 epochs: with 6 (3 x 2), as with the paper's 15%
# share, iterating ended below One Shot (measured, 2 seeds). Uniform+ is left out: it keeps the
# first conv and a fifth of the classifier dense (1,600 weights), more than 98% sparsity leaves.
COLLAPSE_SMOKE = CriteriaGrid(
    SMOKE,
    (95.0, 98.0, 99.0, 99.5),
    tuple(c for c in CRITERIA if c != "uniform+"),
    SCHEDULES,
    30,
    cycles=(1, 3),
)
LAYER_COLLAPSE = SelectionCriteriaFigure(
    "appendix-distribution-layer-collapse",
    "VGG-16/CIFAR-10: selection criteria One Shot vs iterative with FT and SLR (layer collapse)",
    smoke=COLLAPSE_SMOKE,
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
