"""The run's model as an lm-evaluation-harness model (imported only when lm-eval is installed).

:class:`HarnessLM` scores ``(context, continuation)`` requests as lm-eval's own Hugging Face model
(``HFLM``) does: the pair is encoded together with the run's tokenizer (its default special
tokens, as ``HFLM``'s default) and split where the context's tokens end, trailing spaces of the
context moved to the continuation (``TemplateLM``); inputs longer than the model's positions are
cut from the left; a batch is padded on the right (a causal model's scores of the real tokens do
not see the padding); the log-probabilities are taken in float32. Only log-likelihood tasks
(multiple choice) are served: generation and rolling perplexity are refused before any compute.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from lm_eval.api.model import TemplateLM
from torch import nn

# lm-eval's default context when the model's configuration names no maximum.
DEFAULT_MAX_LENGTH = 2048
NEWLINE = 10  # the context of an empty-context request with the byte tokenizer (no BOS)


class HarnessLM(TemplateLM):
    """A causal LM of the harness (``model``) with its tokenizer's ``encode``."""

    def __init__(
        self, model: nn.Module, encode: Callable[[str], list[int]], batch_size: int
    ) -> None:
        super().__init__()
        self.model = model
        self.encode = encode
        self.batch = batch_size
        self._device = next(model.parameters()).device
        config = getattr(model, "config", None)
        positions = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None
        )
        self.max_length = int(positions or DEFAULT_MAX_LENGTH)
        empty = encode("")
        self.prefix = empty[0] if empty else NEWLINE

    @property
    def eot_token_id(self) -> int:
        return self.prefix

    @property
    def prefix_token_id(self) -> int:
        return self.prefix

    def tok_encode(
        self, string: str, add_special_tokens: bool | None = None, **_: object
    ) -> list[int]:
        """The run's own encoding (its tokenizer's default special tokens)."""
        return self.encode(string)

    @torch.no_grad()
    def _loglikelihood_tokens(
        self, requests: list[tuple[tuple[str, str], list[int], list[int]]], **kwargs
    ) -> list[tuple[float, bool]]:
        out: list[tuple[float, bool]] = [(0.0, False)] * len(requests)
        # Longest first, so that each batch pads little.
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i][1] + requests[i][2]))
        for start in range(0, len(order), self.batch):
            chunk = order[start : start + self.batch]
            # Context and continuation, cut from the left to the positions, less the last token.
            whole = [requests[i][1] + requests[i][2] for i in chunk]
            inputs = [x[-(self.max_length + 1) :][:-1] for x in whole]
            width = max(len(x) for x in inputs)
            ids = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, x in enumerate(inputs):
                ids[row, : len(x)] = torch.tensor(x)
            logits = self.model(input_ids=ids.to(self._device)).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            for row, i in enumerate(chunk):
                cont = requests[i][2]
                end = len(inputs[row])
                scores = logprobs[row, end - len(cont) : end]
                target = torch.tensor(cont, device=scores.device)
                total = float(scores.gather(1, target.view(-1, 1)).sum())
                out[i] = (total, bool((scores.argmax(dim=-1) == target).all()))
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        raise NotImplementedError("prunebench's zero-shot evaluation serves multiple choice only")

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        raise NotImplementedError("prunebench's zero-shot evaluation serves multiple choice only")
