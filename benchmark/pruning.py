"""The prunable set, explicit weight masks and the pruning selection criteria.

Conventions:

- The prunable set P holds the weights of every Conv1d/2d/3d and Linear layer; biases and
  batch-norm parameters are never pruned (paper, Appendix A).
- :func:`compute_masks`, :func:`magnitude_topk_masks` and :func:`filter_masks` return ``bool``
  masks (True = kept). :class:`MaskStore` converts them to the dtype/device of each parameter so
  that applying all masks is a single fused ``torch._foreach_mul_`` call.
- Pruning is hard: an entry that is zero in the ``current`` mask stays pruned. Already pruned
  entries get the lowest possible score, so any selection picks them first.
- Counts are exact: a target sparsity s over N entries prunes ``round(s * N)`` of them (Python's
  ``round``, i.e. halves go to the even integer).

Layer-wise criteria (uniform, uniform+, ERK) first decide how many entries every layer keeps and
then keep the largest magnitudes inside each layer. The per-layer keep counts come from one
water-filling rule, ``kept_l = clip(c * w_l, lo_l, hi_l)`` with the scale c chosen so that the
counts sum to the global keep count, followed by largest-remainder rounding:

- uniform: ``w_l = n_l`` (every layer keeps the same fraction),
- uniform+: the same, but the first convolution keeps all of its entries and the last linear
  layer keeps at least ``n_l - floor(0.8 n_l)`` (is pruned at most 80%),
- ERK: ``w_l = sum(shape_l)``, i.e. density proportional to sum(shape) / numel, capped at 1. This
  is exactly the result of the loop of Evci et al. that marks layers whose density would exceed
  1 as dense and rescales the others, solved in closed form,

and in all three ``hi_l`` is the number of entries of layer l that are still unpruned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from numbers import Real
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.errors import ConfigError
from benchmark.registry import Registry

PRUNABLE_TYPES: tuple[type[nn.Module], ...] = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Linear)
SPARSITY_FIELD = "method.sparsity"
CRITERION_FIELD = "method.criterion"
SPARSITY_ALLOWED = "a number in [0, 1)"


# --------------------------------------------------------------------------- the prunable set
def _param_name(module_name: str, attr: str) -> str:
    """The ``named_parameters`` name of ``attr`` on the module called ``module_name``."""
    return f"{module_name}.{attr}" if module_name else attr


def _excluded(module_name: str, exclude: Sequence[str]) -> bool:
    """Whether ``module_name`` matches one of the fnmatch patterns in ``exclude``."""
    return any(fnmatchcase(module_name, pattern) for pattern in exclude)


def _as_patterns(exclude: Sequence[str] | str) -> tuple[str, ...]:
    """Normalise ``exclude``; a bare string is one pattern, not a sequence of characters."""
    return (exclude,) if isinstance(exclude, str) else tuple(exclude)


def prunable_parameters(
    model: nn.Module, exclude: Sequence[str] = ()
) -> list[tuple[str, nn.Parameter]]:
    """Return the weights of every conv/linear layer as ``("<module>.weight", parameter)``.

    Layers come in module registration order, first and last layers included; biases and
    batch-norm parameters are never returned. ``exclude`` holds fnmatch patterns matched against
    module names (e.g. ``"fc"``, ``"layer1.*"``). A weight shared by several layers is listed once.
    """
    patterns = _as_patterns(exclude)
    seen: set[int] = set()
    prunable: list[tuple[str, nn.Parameter]] = []
    for name, module in model.named_modules():
        if not isinstance(module, PRUNABLE_TYPES) or _excluded(name, patterns):
            continue
        weight = module.weight
        # Tied weights must be masked (and counted) once, like named_parameters() does.
        if id(weight) in seen:
            continue
        seen.add(id(weight))
        prunable.append((_param_name(name, "weight"), weight))
    return prunable


# --------------------------------------------------------------------------- the mask store
def _binary_like(mask: Tensor, param: Tensor, name: str) -> Tensor:
    """``mask`` as 0/1 values with the dtype and device of ``param`` (shape checked)."""
    if tuple(mask.shape) != tuple(param.shape):
        raise ValueError(
            f"mask for {name!r} has shape {tuple(mask.shape)}, parameter has {tuple(param.shape)}"
        )
    return (mask.detach() != 0).to(device=param.device, dtype=param.dtype)


def _zero_fraction(masks: Sequence[Tensor]) -> float:
    """Fraction of zero entries over all ``masks`` (0.0 when they are empty)."""
    total = sum(m.numel() for m in masks)
    zeros = sum(m.numel() - int(m.count_nonzero()) for m in masks)
    return zeros / total if total else 0.0


class MaskStore:
    """One explicit mask per prunable parameter, applied after every optimizer step.

    ``names``/``params``/``masks`` describe the prunable set P only. Structured pruning can add
    masks for non-prunable parameters (biases and batch-norm channels of pruned filters) with
    :meth:`set_extra`; those are applied in the same fused call but never count towards the
    sparsity over P.
    """

    def __init__(self, params: list[tuple[str, nn.Parameter]]) -> None:
        names = [name for name, _ in params]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate parameter names in {names}")
        self.names: list[str] = names
        self.params: list[nn.Parameter] = [p for _, p in params]
        self.masks: list[Tensor] = [torch.ones_like(p) for p in self.params]
        self.extra_names: list[str] = []
        self.extra_params: list[nn.Parameter] = []
        self.extra_masks: list[Tensor] = []

    @classmethod
    def from_named_masks(
        cls,
        model: nn.Module,
        masks: Mapping[str, Tensor],
        exclude: Sequence[str] = (),
    ) -> MaskStore:
        """Build a store over ``prunable_parameters(model, exclude)`` holding the named ``masks``.

        Masks for prunable weights replace their all-ones default; masks for any other parameter
        of ``model`` (e.g. from :func:`filter_masks`) become extra masks.
        """
        store = cls(prunable_parameters(model, exclude))
        store.update([masks.get(n, m) for n, m in zip(store.names, store.masks, strict=True)])
        store.set_extra(model, masks)
        return store

    # ------------------------------------------------------------------ applying
    def apply(self) -> None:
        """Multiply every masked parameter by its mask in place, in one fused call."""
        params = self.params + self.extra_params if self.extra_params else self.params
        masks = self.masks + self.extra_masks if self.extra_masks else self.masks
        if not params:
            return
        with torch.no_grad():
            torch._foreach_mul_(params, masks)

    def sync(self) -> None:
        """Re-cast the masks to their parameters' current device/dtype (after ``model.to``)."""
        self.masks = [
            m.to(device=p.device, dtype=p.dtype)
            for p, m in zip(self.params, self.masks, strict=True)
        ]
        self.extra_masks = [
            m.to(device=p.device, dtype=p.dtype)
            for p, m in zip(self.extra_params, self.extra_masks, strict=True)
        ]

    # ------------------------------------------------------------------ changing the masks
    def update(
        self, new_masks: Sequence[Tensor], optimizer: torch.optim.Optimizer | None = None
    ) -> None:
        """Replace the masks over P, zero the momentum of every masked entry, and apply.

        ``new_masks`` has one mask per prunable parameter (any dtype; nonzero = kept). The SGD
        momentum buffer is multiplied by the new mask, so entries the new mask removes restart
        from zero momentum (their parameter is zero from now on) while kept entries keep theirs.
        """
        if len(new_masks) != len(self.params):
            raise ValueError(f"expected {len(self.params)} masks, got {len(new_masks)}")
        self.masks = [
            _binary_like(m, p, name)
            for name, p, m in zip(self.names, self.params, new_masks, strict=True)
        ]
        if optimizer is not None:
            _zero_momentum(optimizer, self.params, self.masks)
        self.apply()

    def set_extra(
        self,
        model: nn.Module,
        named: Mapping[str, Tensor],
        optimizer: torch.optim.Optimizer | None = None,
    ) -> None:
        """Mask the non-prunable parameters of ``model`` named in ``named``, and apply.

        Entries of ``named`` for prunable weights are ignored (use :meth:`update` for those);
        masks already held for other extra parameters are kept. Momentum buffers are zeroed
        where the new extra masks are zero.
        """
        by_name = dict(model.named_parameters())
        unknown = [name for name in named if name not in by_name]
        if unknown:
            raise ValueError(f"masks name parameters that the model does not have: {unknown}")
        prunable = set(self.names)
        changed: list[tuple[nn.Parameter, Tensor]] = []
        for name, mask in named.items():
            if name in prunable:
                continue
            param = by_name[name]
            binary = _binary_like(mask, param, name)
            if name in self.extra_names:
                self.extra_masks[self.extra_names.index(name)] = binary
            else:
                self.extra_names.append(name)
                self.extra_params.append(param)
                self.extra_masks.append(binary)
            changed.append((param, binary))
        if optimizer is not None and changed:
            _zero_momentum(optimizer, [p for p, _ in changed], [m for _, m in changed])
        self.apply()

    # ------------------------------------------------------------------ reporting
    def num_prunable(self) -> int:
        """The number of prunable entries N_P (all entries of all prunable weights)."""
        return sum(p.numel() for p in self.params)

    def num_pruned(self) -> int:
        """The number of prunable entries whose mask is zero."""
        return sum(m.numel() - int(m.count_nonzero()) for m in self.masks)

    def sparsity(self) -> float:
        """The fraction of zeros over all entries of the masks over P."""
        return _zero_fraction(self.masks)

    def layer_sparsities(self, include_extra: bool = False) -> dict[str, float]:
        """The fraction of zeros of every mask over P (and of the extra masks if asked), by name."""
        sparsities = {n: _zero_fraction([m]) for n, m in zip(self.names, self.masks, strict=True)}
        if include_extra:
            sparsities.update(
                {
                    n: _zero_fraction([m])
                    for n, m in zip(self.extra_names, self.extra_masks, strict=True)
                }
            )
        return sparsities

    def named_masks(self) -> dict[str, Tensor]:
        """All masks (P first, then extras) keyed by parameter name."""
        named = dict(zip(self.names, self.masks, strict=True))
        named.update(zip(self.extra_names, self.extra_masks, strict=True))
        return named

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The masks as CPU ``bool`` tensors (compact) with the names they belong to."""
        return {
            "names": list(self.names),
            "masks": [m.detach().to("cpu", torch.bool) for m in self.masks],
            "extra_names": list(self.extra_names),
            "extra_masks": [m.detach().to("cpu", torch.bool) for m in self.extra_masks],
        }

    def load_state_dict(self, state: Mapping[str, Any], model: nn.Module | None = None) -> None:
        """Restore masks saved by :meth:`state_dict` and apply them.

        Extra masks need their parameters: they are found in ``model`` when given, otherwise
        only extra parameters this store already holds can be restored.
        """
        if list(state["names"]) != self.names:
            raise ValueError(
                f"checkpoint masks are for {list(state['names'])}, this store is for {self.names}"
            )
        extra = dict(zip(state.get("extra_names", []), state.get("extra_masks", []), strict=True))
        missing = [name for name in extra if name not in self.extra_names]
        if missing and model is None:
            raise ValueError(
                f"checkpoint holds masks for non-prunable parameters {missing}; "
                "pass model= to load_state_dict so they can be found"
            )
        self.masks = [
            _binary_like(m, p, n)
            for n, p, m in zip(self.names, self.params, state["masks"], strict=True)
        ]
        if model is not None:
            self.set_extra(model, extra)
        else:
            for name, mask in extra.items():
                i = self.extra_names.index(name)
                self.extra_masks[i] = _binary_like(mask, self.extra_params[i], name)
        self.apply()


def _zero_momentum(
    optimizer: torch.optim.Optimizer, params: Sequence[Tensor], masks: Sequence[Tensor]
) -> None:
    """Multiply each parameter's SGD momentum buffer by its mask, in one fused call."""
    buffers: list[Tensor] = []
    buffer_masks: list[Tensor] = []
    for param, mask in zip(params, masks, strict=True):
        # .get on the state defaultdict so that parameters without state stay without state.
        buffer = optimizer.state.get(param, {}).get("momentum_buffer")
        if buffer is not None:
            buffers.append(buffer)
            buffer_masks.append(mask.to(dtype=buffer.dtype, device=buffer.device))
    if buffers:
        with torch.no_grad():
            torch._foreach_mul_(buffers, buffer_masks)


