"""OWL, outlier-weighed layer-wise sparsity, at 70% unstructured sparsity: magnitude, Wanda and
SparseGPT with uniform layer sparsities against Wanda and SparseGPT with OWL's (M = 5,
lambda = 0.08), WikiText-2 perplexity on LLaMA-1 7B/13B/30B/65B and OPT-6.7B, beside the numbers
of the OWL repository's README (``luuyin/OWL`` README.md, the table under "Results"), with the
zero-shot mean beside.

Settings of those numbers (the README's scripts and ``main.py``): 128 calibration windows of
2048 tokens from C4 (seed 0) and evaluation windows of the models' context, 2048 tokens. The
README captions its table "WikiText validation perplexity"; the code it builds on (Wanda's
``eval_ppl``) evaluates the test split, which is what is run here. Smoke scale: the tiny Llama
at 70%; a tiny model has few outlier features, so OWL's gain is printed as measured.
"""

from benchmark.experiments.llm_comparison import published_table
from benchmark.experiments.llm_tables import LMColumn, LMRow

OWL = {"method.allocation": "owl"}
ROWS = (
    LMRow("Dense", "oneshot_magnitude", {"method.sparsity": 0.0}),
    LMRow("Magnitude", "oneshot_magnitude"),
    LMRow("Wanda", "wanda"),
    LMRow("OWL w. Wanda", "wanda", OWL),
    LMRow("SparseGPT", "sparsegpt"),
    LMRow("OWL w. SparseGPT", "sparsegpt", OWL),
)
COLUMNS = (LMColumn(70, "unstructured", {"method.pattern": "unstructured"}),)
MODELS = {
    "LLaMA-7B": "huggyllama/llama-7b",
    "LLaMA-13B": "huggyllama/llama-13b",
    "LLaMA-30B": "huggyllama/llama-30b",
    "LLaMA-65B": "huggyllama/llama-65b",
    "OPT-6.7B": "facebook/opt-6.7b",
}

# The README's table, transcribed from its text (70% sparsity; Dense: the unpruned model).
OWL_README = {
    "Dense": (5.68, 5.09, 4.10, 4.77, 10.13),
    "Magnitude": (48419.12, 84539.45, 977.73, 46.89, 290985.03),
    "Wanda": (85.77, 55.90, 17.37, 15.23, 162.92),
    "OWL w. Wanda": (24.55, 17.17, 10.75, 8.61, 40.22),
    "SparseGPT": (26.30, 19.24, 12.56, 10.45, 20.29),
    "OWL w. SparseGPT": (19.49, 14.55, 10.28, 8.28, 22.48),
}
PUBLISHED = {
    (section, row, 70.0, "unstructured"): value
    for row, values in OWL_README.items()
    for section, value in zip(MODELS, values, strict=True)
}
SPEC = published_table(
    "llm-owl",
    "Language models, OWL's layer sparsities at 70%: WikiText-2 perplexity (OWL's README table)",
    MODELS,
    ROWS,
    COLUMNS,
    PUBLISHED,
    "luuyin/OWL README.md, 'Results' (WikiText perplexity at 70% sparsity)",
)
