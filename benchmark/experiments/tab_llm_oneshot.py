"""One-shot pruning of language models: WikiText-2 perplexity of magnitude, SparseGPT and Wanda
at 50% unstructured and 2:4 (Llama-2 7B/13B/70B), beside the numbers of the Wanda repository's
README (``locuslab/wanda``, "WikiText perplexity with LLaMA-2").

Smoke scale: a tiny Llama trained here for 3 short epochs on CPython's documentation, the same
rows and columns, plus a section where every pruned model is retrained by PERP's MaskLoRA for 100
iterations (the mask is kept exactly). It shows the protocol end to end and the ordering dense <
SparseGPT < magnitude; it cannot show Wanda's advantage, which comes from the outlier features of
large models (a tiny model has few), so Wanda's place is printed as measured.
"""

from benchmark.experiments.llm_problems import LLAMA2, LM_SMOKE, SMOKE_PARENT_EPOCHS
from benchmark.experiments.llm_tables import LMColumn, LMGrid, LMRow, LMTable

ROWS = (
    # The dense model: the same pipeline at sparsity 0 (nothing pruned, nothing retrained); one
    # run feeds both columns.
    LMRow("Dense", "oneshot_magnitude", {"method.sparsity": 0.0, "method.pattern": "unstructured"}),
    LMRow("Magnitude", "oneshot_magnitude"),
    LMRow("SparseGPT", "sparsegpt"),
    LMRow("Wanda", "wanda"),
)
COLUMNS = (
    LMColumn(50, "unstructured", {"method.pattern": "unstructured"}),
    LMColumn(50, "2:4", {"method.pattern": "2:4"}),
)
MASKLORA = {"method.retrain": "perp", "method.adapter": "masklora", "budget.epochs": 1}
RETRAINED_ROWS = tuple(LMRow(f"{row.label} + MaskLoRA", row.method, MASKLORA) for row in ROWS[1:])
SMOKE_SETTINGS = {"method.parent_epochs": SMOKE_PARENT_EPOCHS}

# The Wanda README's table (WikiText-2 perplexity, LLaMA-2), transcribed from its text.
WANDA_README = {
    "7B": {
        "Dense": (5.12, 5.12),
        "Magnitude": (14.89, 54.59),
        "SparseGPT": (6.51, 10.17),
        "Wanda": (6.42, 11.02),
    },
    "13B": {
        "Dense": (4.57, 4.57),
        "Magnitude": (6.37, 8.33),
        "SparseGPT": (5.63, 8.32),
        "Wanda": (5.56, 8.27),
    },
    "70B": {
        "Dense": (3.12, 3.12),
        "Magnitude": (4.98, 6.33),
        "SparseGPT": (3.98, 5.40),
        "Wanda": (3.98, 5.16),
    },
}
PUBLISHED = {
    (f"Llama-2-{size}", row, 50.0, budget): value
    for size, rows in WANDA_README.items()
    for row, values in rows.items()
    for budget, value in zip(("unstructured", "2:4"), values, strict=True)
}

SPEC = LMTable(
    "llm-oneshot-wikitext2",
    "Language models, one-shot pruning: WikiText-2 perplexity at 50% and 2:4 (Wanda's table)",
    smoke=(
        LMGrid(LM_SMOKE, "tiny Llama (pydoc)", ROWS, COLUMNS, SMOKE_SETTINGS),
        LMGrid(LM_SMOKE, "retrained (MaskLoRA)", RETRAINED_ROWS, COLUMNS, SMOKE_SETTINGS),
    ),
    paper=tuple(LMGrid(p, p.name, ROWS, COLUMNS) for p in LLAMA2.values()),
    published=PUBLISHED,
    source="locuslab/wanda README.md, 'WikiText perplexity with LLaMA-2'",
    smoke_reference="Llama-2-7B",
    reference_rows=("Dense",),
)
# The settings of the Wanda README's numbers (main.py): 128 C4 calibration windows and evaluation
# windows of the model's context (model.seqlen = 4096 for Llama-2), seed 0.
SPEC.paper_settings = {
    p.name: {"data.max_length": 4096, "method.calibration_samples": 128, "seed": 0}
    for p in LLAMA2.values()
}