# --------------------------------------------------------------------------- selection
def magnitude_topk_masks(scores: Sequence[Tensor], keep: int) -> list[Tensor]:
    """Keep exactly the ``keep`` largest scores across all tensors; return ``bool`` masks.

    Ties at the threshold are broken by position (earlier tensors, then earlier entries, win),
    so the result is deterministic and the count is exact. NaN scores rank lowest.
    """
    sizes = [s.numel() for s in scores]
    total = sum(sizes)
    if not 0 <= keep <= total:
        raise ValueError(f"keep = {keep} is outside [0, {total}]")
    if not scores:
        return []
    device = scores[0].device
    flat = torch.cat([s.detach().reshape(-1).to(device) for s in scores])
    flat = flat.masked_fill(flat.isnan(), -math.inf)
    if keep == total:
        selected = torch.ones(total, dtype=torch.bool, device=device)
    elif keep == 0:
        selected = torch.zeros(total, dtype=torch.bool, device=device)
    else:
        # The keep-th largest value; everything above it is kept, then ties fill the rest.
        threshold = flat.kthvalue(total - keep + 1).values
        selected = flat > threshold
        missing = keep - int(selected.sum())
        tied = torch.nonzero(flat == threshold).flatten()[:missing]
        selected[tied] = True
    return [
        part.reshape(s.shape).to(s.device)
        for part, s in zip(selected.split(sizes), scores, strict=True)
    ]


