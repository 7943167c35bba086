"""Causal language modelling: next-token cross-entropy, perplexity as the pruning papers measure it.

Perplexity follows SparseGPT's and Wanda's ``eval_ppl`` (and PERP's ``compute_ppl_wikitext``):
the split's text is tokenised once and cut into non-overlapping windows of the sequence length
(``data.max_length``); each window's mean next-token cross-entropy is taken, and the perplexity
is exp of their mean (all windows have the same length, so that is exp of the mean NLL per
predicted token). The headline metric is ``neg_ppl`` (higher is better, as every task's) and
prints as the perplexity (its scale is -1).

A model whose decoder layers are offloaded (:mod:`benchmark.pruning.offload`) is evaluated one
layer at a time over every window, as the references' ``*_eval`` functions do; a model in half
precision (``model.dtype``) is evaluated in it, under autocast to it once retraining made it
mixed (its trained parameters are kept in float32).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.core.precision import half_autocast
from benchmark.pruning.offload import placement_of
from benchmark.tasks.base import TASKS, Task

if TYPE_CHECKING:
    from benchmark.data.base import DataSource


def next_token_logits(model: nn.Module, ids: Tensor) -> Tensor:
    """The logits (N, L, vocab) of a causal language model on token windows ``ids``."""
    return model(input_ids=ids).logits


def window_nll(logits: Tensor, ids: Tensor) -> Tensor:
    """Each window's mean next-token cross-entropy (N,): position t predicts token t+1."""
    shift_logits = logits[:, :-1].float()
    shift_labels = ids[:, 1:]
    per_token = F.cross_entropy(shift_logits.transpose(1, 2), shift_labels, reduction="none")
    return per_token.mean(dim=1)


HALF = {"bfloat16": torch.bfloat16, "float16": torch.float16}
# An offloaded evaluation runs its windows through the layers in groups of this many (the
# papers' calibration count: no more device memory than the calibration's hidden states).
EVAL_GROUP = 128


def mixed_precision(model: nn.Module) -> bool:
    """Whether the model's floating-point parameters come in more than one precision."""
    return len({p.dtype for p in model.parameters() if p.is_floating_point()}) > 1


def _logits(model: nn.Module, data: DataSource, split: str) -> Iterator[tuple[Tensor, Tensor]]:
    """``(windows, logits)`` of every evaluation batch of ``split``: the whole model at once, or
    one decoder layer at a time over every window when the model is offloaded."""
    from benchmark.measure.metrics import model_device

    placement = placement_of(model)
    if placement is not None and placement.offload:
        from benchmark.pruning.layerwise import layerwise_logits

        batches = [ids for ids, _ in data.eval_batches(split)]
        if not batches:
            return
        # Every layer's sweep holds the hidden states of at most EVAL_GROUP windows.
        step = max(1, EVAL_GROUP // len(batches[0]))
        for start in range(0, len(batches), step):
            ids = torch.cat(batches[start : start + step]).to(placement.device)
            yield from layerwise_logits(model, ids, len(batches[0]), placement)
        return
    device = model_device(model)
    for ids, _ in data.eval_batches(split):
        ids = ids.to(device)
        yield ids, next_token_logits(model, ids)


@torch.no_grad()
def evaluate_lm(
    model: nn.Module, data: DataSource, split: str, *, half: torch.dtype | None = None
) -> dict[str, float]:
    """Return "loss" (mean NLL per predicted token), "ppl" (exp of it), "neg_ppl" and "top1"
    (next-token accuracy) over ``split``'s non-overlapping windows; under autocast to
    ``half`` when given."""
    from benchmark.measure.metrics import eval_mode, model_device

    device = model_device(model)
    nll_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    windows = predicted = 0
    with eval_mode(model), half_autocast(device, half):
        for ids, logits in _logits(model, data, split):
            nll_sum += window_nll(logits, ids).double().sum()
            correct += logits[:, :-1].argmax(-1).eq(ids[:, 1:]).sum()
            windows += ids.shape[0]
            predicted += ids[:, 1:].numel()
    if windows == 0:
        raise ValueError(f"evaluate_lm() got no {split} windows")
    loss = nll_sum.item() / windows
    ppl = math.exp(loss) if loss < 700 else math.inf
    return {"loss": loss, "ppl": ppl, "neg_ppl": -ppl, "top1": int(correct) / predicted}


@TASKS.register("causal_lm")
class CausalLM(Task):
    """Token windows in, the next token of every position out; scored by perplexity."""

    name = "causal_lm"
    metric = "neg_ppl"
    metric_label = "PPL"
    metric_scale = -1.0
    batch = "inputs: int64 token windows (N, L); targets: the same windows (shifted by the task)"
    # The output head is tied to the token embedding in OPT and GPT-2 and kept dense by the
    # papers (SparseGPT, Wanda and PERP prune the decoder layers' linear maps only).
    default_exclude = ("lm_head",)

    def loss(self, model: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy over the batch's windows."""
        return window_nll(next_token_logits(model, inputs), targets).mean()

    def autocast_dtype(self) -> torch.dtype | None:
        """A half ``model.dtype`` (mixed precision: float32 trained parameters), else as
        every task (``optim.bf16`` / ``optim.fp16``)."""
        return HALF.get(self.cfg.model.dtype) or super().autocast_dtype()

    def evaluate(self, model: nn.Module, data: DataSource, split: str) -> dict[str, float]:
        """Loss, perplexity and next-token accuracy of ``split``: a half-precision model runs
        in its precision as the references evaluate it, under autocast only once retraining
        made it mixed (float32 trained parameters)."""
        cast = self.autocast_dtype()
        if self.cfg.model.dtype != "float32" and not mixed_precision(model):
            cast = None
        return evaluate_lm(model, data, split, half=cast)

    def speedup(self, model: nn.Module, data: DataSource) -> dict[str, float]:
        """The theoretical speedup on a test batch (an offloaded model: run layer by layer)."""
        from benchmark.measure.metrics import theoretical_speedup

        placement = placement_of(model)
        if placement is None or not placement.offload:
            return super().speedup(model, data)
        from benchmark.pruning.layerwise import layerwise_logits

        ids = self.example_inputs(data).to(placement.device)
        return theoretical_speedup(
            model, ids, run=lambda: list(layerwise_logits(model, ids, len(ids), placement))
        )
