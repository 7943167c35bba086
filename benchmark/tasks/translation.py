"""Neural machine translation: token cross-entropy, corpus BLEU of greedy translations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmark.core.precision import autocast_dtype, half_autocast
from benchmark.tasks.base import TASKS, Task

if TYPE_CHECKING:
    from benchmark.data.base import DataSource

PAD_ID = 0
LABEL_IGNORE = -100


def model_inputs(source: Tensor, target: Tensor) -> dict[str, Tensor]:
    """Encoder inputs and teacher-forced decoder inputs (targets shifted right after a pad)."""
    start = torch.full_like(target[:, :1], PAD_ID)
    return {
        "input_ids": source,
        "attention_mask": source.ne(PAD_ID).long(),
        "decoder_input_ids": torch.cat([start, target[:, :-1]], dim=1),
    }


def token_logits(model: nn.Module, source: Tensor, target: Tensor) -> Tensor:
    """Teacher-forced next-token logits (N, L, vocab) of a sequence-to-sequence model."""
    return model(**model_inputs(source, target)).logits


def bleu(hypotheses: list[str], references: list[str]) -> float:
    """sacrebleu's corpus BLEU (13a tokenisation, 0-100) of detokenised sentences."""
    import sacrebleu

    return float(sacrebleu.corpus_bleu(hypotheses, [references]).score)


@torch.no_grad()
def evaluate_translation(
    model: nn.Module,
    data: DataSource,
    split: str,
    *,
    half: torch.dtype | None = None,
    with_bleu: bool = True,
) -> dict[str, float]:
    """Return "loss" (cross-entropy per target token), "top1" (teacher-forced token accuracy)
    and, with ``with_bleu``, "bleu": greedy translations against the split's references."""
    from benchmark.measure.metrics import eval_mode, model_device

    device = model_device(model)
    loss_sum = torch.zeros((), dtype=torch.float64, device=device)
    correct = torch.zeros((), dtype=torch.int64, device=device)
    tokens = 0
    hypotheses: list[str] = []
    with eval_mode(model):
        for source, target in data.eval_batches(split):
            source, target = source.to(device), target.to(device)
            with half_autocast(device, half):
                logits = token_logits(model, source, target).float()
                if with_bleu:
                    generated = model.generate(
                        input_ids=source,
                        attention_mask=source.ne(PAD_ID).long(),
                        # Stop at EOS or at the sequence-length limit (data.max_length).
                        max_new_tokens=data.max_length,  # type: ignore[attr-defined]
                        do_sample=False,
                        num_beams=1,
                    )
                    hypotheses += data.decode(generated[:, 1:])  # type: ignore[attr-defined]
            real = target.ne(PAD_ID)
            loss_sum += F.cross_entropy(logits[real], target[real], reduction="sum").double()
            correct += (logits.argmax(-1).eq(target) & real).sum()
            tokens += int(real.sum())
    if tokens == 0:
        raise ValueError("evaluate_translation() got no target tokens")
    out = {"loss": loss_sum.item() / tokens, "top1": int(correct) / tokens}
    if with_bleu:
        out["bleu"] = bleu(hypotheses, data.references[split])  # type: ignore[attr-defined]
    return out


@TASKS.register("translation")
class Translation(Task):
    """Token sequences to token sequences; scored by corpus BLEU on sacrebleu's 0-100 scale."""

    name = "translation"
    metric = "bleu"
    metric_label = "BLEU"
    metric_scale = 1.0
    batch = (
        "inputs: int64 source token ids (N, S); targets: int64 target token ids (N, T), "
        "each ending with EOS, padded with 0"
    )
    # The output projection is tied to the shared token embedding: an embedding, not a layer.
    default_exclude = ("lm_head",)

    def loss(self, model: nn.Module, inputs: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy over the (non-padding) target tokens, teacher-forced."""
        logits = token_logits(model, inputs, targets)
        labels = targets.masked_fill(targets.eq(PAD_ID), LABEL_IGNORE)
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)

    def evaluate(self, model: nn.Module, data: DataSource, split: str) -> dict[str, float]:
        """Loss, token accuracy and (on the validation and test splits) BLEU."""
        return evaluate_translation(
            model,
            data,
            split,
            half=autocast_dtype(self.cfg.optim.precision()),
            with_bleu=split != "train",
        )

    def example_inputs(self, data: DataSource) -> Mapping[str, Tensor]:
        """One test batch of (source, teacher-forced target) inputs."""
        source, target = data.example_pair()  # type: ignore[attr-defined]
        return model_inputs(source, target)