def lamp_scores(weight: Tensor) -> Tensor:
    """LAMP scores of one layer: w_u^2 / sum of w_v^2 over all v with |w_v| >= |w_u| (float64).

    Tied magnitudes share a denominator (each one is included in the others' sums).
    """
    squares = weight.detach().reshape(-1).to(torch.float64) ** 2
    ordered, order = torch.sort(squares)
    # suffix[i] = sum of ordered[i:], the squares at least as large as ordered[i].
    suffix = ordered.flip(0).cumsum(0).flip(0)
    first_of_tie = torch.searchsorted(ordered, ordered, side="left")
    denominator = suffix[first_of_tie]
    ratio = torch.where(denominator > 0, ordered / denominator, torch.zeros_like(ordered))
    scores = torch.empty_like(ratio)
    scores[order] = ratio
    return scores.reshape(weight.shape)


@dataclass(frozen=True)
class Selection:
    """One pruning decision: weights, which entries are still alive, and how many to keep."""

    criterion: str
    sparsity: float
    weights: list[Tensor]
    alive: list[Tensor]
    keep: int
    generator: torch.Generator | None


Criterion = Callable[[Selection], list[Tensor]]
CRITERIA: Registry[Criterion] = Registry("criterion")


def _masked_scores(score: Tensor, alive: Tensor) -> Tensor:
    """``score`` with already pruned entries at -inf, so every selection removes them first."""
    return score.masked_fill(~alive, -math.inf)


