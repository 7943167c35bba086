"""Retraining after one-shot magnitude pruning of language models in PERP's setting (OPT models,
C4 retraining, WikiText-2 perplexity): no retraining, full retraining with the masks kept, and
PERP's parameter-efficient set (biases, norms, a LoRA adapter on the head) alone or with LoRA,
MaskLoRA or ScaleLoRA on the pruned maps, each under the same budget with a linear schedule
(PERP's) or ALLR's rule (the paper's). Retraining runs as PERP's code does: gradient norms clipped
at 1.0 and, at paper scale, each C4 document truncated to the context as a training example.

PERP's published cell values (arXiv 2312.15230) were not reachable as text here, so the table has
no published numbers beside it. Smoke scale: the tiny Llama on CPython's documentation at 70%, 50
retraining iterations, pruned from a dense parent of its own, not the one-shot table's: 3 epochs
of 50 iterations (the one-shot table's parent trains 3 of 100), under-trained (test perplexity
12.8 over 2 seeds, against 8.5). Retraining goes on training a model that is still learning, so
"Full" (every weight) ends below its own dense parent (12.6). The table shows how much of the
gap each variant recovers on such a model and that every adapter merges with the pruned mask, not
how the variants rank on billion-parameter models.
"""

from collections.abc import Mapping
from typing import Any

from benchmark.experiments.llm_problems import (
    LM_SMOKE,
    OPT,
    PERP_DATA,
    PERP_HEAD,
    PERP_TRAINER,
    SMOKE_PARENT_EPOCHS,
)
from benchmark.experiments.llm_tables import LMColumn, LMGrid, LMRow, LMTable


def rows(data: Mapping[str, Any]) -> tuple[LMRow, ...]:
    """The rows; every retraining one clips gradients as PERP's trainer, PERP's rows put a LoRA
    adapter on the head, and ``data`` says the retraining windows (PERP's documents at paper
    scale)."""
    trained = {**PERP_TRAINER, **data}
    perp = {"method.retrain": "perp", **PERP_HEAD, **trained}
    return (
        # Nothing retrained: one run feeds both schedule columns.
        LMRow("None", "oneshot_magnitude", {"method.retrain_schedule": "linear"}),
        LMRow("Full", "oneshot_magnitude", {"method.retrain": "full", **trained}),
        LMRow(
            "PERP (biases, norms, head)", "oneshot_magnitude", {**perp, "method.adapter": "none"}
        ),
        *(
            LMRow(f"PERP + {label}", "oneshot_magnitude", {**perp, "method.adapter": adapter})
            for label, adapter in (
                ("LoRA", "lora"),
                ("MaskLoRA", "masklora"),
                ("ScaleLoRA", "scalelora"),
            )
        ),
    )


def columns(goals: tuple[int, ...]) -> tuple[LMColumn, ...]:
    """Each goal sparsity with the linear and the ALLR schedule."""
    return tuple(
        LMColumn(goal, label, {"method.retrain_schedule": schedule})
        for goal in goals
        for label, schedule in (("linear", "linear"), ("ALLR", "allr"))
    )


SMOKE_SETTINGS = {
    "method.parent_epochs": SMOKE_PARENT_EPOCHS,
    "budget.epochs": 1,
    "data.epoch_iters": 50,
}
# PERP: batch 1 with 2 gradient-accumulation steps (one batch of 2 here), one budget epoch.
PAPER_SETTINGS = {"data.batch_size": 2, "budget.epochs": 1}

SPEC = LMTable(
    "llm-retraining-perp",
    "Language models, retraining after magnitude pruning: none, full, PERP and its LoRA variants",
    smoke=(LMGrid(LM_SMOKE, "tiny Llama (pydoc)", rows({}), columns((70,)), SMOKE_SETTINGS),),
    paper=tuple(
        LMGrid(p, p.name, rows(PERP_DATA), columns((50, 60, 70)), PAPER_SETTINGS)
        for p in OPT.values()
    ),
    column_name="schedule",
)
SPEC.unpublished = "PERP's cell values (arXiv 2312.15230) were not reachable as text here"
