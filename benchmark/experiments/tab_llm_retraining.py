"""Retraining after one-shot magnitude pruning of language models in PERP's setting (OPT models,
C4 retraining, WikiText-2 perplexity): no retraining, full retraining with the masks kept, and
PERP's parameter-efficient set (biases, norms, head) alone or with LoRA, MaskLoRA or ScaleLoRA,
each under the same budget with a linear schedule (PERP's) or ALLR's rule (the paper's).

PERP's published cell values (arXiv 2312.15230) were not reachable as text here, so the table has
no published numbers beside it. Smoke scale: the tiny Llama of the one-shot table at 70%, 50
retraining iterations; it shows how much of the gap each variant recovers there and that every
adapter merges with the pruned mask, not how the variants rank on billion-parameter models.
"""

from benchmark.experiments.llm_problems import LM_SMOKE, OPT, SMOKE_PARENT_EPOCHS
from benchmark.experiments.llm_tables import LMColumn, LMGrid, LMRow, LMTable

PERP = {"method.retrain": "perp"}
ROWS = (
    # Nothing retrained: one run feeds both schedule columns.
    LMRow("None", "oneshot_magnitude", {"method.retrain_schedule": "linear"}),
    LMRow("Full", "oneshot_magnitude", {"method.retrain": "full"}),
    LMRow("PERP (biases, norms, head)", "oneshot_magnitude", {**PERP, "method.adapter": "none"}),
    *(
        LMRow(f"PERP + {label}", "oneshot_magnitude", {**PERP, "method.adapter": adapter})
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
    smoke=(LMGrid(LM_SMOKE, "tiny Llama (pydoc)", ROWS, columns((70,)), SMOKE_SETTINGS),),
    paper=tuple(
        LMGrid(p, p.name, ROWS, columns((50, 60, 70)), PAPER_SETTINGS) for p in OPT.values()
    ),
    column_name="schedule",
)
SPEC.unpublished = "PERP's cell values (arXiv 2312.15230) were not reachable as text here"