def _magnitudes(sel: Selection) -> list[Tensor]:
    """|w| per layer in float32 (exact for fp16/bf16/fp32 weights), pruned entries at -inf."""
    return [_masked_scores(w.abs().float(), a) for w, a in zip(sel.weights, sel.alive, strict=True)]


@CRITERIA.register("global")
def _global(sel: Selection) -> list[Tensor]:
    """One magnitude threshold across all layers."""
    return magnitude_topk_masks(_magnitudes(sel), sel.keep)


@CRITERIA.register("lamp")
def _lamp(sel: Selection) -> list[Tensor]:
    """LAMP scores per layer (pruned entries count as zero weights), then one global cut."""
    scores = [
        _masked_scores(lamp_scores(w.masked_fill(~a, 0)), a)
        for w, a in zip(sel.weights, sel.alive, strict=True)
    ]
    return magnitude_topk_masks(scores, sel.keep)


@CRITERIA.register("random")
def _random(sel: Selection) -> list[Tensor]:
    """Uniform random scores from ``generator`` (the global RNG if None), then one global cut."""
    gen = sel.generator
    scores = []
    for w, a in zip(sel.weights, sel.alive, strict=True):
        # Draw on the generator's device so any CPU/CUDA generator works; same draws per seed.
        device = gen.device if gen is not None else w.device
        noise = torch.rand(w.shape, generator=gen, device=device).to(w.device)
        scores.append(_masked_scores(noise, a))
    return magnitude_topk_masks(scores, sel.keep)


