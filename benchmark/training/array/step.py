"""The array's training iteration: the K runs' batches in, one forward/backward/SGD step out.

Every run keeps its own epoch loop (:class:`~benchmark.training.loop.EpochLoop`): it draws its
own batch (its seed, order and augmentation, exactly as alone), sets its own learning rate and
hands the batch to its :class:`MemberRunner` instead of stepping. When every live run has handed
in its batch, :class:`ArrayStep` trains all of them at once: the K models' forward on the
stacked batches, the sum of the K mean losses (so that each run's gradient is its own), one
backward, one :class:`~benchmark.training.array.optim.ArraySGD` step, then each run's own
per-step hook (its hard mask) and its own loss sum.

On CUDA (when the runs alone would be captured) the forward, losses, backward and SGD update
are captured once into a CUDA graph and replayed: the K batches, the K targets and the [K]
hyperparameter tables are copied into the graph's static tensors before every replay, and the
per-run hooks stay eager after it. The first iterations of the array and an epoch's shorter
last batch step eagerly, with the same code.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from benchmark.training.array.optim import ArraySGD
from benchmark.training.array.stack import StackedModels
from benchmark.training.fast_step import (
    EAGER_WARMUP_ITERS,
    CudaGraphBackend,
    FastPathWarning,
    GraphBackend,
    StepPlan,
    StepStats,
    warn_eager,
)
from methods.base import Method

# Per-iteration hooks an array cannot run for each run on its own slice (they change the
# forward or the loss of one model); a method overriding one trains packed. The others run per
# run: ``on_iteration_start`` in its own epoch loop before it hands in its batch,
# ``before_step`` between the array's backward and its SGD update (on the run's own gradients,
# views of its row), ``after_step`` after the update.
UNFUSED_HOOKS = (
    "before_forward",
    "extra_loss",
    "logged_loss_extra",
    "make_reparam",
    "batched_weights",
)


def hooks_between(cls: type[Method]) -> bool:
    """Whether method ``cls`` runs a hook between backward and the optimizer step (its runs'
    arrays step eagerly: the hook is per run, outside one captured graph)."""
    return cls.before_step is not Method.before_step


def method_fuses(cls: type[Method]) -> str:
    """Why runs of method ``cls`` cannot share an array ("" when they can)."""
    for hook in UNFUSED_HOOKS:
        if getattr(cls, hook, None) is not getattr(Method, hook, None):
            return f"method {cls.name!r} has its own per-iteration hook {hook}"
    return ""


def model_fuses(model: nn.Module) -> str:
    """Why copies of ``model`` cannot share an array ("" when they can)."""
    for module in model.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            return f"the model draws random numbers in its forward ({type(module).__name__})"
    return ""


class MemberRunner:
    """Stands in for a run's :class:`~benchmark.training.fast_step.StepRunner`: hands each
    iteration to the array rather than stepping alone."""

    def __init__(self, array: ArrayStep, index: int, alone: StepPlan) -> None:
        self.array = array
        self.index = index
        # ``alone``: the run's plan had it trained alone; the array captures when it would have.
        why = ""
        if alone.capture:
            why = "trained in an array, whose step is not captured"
            if array.hooked:
                why = "trained in an array whose methods' before_step hooks run eagerly per run"
        captured = array.backend is not None
        self.plan = StepPlan(
            capture=captured, channels_last=alone.channels_last, why_eager="" if captured else why
        )
        self.stats = StepStats()

    def invalidate(self) -> None:
        """Nothing to drop: the array's graph reads only tensors that outlive epochs."""

    def run(self, x: Tensor, y: Tensor, step: int) -> float:
        """Hand in iteration ``step``'s batch; the array steps once every live run has. Returns
        the seconds the array spent capturing since this run's last call (each run's loop
        leaves them out of its timed training, as a run alone does its own capture's)."""
        self.array.deposit(self.index, x, y, step)
        spent, self.array.unclaimed[self.index] = self.array.unclaimed[self.index], 0.0
        return spent


