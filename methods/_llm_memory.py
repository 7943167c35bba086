"""Analytic device-memory estimate of a one-shot language-model run (``methods._llm``), for dry
runs before anything has measured it and for ``runtime.offload = "auto"``.

Every term is counted from the model's sizes (:class:`benchmark.models.causal_lm.LMShape`),
``model.dtype`` and the run's settings; allocator overhead, CUDA context and fragmentation are
not counted. The terms:

* weights in ``model.dtype``; keep masks of the prunable weights as ``bool`` (one byte each);
* the one-shot pass: two copies of the calibration windows' hidden states (a layer's inputs and
  outputs) in ``model.dtype`` and one layer's input statistics in float64 (SparseGPT: the
  Hessians ``6 h^2 + ffn^2``; Wanda: the column norms), plus the float64 staging of a chunk of
  inputs (at most 2^24 values at a time); the evaluation of a batch: its activations (``4 h +
  2 ffn`` values per token at most at a time) and float32 logits; offloaded, the evaluation holds
  the hidden states of up to 128 windows twice (it runs windows in groups of the papers' 128
  calibration windows) and one batch's logits;
* offloaded (``runtime.offload``): of the weights only the embeddings, the head and one decoder
  layer are on the device; masks wait in host memory;
* retraining: float32 copies of the trained parameters with their gradients and AdamW's two
  moments (16 bytes each: every weight for ``full``, PERP's set and the adapters for ``perp``)
  and the activations of a batch: per token and layer ``10 h + 4 ffn`` values (attention
  through a fused kernel: no ``L^2`` scores kept) at 2 bytes under half-precision autocast, else
  4, and the float32 logits with their gradient; with gradient checkpointing only each layer's
  input is kept, and one layer's activations are recomputed at a time. An adapter's effective
  weight ``W + s B A`` is kept for the backward pass of every adapted map (with checkpointing:
  of one layer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmark.pruning.oneshot import STAGING_VALUES

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig
    from benchmark.models.causal_lm import LMShape

# A layer's activations kept for the backward pass, in values per token: ~10 h in the attention
# block (norm input and output, q, k, v, the attention output, the output projection's input,
# the residual) and ~4 ffn in the MLP (the gate and up projections, the activation, their
# product).
ACT_PER_TOKEN = (10, 4)
# The GPU the references prune 70B models on: "auto" offloads a run that does not fit it (the
# dry run does not know the device; a run decides from the device's free memory).
REFERENCE_GPU_BYTES = 80 * 10**9
ADAMW_BYTES = 16  # float32 weight, gradient and AdamW's two moments


def dtype_bytes(name: str) -> int:
    """Bytes per value of a ``model.dtype``."""
    return 4 if name == "float32" else 2


@dataclass(frozen=True)
class LMMemory:
    """The terms of a run's device memory, in bytes (see the module docstring)."""

    weights: int
    outside: int
    layer: int
    masks: int
    calibration: int
    statistics: int
    evaluation: int
    evaluation_offloaded: int
    retraining: int

    def one_shot(self, offload: bool) -> int:
        """The device's peak while pruning and evaluating."""
        if offload:
            working = max(self.calibration + self.statistics, self.evaluation_offloaded)
            return self.outside + self.layer + working
        working = max(self.calibration + self.statistics, self.evaluation)
        return self.weights + self.masks + working

    def peak(self, offload: bool) -> int:
        """The device's peak over the run (retraining needs the whole model there)."""
        if self.retraining:
            return max(self.one_shot(offload), self.weights + self.masks + self.retraining)
        return self.one_shot(offload)


def lm_memory(cfg: RunConfig, shape: LMShape, calibrates: bool, hessian: bool) -> LMMemory:
    """The memory terms of run ``cfg`` on a model of ``shape``."""
    b = dtype_bytes(cfg.model.dtype)
    p = cfg.method.params
    h, ffn, length = shape.hidden, shape.ffn, cfg.data.max_length
    prunable = shape.layer * shape.layers
    calibration = statistics = 0
    if cfg.method.sparsity > 0 and calibrates:
        calibration = 2 * p.calibration_samples * length * h * b
        statistics = 8 * (6 * h * h + ffn * ffn) if hessian else 8 * (6 * h + ffn)
        statistics += 2 * 8 * STAGING_VALUES
    eval_tokens = min(cfg.data.eval_batch_size, 128) * length
    logits = 2 * 4 * eval_tokens * shape.vocab
    return LMMemory(
        weights=int(shape.params * b),
        outside=int(shape.outside * b),
        layer=int(shape.layer * b),
        masks=int(prunable),
        calibration=int(calibration),
        statistics=int(statistics),
        evaluation=int(eval_tokens * (4 * h + 2 * ffn) * b + logits),
        evaluation_offloaded=int(2 * 128 * length * h * b + logits),
        retraining=int(retraining_bytes(cfg, shape, b)),
    )


def retraining_bytes(cfg: RunConfig, shape: LMShape, b: int) -> float:
    """What retraining adds to the weights and masks (0 without retraining)."""
    p = cfg.method.params
    if p.retrain == "none":
        return 0.0
    h, ffn, layers = shape.hidden, shape.ffn, shape.layers
    tokens = cfg.data.batch_size * cfg.data.max_length
    act = 2 if b == 2 or cfg.optim.bf16 else 4
    per_layer = tokens * (ACT_PER_TOKEN[0] * h + ACT_PER_TOKEN[1] * ffn) * act
    checkpointing = grad_checkpointing(cfg, cuda=True)
    kept = layers * tokens * h * act + per_layer if checkpointing else layers * per_layer
    logits = 2 * 4 * tokens * shape.vocab
    if p.retrain == "full":
        # Every weight trained in float32: the weights themselves become float32 copies.
        return ADAMW_BYTES * shape.params - shape.params * b + kept + logits
    adapters = 0.0
    effective = 0.0
    if p.adapter != "none":
        # r (in + out) per adapted map: q, k, v, o (h -> h), gate and up (h -> ffn), down.
        adapters = p.rank * (11 * h + 3 * ffn) * layers
        # The adapted maps' effective weights, kept for their backward pass.
        effective = (shape.layer if checkpointing else shape.layer * layers) * b
    trained = shape.vocab * h + layers * 4 * h + adapters  # head, biases and norms, adapters
    return ADAMW_BYTES * trained + kept + logits + effective


def grad_checkpointing(cfg: RunConfig, cuda: bool) -> bool:
    """Whether retraining recomputes activations (``runtime.grad_checkpointing``; "auto": on
    CUDA)."""
    setting = cfg.runtime.grad_checkpointing
    return setting == "on" or (setting == "auto" and cuda)


def estimate_offload(cfg: RunConfig, memory: LMMemory) -> bool:
    """Whether the dry run counts the run offloaded: ``runtime.offload = "on"``, or "auto" and
    it does not fit the references' 80 GB GPU whole."""
    setting = cfg.runtime.offload
    if setting != "auto":
        return setting == "on"
    return memory.peak(offload=False) > REFERENCE_GPU_BYTES
