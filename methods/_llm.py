"""The shared machinery of the one-shot language-model methods (``methods.llm_oneshot``): typed
parameters, the checks before any compute, the one-shot prune at setup, and the retraining that
follows it under the run's budget.

A run prunes its model once, right after loading it (the dense parent of ``parent_epochs``
epochs, or ``model.pretrained``), on ``calibration_samples`` windows drawn with the run's seed,
then retrains for ``budget.epochs`` epochs of ``data.epoch_iters`` iterations (``retrain``):

* ``none``: no retraining (the budget is ignored);
* ``full``: every parameter, with the pruned mask re-applied after every step;
* ``perp``: PERP's parameter-efficient set (biases, norm layers, the output head) plus, unless
  ``adapter = "none"``, a low-rank adapter on every pruned linear map (``lora``, ``masklora``,
  ``scalelora``; :mod:`methods._lora`), merged back at the end with exactly the pruned mask.
  ``head`` says how the output head takes part: ``full`` (every weight trained), ``lora`` (a
  LoRA adapter of the same rank, merged at the end, as PERP's code does; a head tied to the
  token embedding, OPT's, changes the embedding with it at the merge, as there) or ``none``.

Learning rates (``retrain_schedule``): ``linear`` is PERP's (Hugging Face ``Trainer``'s linear
decay after a 10% warm-up) from ``retrain_lr``; ``allr`` is ALLR's rule (the paper): a linear
decay without warm-up from ``retrain_lr * min(max(d1, d2), 1)``, with ``d1 = ||W - W_p|| /
(||W|| sqrt(q))`` of this prune and ``d2 = retrain epochs / parent_epochs`` when the dense parent
was trained here (a pretrained model's training length is unknown, so ALLR-d1 alone).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
from torch import nn

from benchmark.core.errors import ConfigError, check
from benchmark.pruning.owl import OWL_LAMBDA, OWL_M
from methods._llm_memory import LMMemory, estimate_offload, grad_checkpointing, lm_memory
from methods._lora import ADAPTERS, merge, output_head, perp_trainable, wrap
from methods.base import Method, MethodInfo, dense_parent

if TYPE_CHECKING:
    from benchmark.config.run import RunConfig
    from benchmark.pruning.oneshot import InputStats
    from methods.base import TrainContext

PATTERNS: dict[str, tuple[int, int] | None] = {"unstructured": None, "2:4": (2, 4), "4:8": (4, 8)}
RETRAIN = ("none", "full", "perp")
RETRAIN_SCHEDULES = ("linear", "allr")
HEADS = ("full", "lora", "none")
ALLOCATIONS = ("uniform", "owl")
WARMUP_FRACTION = 0.1
# Calibration windows per forward pass (results agree to float noise for any value).
CALIBRATION_CHUNK = 8


@dataclass
class OneShotParams:
    """Hyperparameters of a one-shot language-model run.

    Attributes:
        pattern: unstructured, 2:4 or 4:8 (N:M keeps N of every M inputs: sparsity 1 - N/M)
        calibration_samples: calibration windows of data.max_length tokens (the papers: 128)
        retrain: none, full (masks kept) or perp (biases, norms, head and the adapter)
        adapter: the low-rank adapter of perp: none, lora, masklora or scalelora
        rank: the adapter's rank r (PERP: 16)
        alpha: the adapter's alpha (scaling alpha / r; PERP: 32)
        retrain_lr: the peak retraining learning rate (PERP: 5e-4, AdamW)
        retrain_schedule: linear (10% warm-up, then linear decay) or allr (ALLR's rule)
        parent_epochs: epochs of a dense parent trained here first (0: model.pretrained or
            the random initialisation is pruned)
        allocation: how the goal sparsity is split over the decoder layers: uniform (every
            layer at the goal) or owl (OWL's outlier-weighed sparsities,
            :mod:`benchmark.pruning.owl`; unstructured only)
        owl_m: OWL's outlier threshold M (a score above M times its layer's mean; OWL: 5)
        owl_lambda: OWL's largest deviation of a layer's sparsity from the goal (OWL: 0.08)
        head: how perp retrains the output head: full (every weight), lora (a LoRA adapter,
            PERP's) or none (frozen)
    """

    pattern: str = "unstructured"
    calibration_samples: int = 128
    retrain: str = "none"
    adapter: str = "masklora"
    rank: int = 16
    alpha: float = 32.0
    retrain_lr: float = 5e-4
    retrain_schedule: str = "linear"
    parent_epochs: int = 0
    allocation: str = "uniform"
    owl_m: float = OWL_M
    owl_lambda: float = OWL_LAMBDA
    head: str = "full"


def oneshot_info(summary: str) -> MethodInfo:
    """The overview-table entry of a one-shot method: its goal sparsity is specified, it is
    not pruning-stable (the prune is a jump) nor sparsity-agnostic, and it adds no
    hyperparameter to tune."""
    return MethodInfo(
        sparsity_specifiable=True,
        pruning_stable=False,
        sparsity_agnostic=False,
        extra_hyperparameters=0,
        summary=summary,
    )


def nm_of(pattern: str) -> tuple[int, int] | None:
    """The (N, M) of a pattern name, None for unstructured."""
    return PATTERNS[pattern]


def one_of(values: Iterable[str]) -> str:
    """The allowed values as every config error names them: ``one of 'a', 'b'``."""
    return "one of " + ", ".join(repr(v) for v in values)


def validate_oneshot(cfg: RunConfig) -> None:
    """Check the one-shot parameters, the pattern against the model's layers and the task."""
    from benchmark.models.causal_lm import LM_MODELS, input_widths, lm_config

    p, m = cfg.method.params, cfg.method
    check(cfg.model.name in LM_MODELS, "model.name", cfg.model.name, one_of(LM_MODELS))
    check(p.pattern in PATTERNS, "method.pattern", p.pattern, one_of(PATTERNS))
    check(p.retrain in RETRAIN, "method.retrain", p.retrain, one_of(RETRAIN))
    adapters = ("none", *ADAPTERS)
    check(p.adapter in adapters, "method.adapter", p.adapter, one_of(adapters))
    check(
        p.retrain_schedule in RETRAIN_SCHEDULES,
        "method.retrain_schedule",
        p.retrain_schedule,
        one_of(RETRAIN_SCHEDULES),
    )
    check(p.calibration_samples >= 1, "method.calibration_samples", p.calibration_samples, ">= 1")
    check(p.rank >= 1, "method.rank", p.rank, "an integer >= 1")
    check(p.alpha > 0, "method.alpha", p.alpha, "a number > 0")
    check(p.retrain_lr > 0, "method.retrain_lr", p.retrain_lr, "a number > 0")
    check(p.parent_epochs >= 0, "method.parent_epochs", p.parent_epochs, "an integer >= 0")
    check(p.head in HEADS, "method.head", p.head, one_of(HEADS))
    check(
        p.head == "full" or p.retrain == "perp",
        "method.head",
        p.head,
        f"unset ('full') with method.retrain = {p.retrain!r} (it says how perp retrains the head)",
    )
    check(0 <= m.sparsity < 1, "method.sparsity", m.sparsity, "a number in [0, 1)")
    check(
        cfg.model.dtype != "float16" or p.retrain == "none",
        "model.dtype",
        cfg.model.dtype,
        "'bfloat16' or 'float32' with method.retrain = "
        f"{p.retrain!r} (float16 training needs loss scaling, which retraining does not do)",
    )
    validate_allocation(cfg)
    nm = nm_of(p.pattern)
    if nm is None:
        return
    n, mm = nm
    check(
        math.isclose(m.sparsity, 1 - n / mm),
        "method.sparsity",
        m.sparsity,
        f"{1 - n / mm} with method.pattern = {p.pattern!r}",
    )
    widths = input_widths(lm_config(cfg.model.name, cfg.model.pretrained))
    bad = [w for w in widths if w % mm]
    if bad:
        raise ConfigError(
            "method.pattern",
            p.pattern,
            f"a pattern whose group of {mm} divides every layer's input width; "
            f"{cfg.model.name} has input widths {widths}",
        )


def validate_allocation(cfg: RunConfig) -> None:
    """Check ``method.allocation`` and OWL's M and lambda (set only with OWL, so that a value
    that changes nothing never splits a run id)."""
    p, s = cfg.method.params, cfg.method.sparsity
    check(p.allocation in ALLOCATIONS, "method.allocation", p.allocation, one_of(ALLOCATIONS))
    if p.allocation != "owl":
        for key, default in (("owl_m", OWL_M), ("owl_lambda", OWL_LAMBDA)):
            value = getattr(p, key)
            check(value == default, f"method.{key}", value, "unset with allocation = 'uniform'")
        return
    check(
        p.pattern == "unstructured",
        "method.allocation",
        p.allocation,
        "'uniform' with an N:M pattern (OWL splits an unstructured goal over the layers)",
    )
    check(p.owl_m > 0, "method.owl_m", p.owl_m, "a number > 0")
    check(
        0 <= p.owl_lambda <= min(s, 1 - s) or s == 0,
        "method.owl_lambda",
        p.owl_lambda,
        f"a number in [0, {min(s, 1 - s):g}] (every layer's sparsity, within lambda of "
        f"method.sparsity = {s:g}, in [0, 1])",
    )


def _distance(before: torch.Tensor, after: torch.Tensor) -> tuple[float, float]:
    """``(||before - after||^2, ||before||^2)`` of one weight, as Python floats."""
    return float((before - after).pow(2).sum()), float(before.pow(2).sum())


def linear_lrs(peak: float, n: int, warmup: int) -> np.ndarray:
    """Linear warm-up over ``warmup`` steps to ``peak``, then linear decay to 0 at step ``n``
    (``get_linear_schedule_with_warmup``)."""
    steps = np.arange(n, dtype=np.float64)
    up = steps / max(warmup, 1)
    down = (n - steps) / max(n - warmup, 1)
    return peak * np.where(steps < warmup, up, down)


class OneShotLM(Method):
    """Prune once from calibration data, then retrain under the budget (see module docstring)."""

    Params: ClassVar[type] = OneShotParams
    # Eager steps: the captured CUDA-graph path was written for fused SGD with a device learning
    # rate, not for the AdamW retraining step (not tried on a GPU).
    graph_safe = False
    tasks = ("causal_lm",)
    # The method contract on the tiny Llama and the embedded text, retrained with MaskLoRA.
    contract_settings = (
        "data.name=pydoc",
        "model.name=llama_tiny",
        "data.max_length=32",
        "data.batch_size=4",
        "data.eval_batch_size=512",
        "data.epoch_iters=3",
        "optim.name=adamw",
        "optim.weight_decay=0",
        "method.calibration_samples=8",
        "method.retrain=perp",
    )
    # Whether the criterion reads calibration inputs, and their Hessian (SparseGPT) too.
    calibrates: ClassVar[bool] = True
    # Keep masks as bool (a byte per weight; read by the trainer, default: the weight's dtype),
    # and a model.dtype of bfloat16/float16 allowed (read by validation).
    mask_dtype: ClassVar[torch.dtype | None] = torch.bool
    half_precision: ClassVar[bool] = True
    # The prune (loading, calibration, evaluation) is a phase of its own before any training,
    # priced by cost estimates from finished runs' measured seconds.
    setup_phase: ClassVar[bool] = True
    hessian: ClassVar[bool] = False
    info: ClassVar[MethodInfo]

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self.lr_scale = 1.0
        self.adapters = nn.ModuleDict()
        # Each prunable weight's sparsity (by id): round(s N) over P split exactly over layers.
        self.layer_sparsity: dict[int, float] = {}
        # Each prunable weight's (||W - W_p||^2, ||W||^2) by id, for ALLR's d1.
        self.distances: dict[int, tuple[float, float]] = {}

    @classmethod
    def validate(cls, cfg: RunConfig) -> None:
        validate_oneshot(cfg)

    @classmethod
    def identity_marks(cls, cfg: RunConfig) -> dict[str, Any]:
        """With ``optim.grad_clip > 0``, PERP's adapters are now clipped and a dense parent
        trained here is not: marked where the code before could run the config (its fields at
        the defaults it had), so that only those ids move."""
        p = cfg.method.params
        old_fields = (
            p.head == "full" and cfg.data.train_windows == "random" and not cfg.data.slow_tokenizer
        )
        if cfg.optim.grad_clip <= 0 or not old_fields:
            return {}
        marks: dict[str, Any] = {}
        if p.retrain == "perp" and p.adapter != "none":
            marks["adapters_clipped"] = True
        if p.parent_epochs > 0:
            marks["parent_unclipped"] = True
        return marks

    @classmethod
    def memory(cls, cfg: RunConfig) -> LMMemory | None:
        """The terms of the run's device memory (:mod:`methods._llm_memory`); None when the
        model's sizes are unknown without its files."""
        from benchmark.models.causal_lm import lm_shape

        shape = lm_shape(cfg.model.name, cfg.model.pretrained)
        return None if shape is None else lm_memory(cfg, shape, cls.calibrates, cls.hessian)

    @classmethod
    def memory_estimate(cls, cfg: RunConfig) -> int | None:
        """The run's peak device memory in bytes, estimated (:mod:`methods._llm_memory`):
        offloaded where ``runtime.offload`` would offload it on an 80 GB GPU."""
        memory = cls.memory(cfg)
        if memory is None:
            return None
        return memory.peak(estimate_offload(cfg, memory))

    def total_epochs(self) -> int:
        return 0 if self.params.retrain == "none" else self.cfg.budget.epochs

    def parent_config(self) -> RunConfig | None:
        """The dense parent trained here first: in float32 whatever this run's ``model.dtype``,
        on random windows without gradient clipping whatever the retraining's (children that
        differ in how they are pruned or retrained prune the same parent)."""
        if self.params.parent_epochs == 0:
            return None
        from benchmark.config.parse import replace_section

        parent = dense_parent(self.cfg, self.params.parent_epochs)
        # The zero-shot tasks score this run, not the dense parent it starts from.
        return replace_section(
            parent,
            model=dataclasses.replace(parent.model, dtype="float32"),
            eval=dataclasses.replace(parent.eval, zero_shot=[]),
            optim=dataclasses.replace(parent.optim, grad_clip=0.0),
            data=dataclasses.replace(parent.data, train_windows="random"),
        )

    def schedule_lrs(self, iters_per_epoch: int) -> np.ndarray:
        n = self.total_epochs() * iters_per_epoch
        p = self.params
        warmup = math.ceil(WARMUP_FRACTION * n) if p.retrain_schedule == "linear" else 0
        return linear_lrs(p.retrain_lr, n, warmup)

    def lr(self, step: int) -> float:
        return self.lr_scale * super().lr(step)

    # ------------------------------------------------------------------ the one-shot prune
    def prune_linear(self, name: str, linear: nn.Linear, stats: InputStats | None) -> torch.Tensor:
        """The keep mask of one linear map (may update its weight in place)."""
        raise NotImplementedError

    def split_sparsity(self, ctx: TrainContext) -> list[float]:
        """Per prunable weight, the sparsity that makes the layers prune exactly ``round(s N)``
        of the N weights of P together (largest remainders; each layer within one weight of
        ``s``); also kept by weight id for :meth:`prune_linear`."""
        from benchmark.pruning.allocation import largest_remainder

        sizes = [w.numel() for w in ctx.masks.params]
        s = self.cfg.method.sparsity
        if self.params.allocation == "owl":
            return self.owl_sparsity(ctx)
        counts = largest_remainder([s * n for n in sizes], round(s * sum(sizes)))
        out = [c / n for c, n in zip(counts, sizes, strict=True)]
        self.layer_sparsity = {id(w): x for w, x in zip(ctx.masks.params, out, strict=True)}
        return out

    def owl_sparsity(self, ctx: TrainContext) -> list[float]:
        """:meth:`split_sparsity` by OWL: a pass of the calibration windows through the dense
        model measures every decoder layer's outlier ratio (recorded as ``owl``)."""
        from benchmark.pruning.owl import decoder_outlier_ratios, owl_split

        p, params = self.params, ctx.masks.params
        ids = ctx.data.calibration(p.calibration_samples, self.cfg.seed)  # type: ignore[attr-defined]
        layers = decoder_outlier_ratios(
            ctx.model, ids, {id(w) for w in params}, p.owl_m, CALIBRATION_CHUNK
        )
        sizes = {id(w): w.numel() for w in params}
        self.layer_sparsity = owl_split(layers, sizes, self.cfg.method.sparsity, p.owl_lambda)
        ctx.record["owl"] = {
            "outlier_ratios": [r for r, _ in layers],
            "layer_sparsity": [
                sum(self.layer_sparsity[w] * sizes[w] for w in ws) / sum(sizes[w] for w in ws)
                for _, ws in layers
            ],
        }
        return [self.layer_sparsity[id(w)] for w in params]

    def sparsity_of(self, weight: torch.Tensor) -> float:
        """The sparsity this layer is pruned to (see :meth:`split_sparsity`)."""
        return self.layer_sparsity.get(id(weight), self.cfg.method.sparsity)

    def one_shot_masks(self, ctx: TrainContext) -> list[torch.Tensor]:
        """Keep masks over the prunable set (linear maps outside decoder layers stay dense)."""
        from benchmark.pruning.layerwise import prune_layerwise

        p = self.params
        self.split_sparsity(ctx)
        ids = ctx.data.calibration(p.calibration_samples, self.cfg.seed)  # type: ignore[attr-defined]
        by_id = prune_layerwise(
            ctx.model,
            ids,
            {id(w) for w in ctx.masks.params},
            self.measured_prune,
            hessian=self.hessian,
            chunk=CALIBRATION_CHUNK,
        )
        return [by_id.get(id(w), torch.ones_like(w, dtype=torch.bool)) for w in ctx.masks.params]

    def measured_prune(
        self, name: str, linear: nn.Linear, stats: InputStats | None
    ) -> torch.Tensor:
        """:meth:`prune_linear`, keeping ``||W - W_p||^2`` and ``||W||^2`` of the layer for
        ALLR's d1 (one layer's copy at a time, never the whole model's)."""
        before = linear.weight.detach().clone()
        keep = self.prune_linear(name, linear, stats)
        self.distances[id(linear.weight)] = _distance(before, linear.weight.detach() * keep)
        return keep

    def setup(self, ctx: TrainContext, parent_state: dict[str, torch.Tensor] | None) -> None:
        super().setup(ctx, parent_state)
        self.distances = {}
        if self.cfg.method.sparsity == 0:  # the dense reference: nothing to calibrate or prune
            masks = [torch.ones_like(w, dtype=torch.bool) for w in ctx.masks.params]
        else:
            masks = self.one_shot_masks(ctx)
        for w, m in zip(ctx.masks.params, masks, strict=True):
            if id(w) not in self.distances:  # no weight update: the pruned entries alone
                self.distances[id(w)] = _distance(w.detach(), w.detach() * m.to(w.device))
        self.hard_prune(masks)
        self.record_prune(ctx)
        if self.params.retrain != "none":
            self.prepare_retraining(ctx)

    def prepare_retraining(self, ctx: TrainContext) -> None:
        """The whole model on the device, the trained parameters (in float32 under a half
        ``model.dtype``: mixed precision), gradient checkpointing and PERP's adapters."""
        from benchmark.pruning.offload import placement_of

        model, p = ctx.model, self.params
        placement = placement_of(model)
        if placement is not None and placement.offload:
            placement.end_offload(model)
            ctx.masks.sync()  # the masks waited in host memory with the layers
        half = self.cfg.model.dtype != "float32"
        if p.retrain == "full" and half:
            model.float()
        if p.retrain == "perp":
            for param in model.parameters():
                param.requires_grad_(False)
            for param in perp_trainable(model, head=p.head == "full"):
                param.requires_grad_(True)
                if half:
                    param.data = param.data.float()
        if grad_checkpointing(self.cfg, cuda=ctx.device.type == "cuda"):
            model.gradient_checkpointing_enable(  # type: ignore[operator]
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        if p.retrain == "perp" and p.adapter != "none":
            named = {n.removesuffix(".weight"): m for n, m in ctx.masks.named_masks().items()}
            self.adapters = wrap(model, named, p.adapter, p.rank, p.alpha, torch.float32)
        head = output_head(model)
        if p.retrain == "perp" and p.head == "lora" and head is not None:
            lora = wrap(model, {head[0]: None}, "lora", p.rank, p.alpha, torch.float32)
            self.adapters.update(lora)

    def record_prune(self, ctx: TrainContext) -> None:
        """Record the test metrics right after pruning and ALLR's d1 (and its lr scale)."""
        from benchmark.schedules.retraining import allr_d1, allr_scale

        pairs = [self.distances[id(w)] for w in ctx.masks.params]
        distance = math.sqrt(sum(d for d, _ in pairs))
        norm = math.sqrt(sum(n for _, n in pairs))
        d1 = allr_d1(distance, norm, ctx.masks.sparsity())
        p = self.params
        d2 = None
        if p.parent_epochs > 0 and self.total_epochs() > 0:
            d2 = min(self.total_epochs() / p.parent_epochs, 1.0)
        if p.retrain_schedule == "allr":
            self.lr_scale = allr_scale(d1, d2)
        ctx.record["oneshot"] = {
            "test_after_prune": ctx.evaluate("test"),
            "allr_d1": d1,
            "lr_scale": self.lr_scale,
        }

    def param_groups(self) -> list[dict[str, Any]]:
        assert self.ctx is not None
        trainable = [p for p in self.ctx.model.parameters() if p.requires_grad]
        return [{"params": [*trainable, *self.adapters.parameters()]}]

    def clipped_parameters(self) -> list[nn.Parameter]:
        """The model's parameters and the adapters' (``optim.grad_clip`` clips their norm
        together, as Hugging Face's ``Trainer`` clips a PEFT model's)."""
        assert self.ctx is not None
        return [*self.ctx.model.parameters(), *self.adapters.parameters()]

    def finalize(self) -> None:
        """Merge the adapters back (exactly the pruned mask), return a mixed-precision model to
        ``model.dtype`` (the result is a model in that precision) and re-apply the masks."""
        assert self.ctx is not None
        merged = merge(self.adapters)
        self.adapters = nn.ModuleDict()
        if self.cfg.model.dtype != "float32":
            self.ctx.model.to(getattr(torch, self.cfg.model.dtype))
        self.ctx.masks.apply()
        for param in self.ctx.model.parameters():
            param.requires_grad_(True)
        self.ctx.record.setdefault("oneshot", {})["merged_adapters"] = merged

    def state_dict(self) -> dict[str, Any]:
        adapters = {k: v.detach().cpu() for k, v in self.adapters.state_dict().items()}
        return {**super().state_dict(), "lr_scale": self.lr_scale, "adapters": adapters}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.lr_scale = float(state.get("lr_scale", 1.0))
        self.adapters.load_state_dict(state.get("adapters", {}))