class ArrayStep:
    """The K trainers of an array, their stacked models and optimizer, and their batches.

    ``backend``: how the step is captured (None: the CUDA graph backend when the runs alone
    would be captured, else eager; tests pass a backend that replays on the CPU).
    """

    def __init__(
        self, trainers: list[Any], layout: str, backend: GraphBackend | None = None
    ) -> None:
        self.trainers = trainers
        self.k = len(trainers)
        for trainer in trainers:
            _float_lrs(trainer)
        with warnings.catch_warnings():
            # The leaves' gradients are views of one [K, D] tensor, by design.
            warnings.filterwarnings("ignore", "grad and param do not obey")
            self.stacked = StackedModels([t.model for t in trainers], layout)
        self.sgd = ArraySGD(self.stacked, [t.optimizer for t in trainers])
        self.device = trainers[0].device
        self.hooked = any(hooks_between(type(t.method)) for t in trainers)
        if backend is None and trainers[0].runner.plan.capture and self.device.type == "cuda":
            backend = CudaGraphBackend(self.device)
        self.backend = None if self.hooked else backend
        setting = trainers[0].cfg.runtime.compile
        grouped = self.stacked.layout == "grouped"
        # Compiled where it was measured faster: the grouped layout on CUDA (see RuntimeConfig).
        self.compiled = setting == "on" or (
            setting == "auto" and grouped and self.device.type == "cuda"
        )
        self.graph: _Graph | None = None
        self.eager_steps = 0
        self.unclaimed = [0.0] * self.k  # capture seconds each run's loop has not been told of
        self.first_shapes: tuple[torch.Size, torch.Size] | None = None  # the graph's shapes
        self.live = set(range(self.k))
        # Slots whose run has not stepped with the others yet: at their first step every live
        # run's record of the array (its checkpointed state) learns who it trains beside.
        self.joined = set(range(self.k))
        self.pending: dict[int, tuple[Tensor, Tensor, int]] = {}
        self.steps = 0
        # Whether the last step ended an epoch (all runs' epochs end at the same step): only
        # then may a run take a slot, at its own epoch's start.
        self.between_epochs = True
        for k, trainer in enumerate(trainers):
            trainer.runner = MemberRunner(self, k, trainer.runner.plan)
            trainer.stream_only = True  # the array's memory peak is no run's own

    def can_admit(self, k: int) -> bool:
        """Whether a run may take slot ``k`` now: the others are between two epochs (or there
        are none)."""
        return self.between_epochs or not self.live - {k}

    def admit(self, k: int, trainer: Any) -> None:
        """Make ``trainer``'s run (started, or resumed from its checkpoint) the run of slot
        ``k``, whose run ended: its parameters, BatchNorm buffers and momentum are written
        into the slot's rows (no stacked tensor is reallocated: a captured graph goes on
        reading them), its optimizer's hyperparameters fill the slot's row of the tables, and
        its batches go to the array from its first iteration on. Only between two epochs of
        the others (its epochs then start and end with theirs; the array does not step
        meanwhile). Raises ValueError or ConfigError, the slot's old run still in it, when the
        others are inside an epoch or its model or optimizer differ in tensors or groups."""
        if not self.can_admit(k):
            raise ValueError(f"slot {k}: a run joins an array between two epochs only")
        if not self.live - {k}:
            self.between_epochs = True  # no run to keep in step with: a new start
        self.sgd.check(self.stacked.parameters_of(trainer.model), trainer.optimizer)
        _float_lrs(trainer)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "grad and param do not obey")
            self.stacked.place(k, trainer.model)
        self.sgd.place(k, trainer.optimizer)
        if self.graph is not None and _loss_of(trainer) != _loss_of(self.trainers[k]):
            self.graph = None  # its loss is another than the one captured: capture again
        self.trainers[k] = trainer
        trainer.runner = MemberRunner(self, k, trainer.runner.plan)
        trainer.stream_only = True
        self.unclaimed[k] = 0.0
        self.pending.pop(k, None)
        self.live.add(k)
        self.joined.add(k)

    def record(self) -> dict[str, Any]:
        """The array as a run's record says it: its slots, layout and the runs in it now
        (and whether its captured step was compiled, once it has one)."""
        out = {
            "size": self.k,
            "runs": [self.trainers[k].cfg.run_id for k in sorted(self.live)],
            "layout": self.stacked.layout,
        }
        if self.graph is not None:
            out["compiled"] = self.graph.compiled  # the captured step's, as it ran
        return out

    def _note_members(self) -> None:
        """Add the runs stepping now to every live run's record of its array (kept in its
        state, so in its checkpoints: a resumed run's record still names them)."""
        now = self.record()
        for k in self.live:
            state = self.trainers[k].state
            state.array = merge_records(state.array, now)
        self.joined.clear()

    def retire(self, k: int, step: bool = True) -> None:
        """Run ``k`` ended (finished, failed or diverged): the others go on without it (with
        ``step``, at once if they all handed in their batches; else at :meth:`step_if_ready`,
        once the slot has found its next run or none)."""
        if k in self.live:
            self.live.discard(k)
            self.sgd.freeze(k)
            self.pending.pop(k, None)
        # The graph keeps stepping all K: an ended run's batch is zeros and its rows have zero
        # learning rate, weight decay and momentum; its loss is not in the others' gradients
        # (each run's parameters, channels and loss are its own).
        if step:
            self.step_if_ready()

    def step_if_ready(self) -> None:
        """Step if every live run has handed in its batch."""
        if self.live and set(self.pending) == self.live:
            self._step()

    def deposit(self, k: int, x: Tensor, y: Tensor, step: int) -> None:
        """Run ``k``'s batch of iteration ``step``; steps the array once every live run's is in."""
        self.pending[k] = (x, y, step)
        if set(self.pending) == self.live:
            self._step()

    def _step(self) -> None:
        batches, self.pending = self.pending, {}
        stacked = self.stacked
        if self.joined:
            self._note_members()
        if any(step % self.trainers[k].ipe == 0 for k, (_, _, step) in batches.items()):
            # An epoch's first iteration follows the runs' epoch-boundary hooks, which may have
            # replaced a run's parameter tensors (their values are kept) or cleared its
            # optimizer's state (BIMP's fresh optimizer: its momentum restarts from zero).
            # Both are copied into the stacked tensors, which a captured graph keeps reading.
            if not stacked.linked():
                stacked.relink()
            for k in batches:
                self.sgd.adopt(k)
        # The template's mode is the array's: every live run trains (run 0 may have ended in
        # the middle of its evaluation, leaving its model in eval mode).
        stacked.template.train()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "grad and param do not obey")
            losses = self._replayed(batches)
            counted = "replays"
            if losses is None:
                losses = self._eager(batches)
                counted = "eager"
        for k, (x, _, step) in batches.items():
            trainer = self.trainers[k]
            stats = trainer.runner.stats
            setattr(stats, counted, getattr(stats, counted) + 1)
            if trainer.in_method:
                trainer.method.after_step(step)
            elif trainer.ctx.masks is not None:
                trainer.ctx.masks.apply()
            trainer.loss_sum += losses[k] * x.shape[0]
        self.steps += 1
        k, (_, _, step) = next(iter(batches.items()))
        self.between_epochs = (step + 1) % self.trainers[k].ipe == 0

    def _eager(self, batches: dict[int, tuple[Tensor, Tensor, int]]) -> dict[int, Tensor]:
        ref, target, _ = next(iter(batches.values()))
        if self.first_shapes is None:
            self.first_shapes = (ref.shape, target.shape)
        xs = [batches[k][0] if k in batches else torch.zeros_like(ref) for k in range(self.k)]
        with self.trainers[0]._autocast:
            out = self.stacked.forward(torch.stack(xs))
            losses = {
                k: self.trainers[k].task.loss(_Fixed(out[k]), x, y)
                for k, (x, y, _) in batches.items()
            }
            total = torch.stack(list(losses.values())).sum()
        self.stacked.zero_grad()
        total.backward()
        for k, (_, _, step) in batches.items():
            trainer = self.trainers[k]
            if trainer.in_method:
                trainer.method.before_step(step)  # on its own gradients (views of its row)
        self.sgd.step()
        self.eager_steps += 1
        return {k: loss.detach() for k, loss in losses.items()}

    def _replayed(self, batches: dict[int, tuple[Tensor, Tensor, int]]) -> dict[int, Tensor] | None:
        """The iteration replayed from the captured graph (captured first if need be), or None
        when it must step eagerly."""
        if self.backend is None or self.eager_steps < EAGER_WARMUP_ITERS:
            return None
        x0, y0, _ = next(iter(batches.values()))
        xs = [batches[k][0] if k in batches else torch.zeros_like(x0) for k in range(self.k)]
        ys = [batches[k][1] if k in batches else torch.zeros_like(y0) for k in range(self.k)]
        if self.graph is None:
            if (x0.shape, y0.shape) != self.first_shapes:
                return None  # never capture an epoch's shorter last batch
            self.graph = self._capture(torch.stack(xs), torch.stack(ys))
            if self.graph is None:
                return None
        graph = self.graph
        if not graph.fits(x0, y0):
            return None  # an epoch's shorter last batch
        # Straight into the graph's static inputs: no stacked copy in between.
        torch.stack(xs, out=graph.xs)
        torch.stack(ys, out=graph.ys)
        graph.tables.copy_(self.sgd.tables())
        graph.replay()
        return {k: graph.losses[k] for k in batches}

    def _losses(self, xs: Tensor, ys: Tensor) -> Tensor:
        """The K runs' losses ``[K]`` of their batches ``xs`` (``[K, N, ...]``), ``ys``."""
        first = self.trainers[0]
        # A fresh autocast context (no weight cache: a captured cast would replay stale
        # weights), which torch.compile traces as well.
        with torch.autocast(
            self.device.type,
            first.half or torch.bfloat16,
            enabled=first.half is not None,
            cache_enabled=False,
        ):
            out = self.stacked.forward(xs)
            return torch.stack(
                [self.trainers[k].task.loss(_Fixed(out[k]), xs[k], ys[k]) for k in range(self.k)]
            )

    def _compiled_losses(self, graph: _Graph) -> tuple[Callable[[Tensor, Tensor], Tensor], bool]:
        """:meth:`_losses` compiled with torch.compile and run (forward and backward) twice on
        the graph's static batches, outside any capture: compiling and autotuning cannot happen
        while a CUDA graph captures. What the two passes change (BatchNorm's running statistics
        and batch counts, the gradients) is put back. Falls back to :meth:`_losses`, with a
        warning, when compiling fails; and whether it compiled."""
        stacked = self.stacked
        saved = {name: buffer.clone() for name, buffer in stacked.buffers.items()}
        compiled = torch.compile(self._losses, dynamic=False)
        try:
            for _ in range(2):
                compiled(graph.xs, graph.ys).sum().backward()
        except Exception as err:  # noqa: BLE001 - any compile error falls back, with a warning
            compiled = None
            reason = f"compiling the array's step failed ({type(err).__name__}: {str(err)[:200]})"
            for trainer in self.trainers:
                trainer.runner.stats.failures.append(reason)
            warnings.warn(
                f"run {self.trainers[0].cfg.run_id}: {reason}; its array's step is captured "
                "uncompiled (slower)",
                FastPathWarning,
                stacklevel=2,
            )
        finally:
            stacked.zero_grad()
            with torch.no_grad():
                for name, buffer in stacked.buffers.items():
                    buffer.copy_(saved[name])
        return (self._losses, False) if compiled is None else (compiled, True)

    def _capture(self, xs: Tensor, ys: Tensor) -> _Graph | None:
        """The array's step captured on static copies of ``xs``, ``ys`` (None: it failed and
        the array steps eagerly from now on, with a warning)."""
        assert self.backend is not None
        trainers, stacked, sgd = self.trainers, self.stacked, self.sgd
        graph = _Graph(
            xs.clone(),
            ys.clone(),
            sgd.tables(),
            torch.zeros(self.k, device=xs.device),
        )
        _sync(self.device)
        start = time.perf_counter()
        forward: Callable[[Tensor, Tensor], Tensor] = self._losses
        if self.compiled:
            forward, graph.compiled = self._compiled_losses(graph)

        def step() -> None:
            losses = forward(graph.xs, graph.ys)
            stacked.zero_grad()
            losses.sum().backward()
            sgd.update_from(graph.tables)
            graph.losses.copy_(losses.detach())

        try:
            graph.replay = self.backend.capture(step)
        except Exception as err:  # noqa: BLE001 - any capture error falls back, with a warning
            reason = f"capturing the array's step failed ({type(err).__name__}: {str(err)[:200]})"
            self.backend = None
            self.stacked.zero_grad()
            for trainer in trainers:
                trainer.runner.stats.failures.append(reason)
                trainer.runner.plan = StepPlan(channels_last=trainer.runner.plan.channels_last,
                                               why_eager=reason)  # fmt: skip
            warn_eager(trainers[0].cfg.run_id, reason)
            return None
        finally:
            _sync(self.device)
            spent = time.perf_counter() - start
            for k, trainer in enumerate(trainers):
                trainer.runner.stats.capture_seconds += spent
                self.unclaimed[k] += spent
        for trainer in trainers:
            trainer.runner.stats.captures += 1
        return graph


