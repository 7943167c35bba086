"""Zero-shot accuracy after one-shot pruning, as Wanda's zero-shot table reports it: BoolQ, RTE,
HellaSwag, WinoGrande, ARC-e, ARC-c and OpenBookQA through lm-evaluation-harness (accuracy,
no few-shot examples) and their mean, with WikiText-2 perplexity beside, for the dense model,
magnitude, SparseGPT, Wanda and RIA at 50% unstructured sparsity on Llama-2 7B/13B/70B.

Wanda's zero-shot cell values (arXiv 2306.11695) were not reachable as text here (its README
gives perplexity only), so the table has no published numbers beside it. Smoke scale: the tiny
Llama of the one-shot table, scored on the shipped ``pydoc_cloze`` task (which of four spans of
CPython's documentation continues a passage; chance 25%).
"""

from benchmark.experiments.llm_comparison import SMOKE_TASKS, TASKS, paper_grids, smoke_grid
from benchmark.experiments.llm_problems import LLAMA2
from benchmark.experiments.llm_tables import LMColumn, LMRow, LMTable

ROWS = (
    LMRow("Dense", "oneshot_magnitude", {"method.sparsity": 0.0}),
    LMRow("Magnitude", "oneshot_magnitude"),
    LMRow("SparseGPT", "sparsegpt"),
    LMRow("Wanda", "wanda"),
    LMRow("RIA", "ria"),
)
COLUMNS = (LMColumn(50, "unstructured", {"method.pattern": "unstructured"}),)

SPEC = LMTable(
    "llm-zero-shot",
    "Language models, zero-shot accuracy (lm-eval, 7 tasks) after one-shot pruning at 50%",
    smoke=(smoke_grid(ROWS, COLUMNS),),
    paper=paper_grids(tuple(LLAMA2.values()), ROWS, COLUMNS),
    reference_rows=("Dense",),
)
SPEC.metrics = ("ppl", *(f"zs_{t}" for t in TASKS), "zs_mean")
SPEC.smoke_metrics = ("ppl", *(f"zs_{t}" for t in SMOKE_TASKS))
SPEC.unpublished = (
    "Wanda's zero-shot cell values (arXiv 2306.11695) were not reachable as text here; its "
    "README (locuslab/wanda) gives WikiText-2 perplexity only"
)
