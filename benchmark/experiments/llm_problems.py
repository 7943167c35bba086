"""The language-model setups: the papers' pretrained models on WikiText-2 with C4 (paper scale)
and a tiny Llama trained here on CPython's documentation (smoke scale).

Paper scale loads ``hf:<repo>`` models from the local Hugging Face cache (never downloaded;
``prunebench reproduce`` names what is missing) and evaluates at the models' full context, as
Wanda (``model.seqlen = max_position_embeddings``: 4096 for Llama-2) and SparseGPT/PERP (2048 for
OPT) do. Retraining uses AdamW without weight decay (PERP: Hugging Face ``Trainer`` defaults).
The one-shot models load, prune and evaluate in float16, as Wanda's and SparseGPT's code load
them; the retrained ones in bfloat16 with float32 trained parameters (PERP trains in float16
with loss scaling, which the harness does not do).
"""

from __future__ import annotations

from benchmark.experiments.base import Problem

ADAMW = {"optim": {"name": "adamw", "weight_decay": 0.0}}
# Smoke: the dense parent trains 3 epochs of 100 iterations of 16 windows of 64 bytes. Paper
# scale: one seed (the calibration draw), as Wanda's and SparseGPT's tables.
SMOKE_PARENT_EPOCHS = 3
LM_SMOKE = Problem(
    "llama_tiny-pydoc",
    {
        "name": "pydoc",
        "max_length": 64,
        "batch_size": 16,
        "eval_batch_size": 128,
        "epoch_iters": 100,
    },
    "llama_tiny",
    SMOKE_PARENT_EPOCHS,
    {"name": "linear", "lr": 0.003},
    (0.0,),
    (0, 1),  # two seeds, as every smoke table (mean and std over seeds)
    {**ADAMW, "logging": {"progress": False}, "runtime": {"threads": 1}},
)


def pretrained_lm(
    name: str, repo: str, context: int, epoch_iters: int = 0, dtype: str = "float16"
) -> Problem:
    """A pretrained Hub model on WikiText-2 (C4 for calibration and retraining), batch 1, in
    ``dtype`` (``model.dtype``)."""
    data = {
        "name": "wikitext2",
        "max_length": context,
        "batch_size": 1,
        "eval_batch_size": 1,
        "tokenizer": f"hf:{repo}",
        "epoch_iters": epoch_iters,
    }
    extra = {**ADAMW, "model": {"pretrained": f"hf:{repo}", "dtype": dtype}}
    return Problem(name, data, "causal_lm", 1, {"name": "linear", "lr": 5e-4}, (0.0,), (0,), extra)


LLAMA2 = {
    size: pretrained_lm(f"Llama-2-{size}", f"meta-llama/Llama-2-{size.lower()}-hf", 4096)
    for size in ("7B", "13B", "70B")
}
# PERP's retraining budget is our choice here (1000 iterations of 2 windows of 2048 tokens,
# about 4M tokens); PERP's own tables' budgets were not reachable as text.
PERP_ITERS = 1000
OPT = {
    size: pretrained_lm(f"OPT-{size}", f"facebook/opt-{size.lower()}", 2048, PERP_ITERS, "bfloat16")
    for size in ("2.7B", "6.7B", "13B")
}