@CRITERIA.register("uniform")
def _uniform(sel: Selection) -> list[Tensor]:
    """Every layer keeps the same fraction keep / N_P (largest-remainder rounding)."""
    sizes = [w.numel() for w in sel.weights]
    return _layerwise_masks(sel, [float(n) for n in sizes], [0] * len(sizes))


@CRITERIA.register("uniform+")
def _uniform_plus(sel: Selection) -> list[Tensor]:
    """Uniform, but the first conv stays dense and the last linear is pruned at most 80%.

    The first convolution is the first weight with >= 3 dimensions, the last linear layer the
    last weight with 2; either rule is skipped when no such weight is in the set.
    """
    alive = [int(a.sum()) for a in sel.alive]
    lower = [0] * len(sel.weights)
    convs = [i for i, w in enumerate(sel.weights) if w.dim() >= 3]
    linears = [i for i, w in enumerate(sel.weights) if w.dim() == 2]
    if linears:
        last, n = linears[-1], sel.weights[linears[-1]].numel()
        # At most floor(0.8 n) pruned, in integers; entries pruned before stay pruned.
        lower[last] = min(n - (4 * n) // 5, alive[last])
    if convs:
        lower[convs[0]] = alive[convs[0]]
    sizes = [float(w.numel()) for w in sel.weights]
    return _layerwise_masks(sel, sizes, lower)


@CRITERIA.register("erk")
def _erk(sel: Selection) -> list[Tensor]:
    """Erdős–Rényi kernel: density proportional to sum(shape) / numel, dense layers capped at 1."""
    sums = [float(sum(w.shape)) if w.numel() else 0.0 for w in sel.weights]
    return _layerwise_masks(sel, sums, [0] * len(sel.weights))


def _layerwise_masks(sel: Selection, weights: list[float], lower: list[int]) -> list[Tensor]:
    """Keep ``clip(c * weights_l, lower_l, alive_l)`` largest magnitudes per layer (exact total)."""
    upper = [int(a.sum()) for a in sel.alive]
    if sum(lower) > sel.keep:
        total = sum(w.numel() for w in sel.weights)
        limit = 1 - sum(lower) / total
        raise ConfigError(
            SPARSITY_FIELD,
            sel.sparsity,
            f"at most {limit:.6g} for criterion {sel.criterion!r} on these parameters",
        )
    counts = allocate_counts(weights, lower, upper, sel.keep)
    return [
        magnitude_topk_masks([score], k)[0]
        for score, k in zip(_magnitudes(sel), counts, strict=True)
    ]


def allocate_counts(
    weights: Sequence[float], lower: Sequence[int], upper: Sequence[int], total: int
) -> list[int]:
    """Integers k_l in [lower_l, upper_l] summing to ``total``, closest to clip(c w_l, lo, hi).

    The scale c solves sum_l clip(c w_l, lower_l, upper_l) = total exactly; the real shares are
    then rounded by the largest-remainder method (ties to earlier layers).
    """
    if not sum(lower) <= total <= sum(upper):
        raise ValueError(f"cannot place {total} between {sum(lower)} and {sum(upper)}")
    scale = _water_level(weights, lower, upper, total)
    shares = [min(max(scale * w, lo), hi) for w, lo, hi in zip(weights, lower, upper, strict=True)]
    return _largest_remainder(shares, lower, upper, total)


def _filled(
    scale: float, weights: Sequence[float], lower: Sequence[int], upper: Sequence[int]
) -> float:
    """sum_l clip(scale * w_l, lower_l, upper_l)."""
    return sum(min(max(scale * w, lo), hi) for w, lo, hi in zip(weights, lower, upper, strict=True))


def _water_level(
    weights: Sequence[float], lower: Sequence[int], upper: Sequence[int], total: int
) -> float:
    """The scale c with sum_l clip(c w_l, lower_l, upper_l) = total.

    The sum is piecewise linear and nondecreasing in c with kinks at lower_l/w_l and upper_l/w_l,
    so c is found by interpolating inside the first segment whose end reaches ``total``.
    """
    kinks = {0.0}
    for w, lo, hi in zip(weights, lower, upper, strict=True):
        if w > 0:
            kinks.update((lo / w, hi / w))
    previous, filled_previous = 0.0, _filled(0.0, weights, lower, upper)
    for kink in sorted(kinks):
        filled = _filled(kink, weights, lower, upper)
        if filled >= total:
            if filled == filled_previous:
                return kink
            return previous + (kink - previous) * (total - filled_previous) / (
                filled - filled_previous
            )
        previous, filled_previous = kink, filled
    return previous


def _largest_remainder(
    shares: Sequence[float], lower: Sequence[int], upper: Sequence[int], total: int
) -> list[int]:
    """Round real ``shares`` to integers within bounds summing to ``total``."""
    counts = [
        min(max(math.floor(x), lo), hi) for x, lo, hi in zip(shares, lower, upper, strict=True)
    ]
    deficit = total - sum(counts)
    while deficit:
        step = 1 if deficit > 0 else -1
        movable = [
            i
            for i in range(len(counts))
            if (counts[i] < upper[i] if step > 0 else counts[i] > lower[i])
        ]
        # Add to the layers furthest below their share (remove from those furthest above);
        # the sort is stable, so ties go to earlier layers.
        movable.sort(key=lambda i: step * (counts[i] - shares[i]))
        for i in movable[: abs(deficit)]:
            counts[i] += step
        deficit = total - sum(counts)
    return counts


def _check_sparsity(sparsity: float) -> None:
    """Raise a ConfigError unless ``sparsity`` is a real number in [0, 1)."""
    valid = isinstance(sparsity, Real) and not isinstance(sparsity, bool)
    if not (valid and 0 <= float(sparsity) < 1):
        raise ConfigError(SPARSITY_FIELD, sparsity, SPARSITY_ALLOWED)


def _alive_masks(weights: list[Tensor], current: Sequence[Tensor] | None) -> list[Tensor]:
    """``bool`` masks of the entries not yet pruned (all True without ``current``)."""
    if current is None:
        return [torch.ones_like(w, dtype=torch.bool) for w in weights]
    if len(current) != len(weights):
        raise ValueError(f"expected {len(weights)} current masks, got {len(current)}")
    alive = []
    for w, c in zip(weights, current, strict=True):
        if tuple(c.shape) != tuple(w.shape):
            raise ValueError(f"current mask shape {tuple(c.shape)} != weight {tuple(w.shape)}")
        alive.append((c.detach() != 0).to(w.device))
    return alive


def compute_masks(
    criterion: str,
    params: Sequence[tuple[str, nn.Parameter]],
    sparsity: float,
    *,
    current: Sequence[Tensor] | None = None,
    generator: torch.Generator | None = None,
) -> list[Tensor]:
    """Return ``bool`` masks over ``params`` that prune exactly round(sparsity * N_P) entries.

    ``criterion`` is one of :data:`CRITERIA`. Entries that are zero in ``current`` stay pruned;
    a sparsity below the one ``current`` already has is an error.
    """
    select = CRITERIA.get(criterion, CRITERION_FIELD)
    _check_sparsity(sparsity)
    weights = [p.detach() for _, p in params]
    alive = _alive_masks(weights, current)
    total = sum(w.numel() for w in weights)
    keep = total - round(float(sparsity) * total)
    num_alive = sum(int(a.sum()) for a in alive)
    if keep > num_alive:
        raise ConfigError(
            SPARSITY_FIELD,
            sparsity,
            f"at least the current sparsity {1 - num_alive / total:.6g} (pruning is hard)",
        )
    return select(Selection(criterion, float(sparsity), weights, alive, keep, generator))


# --------------------------------------------------------------------------- filter pruning
def _following_batchnorm(
    modules: list[tuple[str, nn.Module]], index: int, channels: int
) -> tuple[str, nn.BatchNorm2d] | None:
    """The BatchNorm2d registered right after ``modules[index]``, if it has ``channels``."""
    if index + 1 >= len(modules):
        return None
    name, module = modules[index + 1]
    if isinstance(module, nn.BatchNorm2d) and module.num_features == channels:
        return name, module
    return None


def _pruned_filters(mask: Tensor | None, out_channels: int, device: torch.device) -> Tensor:
    """``bool`` per output filter: True where the whole filter is masked to zero."""
    if mask is None:
        return torch.zeros(out_channels, dtype=torch.bool, device=device)
    return ~(mask.detach().reshape(out_channels, -1) != 0).any(dim=1).to(device)


def _kept_filters(conv: nn.Conv2d, fraction: float, current: Tensor | None) -> Tensor:
    """``bool`` per output filter of ``conv``: the filters with the largest L2 norms survive.

    round(fraction * n) filters are pruned, but never fewer than were pruned before (pruning is
    hard) and, unless they were all pruned before, never all of them.
    """
    weight = conv.weight.detach()
    n = conv.out_channels
    before = _pruned_filters(current, n, weight.device)
    n_prune = max(min(round(fraction * n), n - 1), int(before.sum()))
    norms = weight.reshape(n, -1).float().norm(dim=1)
    return magnitude_topk_masks([_masked_scores(norms, ~before)], n - n_prune)[0]


def filter_masks(
    model: nn.Module,
    fraction: float,
    *,
    current: Mapping[str, Tensor] | None = None,
    exclude: Sequence[str] = (),
) -> dict[str, Tensor]:
    """Prune the lowest-L2-norm filters of every Conv2d, the same fraction per layer (Li et al.).

    Returns ``bool`` masks keyed by parameter name: the conv weight (whole filters), its bias,
    and the weight and bias of the BatchNorm2d that normalises the conv's output. That BN is the
    module registered immediately after the conv in ``model.named_modules()`` order, if it is a
    BatchNorm2d with ``num_features == out_channels`` (containers count as modules, so a BN that
    starts the next block, e.g. in pre-activation ResNets, is never matched). Filters whose
    weight mask in ``current`` is all zero count as pruned and stay pruned. Convs matching an
    fnmatch pattern in ``exclude`` are left alone. The next layer's input channels are not masked.
    """
    _check_sparsity(fraction)
    current = current or {}
    patterns = _as_patterns(exclude)
    modules = list(model.named_modules())
    masks: dict[str, Tensor] = {}
    for index, (name, conv) in enumerate(modules):
        if not isinstance(conv, nn.Conv2d) or _excluded(name, patterns):
            continue
        weight_name = _param_name(name, "weight")
        kept = _kept_filters(conv, fraction, current.get(weight_name))
        masks[weight_name] = kept.view(-1, 1, 1, 1).expand_as(conv.weight).clone()
        if conv.bias is not None:
            masks[_param_name(name, "bias")] = kept.clone()
        bn = _following_batchnorm(modules, index, conv.out_channels)
        if bn is not None and bn[1].affine:
            masks[_param_name(bn[0], "weight")] = kept.clone()
            masks[_param_name(bn[0], "bias")] = kept.clone()
    return masks


def structured_sparsity(
    model: nn.Module, masks: Mapping[str, Tensor], exclude: Sequence[str] = ()
) -> float:
    """The fraction of Conv2d output filters (outside ``exclude``) whose weight mask is zero."""
    patterns = _as_patterns(exclude)
    pruned = total = 0
    for name, conv in model.named_modules():
        if not isinstance(conv, nn.Conv2d) or _excluded(name, patterns):
            continue
        mask = masks.get(_param_name(name, "weight"))
        pruned += int(_pruned_filters(mask, conv.out_channels, conv.weight.device).sum())
        total += conv.out_channels
    return pruned / total if total else 0.0
