"""RIA, relative importance and activations, on LLaMA-3: WikiText-2 perplexity of magnitude,
relative importance alone (RIA without activations), Wanda, SparseGPT and RIA at 50%
unstructured, 2:4 and 4:8, and RIA with its channel permutation (heuristic reallocation refined
by linear sum assignment) under N:M, beside the numbers of the RIA repository's README
(``biomedical-cybernetics/Relative-importance-and-activation-pruning`` Readme.md, "Additional
Experimental Results on LLaMA3"), with the zero-shot mean beside.

Settings of those numbers (the repository's ``main.py`` defaults): 128 calibration windows of
2048 tokens from C4 (seed 0), evaluation windows of 2048 tokens (not LLaMA-3's 8192). The README
also gives Wanda with channel permutation at 2:4 (22.03 on 8B); Wanda here has no permutation,
so that cell is not set. Smoke scale: the tiny Llama with the same rows and columns.
"""

from benchmark.experiments.llm_comparison import published_table
from benchmark.experiments.llm_tables import LMColumn, LMRow

NM = ("2:4", "4:8")
ROWS = (
    LMRow("Dense", "oneshot_magnitude", {"method.sparsity": 0.0, "method.pattern": "unstructured"}),
    LMRow("Magnitude", "oneshot_magnitude"),
    LMRow("Relative Importance", "ria", {"method.a": 0.0}),
    LMRow("Wanda", "wanda"),
    LMRow("SparseGPT", "sparsegpt"),
    LMRow("RIA", "ria"),
    LMRow("RIA + channel permutation", "ria", {"method.permutation": "lsa"}, budgets=NM),
)
COLUMNS = tuple(
    LMColumn(50, pattern, {"method.pattern": pattern}) for pattern in ("unstructured", *NM)
)
MODELS = {"LLaMA-3-8B": "meta-llama/Meta-Llama-3-8B", "LLaMA-3-70B": "meta-llama/Meta-Llama-3-70B"}

# The README's tables, transcribed from their text: (model, row, pattern) -> perplexity.
RIA_README = {
    ("LLaMA-3-8B", "Dense", "unstructured"): 6.14,
    ("LLaMA-3-8B", "Magnitude", "unstructured"): 2499.39,
    ("LLaMA-3-8B", "Relative Importance", "unstructured"): 135.77,
    ("LLaMA-3-8B", "Wanda", "unstructured"): 10.82,
    ("LLaMA-3-8B", "Wanda", "2:4"): 24.18,
    ("LLaMA-3-8B", "SparseGPT", "unstructured"): 9.40,
    ("LLaMA-3-8B", "SparseGPT", "2:4"): 16.26,
    ("LLaMA-3-8B", "SparseGPT", "4:8"): 12.13,
    ("LLaMA-3-8B", "RIA", "unstructured"): 9.34,
    ("LLaMA-3-8B", "RIA", "2:4"): 23.08,
    ("LLaMA-3-8B", "RIA + channel permutation", "2:4"): 20.05,
    ("LLaMA-3-70B", "Dense", "unstructured"): 2.85,
    ("LLaMA-3-70B", "Magnitude", "unstructured"): 19.11,
    ("LLaMA-3-70B", "Relative Importance", "unstructured"): 6.09,
    ("LLaMA-3-70B", "Wanda", "unstructured"): 6.56,
    ("LLaMA-3-70B", "Wanda", "2:4"): 9.28,
    ("LLaMA-3-70B", "SparseGPT", "unstructured"): 5.79,
    ("LLaMA-3-70B", "RIA", "unstructured"): 5.49,
    ("LLaMA-3-70B", "RIA", "2:4"): 8.35,
}
PUBLISHED = {(model, row, 50.0, pattern): v for (model, row, pattern), v in RIA_README.items()}
SPEC = published_table(
    "llm-ria",
    "Language models, RIA on LLaMA-3: WikiText-2 perplexity at 50%, 2:4 and 4:8 (RIA's README)",
    MODELS,
    ROWS,
    COLUMNS,
    PUBLISHED,
    "biomedical-cybernetics/Relative-importance-and-activation-pruning Readme.md, "
    "'Additional Experimental Results on LLaMA3'",
)