def _float_lrs(trainer: Any) -> None:
    """The run's learning rates as Python floats (read into the [K] tables on the host)."""
    trainer.device_lrs = None
    for group in trainer.optimizer.param_groups:
        lr = group["lr"]
        group["lr"] = float(lr.item() if isinstance(lr, Tensor) else lr)
        group["fused"] = None


def _loss_of(trainer: Any) -> tuple[Any, ...]:
    """What a captured step computes of a run's loss: its task's loss function and settings
    (a classification task's label smoothing)."""
    return (type(trainer.task), trainer.cfg.optim.label_smoothing)


def merge_records(old: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, Any]:
    """A run's record of its array(s): ``old`` (from before, or from its checkpoint) with the
    array ``now``: the runs of both in order of first appearance, the larger size and every
    layout (joined by "+" when a resumed run trained in another one), and whether the last
    captured step was compiled."""
    if old is None:
        return dict(now, runs=list(now["runs"]))
    layouts = old["layout"].split("+")
    out = {
        "size": max(old["size"], now["size"]),
        "runs": [*old["runs"], *(r for r in now["runs"] if r not in old["runs"])],
        "layout": "+".join([*layouts, *([now["layout"]] if now["layout"] not in layouts else [])]),
    }
    compiled = now.get("compiled", old.get("compiled"))
    return out if compiled is None else {**out, "compiled": compiled}


class _Graph:
    """A captured array step and the static tensors it reads and writes."""

    def __init__(self, xs: Tensor, ys: Tensor, tables: Tensor, losses: Tensor) -> None:
        self.xs, self.ys, self.tables, self.losses = xs, ys, tables, losses
        self.replay: Callable[[], None] = lambda: None
        self.compiled = False

    def fits(self, x: Tensor, y: Tensor) -> bool:
        """Whether one run's batch ``x``, ``y`` has the captured shapes and types."""
        same = x.shape == self.xs.shape[1:] and y.shape == self.ys.shape[1:]
        return same and x.dtype == self.xs.dtype and y.dtype == self.ys.dtype


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _Fixed:
    """A "model" returning precomputed outputs, so a run's task computes its own loss."""

    def __init__(self, out: Tensor) -> None:
        self.out = out

    def __call__(self, _inputs: Tensor) -> Tensor:
        return self.out
