"""Which runs of a grid can share an array, and training them as one, each recorded alone.

Runs share an array when their iterations can go in lockstep with one model: the same model and
data set (batch size, epoch fraction), the same precision, process-wide runtime settings and
``runtime.compile`` (an array's one step is compiled or not for all its runs), a method whose
per-iteration hooks can run per run (dense, IMP with any retraining schedule, BIMP, Renda, GMP;
and GSM, LC, DPF, DNW, whose hook between backward and step runs on each run's own gradients, in
arrays of their own method), the same grouping of the optimizer's parameters (the method's
``grouped_by`` keys) and no gradient clipping. They may differ in seed, epochs, learning rate
and schedule, weight decay, momentum, goal sparsity, criterion and prune epochs: each run's own
epoch loop, schedule and pruning hooks run on its own slice of the array. A job's compatible
runs train through one array of at most K slots: the first K start in it, and when one ends (at
the end of an epoch, where every run's epoch ends) the next takes its slot, so the array stays
full.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.training.array.grouped import grouped_unsupported
from benchmark.training.array.stack import LAYOUTS, default_layout
from benchmark.training.array.step import ArrayStep, hooks_between, method_fuses, model_fuses
from benchmark.training.packing import (
    PackedRun,
    RngState,
    drive_packed,
    open_sessions,
    pack_key,
    packed_run,
)
from benchmark.training.passes import run_passes
from methods import get_method


def check_layout(layout: str | None, array: int | None = None) -> None:
    """Refuse an array layout that does not exist (None: the device's default), or one asked
    for runs that train in no array (``--array`` = ``array`` of 1)."""
    if layout is None:
        return
    if layout not in LAYOUTS:
        raise ConfigError("--array-layout", layout, f"one of {', '.join(LAYOUTS)}")
    if array is not None and array <= 1:
        raise ConfigError("--array-layout", layout, "a layout together with --array K > 1 only")


def why_not_fused(cfg: RunConfig, layout: str | None = None) -> str:
    """Why run ``cfg`` cannot share an array with others ("" when it can, by its config, its
    data set's task and its model's modules), in ``layout`` (None: the device's default)."""
    why = method_fuses(get_method(cfg.method.name))
    if why:
        return why
    if cfg.optim.name != "sgd":
        # The array's one step is SGD (momentum, Nesterov, weight decay) for every run.
        return f"optimizer {cfg.optim.name!r}: an array steps with SGD only"
    if cfg.optim.grad_clip > 0:
        return "gradient clipping (optim.grad_clip) is per run and not fused"
    if cfg.model.batchnorm_processes != 1:
        return "runs of several processes are not fused"
    return _model_reason(cfg.model.name, cfg.data.name, layout)


@functools.cache
def _model_reason(model: str, data: str, layout: str | None) -> str:
    """Why copies of ``model`` on ``data`` cannot share an array: the task of the data set
    (classification only) and the model's modules, as the run will find them when it starts
    ("" when they can, or when the model cannot be built before its run: the run then says
    why, and trains packed)."""
    from benchmark.training.footprint import DATASET_TASKS

    if data in DATASET_TASKS:
        return f"the {DATASET_TASKS[data]} task (an array trains classification models only)"
    net = _meta_model(model, data)
    if net is None:
        return ""
    why = model_fuses(net)
    if not why and layout == "grouped":
        unknown = grouped_unsupported(net)
        why = f"the grouped array layout cannot run the model ({unknown})" if unknown else ""
    return why


@functools.cache
def _meta_model(model: str, data: str) -> Any:
    """``model`` for data set ``data`` built on the meta device (no memory, no compute), or
    None when it cannot be built before its run (its files, an unknown data set)."""
    import torch

    from benchmark.models.registry import build_model
    from benchmark.training.footprint import DATASET_SHAPES

    if data not in DATASET_SHAPES:
        return None
    classes, shape = DATASET_SHAPES[data]
    try:
        with torch.device("meta"):
            return build_model(model, classes, shape)
    except Exception:  # noqa: BLE001 - a builder that needs files or memory
        return None


def planned_layout(device_type: str, model: str, data: str) -> str:
    """The layout arrays of ``model`` on ``data`` use on a ``device_type`` device unless told
    (:func:`~benchmark.training.array.stack.default_layout`, known before they run)."""
    return default_layout(device_type, _meta_model(model, data))


def array_key(cfg: RunConfig) -> tuple[Any, ...]:
    """What the runs of one array must agree on (see the module docstring)."""
    cls = get_method(cfg.method.name)
    # A method with a hook between backward and step (GSM, LC, DPF, DNW) groups its optimizer's
    # parameters its own way and steps its arrays eagerly: its runs share arrays with its own.
    own = cfg.method.name if hooks_between(cls) else ""
    # An array compiles its one step or not (runtime.compile): runs that ask differently train
    # in arrays of their own, so that no run's setting is overridden by another's.
    return (
        cfg.model.name,
        repr(cfg.data),
        cfg.optim.precision(),
        pack_key(cfg),
        cfg.runtime.compile,
        own,
        _grouping(cfg, cls.grouped_by),
    )


def _grouping(cfg: RunConfig, keys: Sequence[str]) -> tuple[Any, ...]:
    """What decides which optimizer group each parameter falls in (one array steps one
    optimizer, its groups alike for every run): the method's ``grouped_by`` keys, and the
    prunable set (``method.exclude``) where they may name it (LC ranking P only)."""
    if not keys:
        return ()
    return (*(getattr(cfg.method.params, k) for k in keys), tuple(cfg.method.exclude))


# Why a run that could share an array is left to pack: it has no partner.
ALONE = "no other run of the grid fits its array"


def form_arrays(
    cfgs: Sequence[RunConfig], size: int, layout: str | None = None
) -> tuple[list[list[RunConfig]], list[RunConfig], dict[str, str]]:
    """Split ``cfgs`` into arrays (in ``layout``; None: the device's default), and the runs
    left over (to pack), with why each of those is left over (by run id: :data:`ALONE` for a
    run that could share an array but has no partner). An array holds every compatible run,
    longest first (the shortest then fill the slots at the end); it trains them through
    ``min(size, len(array))`` slots (:func:`execute_array`)."""
    groups: dict[tuple[Any, ...], list[RunConfig]] = {}
    rest: list[RunConfig] = []
    why: dict[str, str] = {}
    for cfg in cfgs:
        reason = why_not_fused(cfg, layout)
        if reason:
            rest.append(cfg)
            why[cfg.run_id] = reason
        else:
            groups.setdefault(array_key(cfg), []).append(cfg)
    arrays: list[list[RunConfig]] = []
    for group in groups.values():
        if len(group) > 1 and size > 1:
            arrays.append(sorted(group, key=run_passes, reverse=True))
        else:
            rest.extend(group)
            why.update({cfg.run_id: ALONE for cfg in group})
    return arrays, rest, why


def array_span(passes: Sequence[int], slots: int) -> int:
    """Epochs an array of ``slots`` slots takes to train runs of ``passes`` epochs, in this
    order, each run taking the first slot that ends (every epoch of the array is as long as
    any other: an empty slot computes zeros)."""
    ends = [0] * min(slots, len(passes))
    for n in passes:
        ends[ends.index(min(ends))] += n
    return max(ends, default=0)


def why_not_together(trainers: Sequence[Any]) -> str:
    """Why these started runs cannot train as one array now ("" when they can)."""
    first = trainers[0]
    # Runs at different epochs train together all the same (their epochs start and end at the
    # same iterations): a run takes a freed slot at its first epoch, and an array's runs resume
    # as one array, whichever of them a kill left an epoch behind the others.
    for name, value in (
        ("iterations per epoch", lambda t: t.ipe),
        ("device", lambda t: str(t.device)),
        ("precision", lambda t: t.cfg.optim.precision()),
    ):
        values = {value(t) for t in trainers}
        if len(values) > 1:
            return f"their {name} differ ({sorted(map(str, values))})"
    task = getattr(first.data, "task", "classification")
    if task != "classification":
        # The array's forward maps a batch tensor to a logits tensor; other tasks' models take
        # keyword inputs or return structured outputs.
        return f"the {task} task (an array trains classification models only)"
    return model_fuses(first.model) or method_fuses(type(first.method))


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def execute_array(
    cfgs: Sequence[RunConfig],
    *,
    force: bool = False,
    layout: str | None = None,
    size: int | None = None,
    log: Callable[[str], None] = _stderr,
) -> list[dict[str, Any] | BaseException]:
    """Train ``cfgs`` through one array of ``size`` slots (None: one per run) in this process,
    each into its store as if it trained alone: the first runs that start take the slots, and
    when one ends the next of ``cfgs`` takes its slot (its own lock, start or resume).

    Returns, per config, its record or the error that ended it (as
    :func:`~benchmark.training.packing.execute_packed`). Runs resumed at different epochs
    (a kill between their checkpoints) train as one array all the same; one run left that
    trained in an array before (the others finished) goes on in an array of one. Runs that
    cannot share an array after all (a method that optimises only some parameters) train
    packed. ``log`` gets one line saying which it is once decided. ``layout``: the forward's
    (one of LAYOUTS; None: the device's default).
    """
    check_layout(layout)
    reasons = {cfg.run_id: why_not_fused(cfg) for cfg in cfgs}
    bad = {rid: why for rid, why in reasons.items() if why}
    if bad:
        raise ConfigError("--array", sorted(bad), f"runs that can share an array ({bad})")
    if len({array_key(cfg) for cfg in cfgs}) > 1:
        raise ConfigError(
            "--array",
            [c.run_id for c in cfgs],
            "runs with one model, data set, precision, runtime.compile and grouping of the "
            "optimizer's parameters, and the same method when it has a before_step hook",
        )
    slots = _Slots(cfgs, force, log)
    with contextlib.ExitStack() as locks:
        slots.locks = locks
        started = slots.start(min(size or len(cfgs), len(cfgs)))
        slots.array = _form([st.trainer for st in started], layout, log, len(slots.waiting))
        runs = [slots.run(st, k) for k, st in enumerate(started)]
        drive_packed(runs, slots.refill)
    return [r if r is not None else RuntimeError("not run") for r in slots.results]


class _Started:
    """A run that started (or resumed) under its own lock, held until it ends."""

    def __init__(self, i: int, session: Any, rng: RngState, lock: contextlib.ExitStack) -> None:
        self.i, self.session, self.rng, self.lock = i, session, rng, lock
        self.trainer = session.trainer


class _Slots:
    """The runs of :func:`execute_array`: those waiting, and the slot each started one holds
    (of the array, or of the pack its runs train in when they form no array)."""

    def __init__(self, cfgs: Sequence[RunConfig], force: bool, log: Callable[[str], None]):
        self.cfgs, self.force, self.log = cfgs, force, log
        self.results: list[Any] = [None] * len(cfgs)
        self.waiting = list(range(len(cfgs)))
        self.vacant: list[int] = []  # slots whose run ended
        self.array: ArrayStep | None = None
        self.locks = contextlib.ExitStack()

    def start(self, n: int) -> list[_Started]:
        """Start waiting runs until ``n`` have (a finished, locked or failing run is its
        outcome instead)."""
        started: list[_Started] = []
        while self.waiting and len(started) < n:
            i = self.waiting.pop(0)
            lock = self.locks.enter_context(contextlib.ExitStack())
            outcome: list[Any] = [None]
            opened = open_sessions([self.cfgs[i]], lock, outcome, force=self.force)
            if opened:
                started.append(_Started(i, opened[0][1], opened[0][2], lock))
            else:
                self.results[i] = outcome[0]
                lock.close()
        return started

    def run(self, st: _Started, slot: int | None) -> PackedRun:
        """The pack entry of a started run holding ``slot`` (None: packed beside the array,
        holding none); its end releases its lock and frees its slot."""
        st.trainer.stream_only = True
        in_array = self.array is not None and slot is not None
        run = packed_run(st.session, st.i, self.results, st.rng, own_stream=not in_array)

        def ended(outcome: Callable[[Any], None]) -> Callable[[Any], None]:
            def end(value: Any) -> None:
                try:
                    outcome(value)
                finally:
                    st.lock.close()
                    if slot is not None:
                        self.vacant.append(slot)  # the next run takes it after this turn

            return end

        done = run.on_done

        def finished(metrics: dict[str, Any]) -> None:
            graph = self.array.graph if in_array and self.array is not None else None
            if graph is not None and "array" in metrics:
                metrics["array"]["compiled"] = graph.compiled  # the captured step's, as it ran
            done(metrics)

        run.on_done, run.on_error = ended(finished), ended(run.on_error)
        return run

    def refill(self) -> list[PackedRun]:
        """After a turn: the runs that take the slots of those that ended, started now. An
        array's slot waits while the others are inside an epoch, and stays empty when no run
        is left for it; a run that cannot join the array trains packed beside it."""
        array, joining = self.array, []
        for k in list(self.vacant):
            if array is not None:
                array.retire(k, step=False)
                if not array.can_admit(k):
                    continue  # the others are inside an epoch: at its end
            self.vacant.remove(k)
            while self.waiting:
                started = self.start(1)
                why = self._admit(k, started[0].trainer) if started and array else ""
                if why:
                    self.log(f"run {started[0].trainer.cfg.run_id}: packed beside the array: {why}")
                joining += [self.run(st, None if why else k) for st in started]
                if started and not why:
                    break
        if array is not None:
            array.step_if_ready()
        return joining

    def _admit(self, k: int, trainer: Any) -> str:
        """Put ``trainer``'s run into slot ``k`` of the array; why not ("" when it did)."""
        assert self.array is not None
        others = [self.array.trainers[j] for j in self.array.live]
        why = why_not_together([*others, trainer]) if others else ""
        if not why:
            try:
                self.array.admit(k, trainer)
            except (ValueError, ConfigError) as err:
                why = str(err)
        if not why:
            self.log(f"run {trainer.cfg.run_id}: takes slot {k} of the array")
        return why


def _form(
    trainers: list[Any], layout: str | None, log: Callable[[str], None], waiting: int
) -> ArrayStep | None:
    """The array of the started ``trainers`` (``waiting`` more runs to take their slots as
    they end), or None when they train packed (said in ``log``). One run alone forms an array
    only when others wait, or it trained in one before (its resumed state says so)."""
    ids = ", ".join(t.cfg.run_id for t in trainers)
    runs = len(trainers) + waiting
    if not trainers or (runs == 1 and trainers[0].state.array is None):
        return None
    why = why_not_together(trainers)
    if not why:
        chosen = layout or default_layout(trainers[0].device.type, trainers[0].model)
        try:
            array = ArrayStep(trainers, chosen)
        except ConfigError as err:  # e.g. a method that optimises only some parameters
            why = str(err)
        else:
            slots = f", {len(trainers)} slots: a run that ends gives its slot on" if waiting else ""
            plural = "s" * (runs > 1)
            log(f"training {runs} run{plural} as one array ({chosen} layout{slots}): {ids}")
            return array
    log(f"training {runs} runs packed, not as an array: {why}")
    return None


def array_epoch(trainers: Sequence[Any], epoch: int, rngs: list[RngState]) -> None:
    """Train epoch ``epoch`` of trainers joined by one :class:`ArrayStep` (timing benchmarks
    and calibration: no store); ``rngs`` are their generators, updated; raises a run's error."""
    runs = [
        PackedRun(t.cfg.run_id, t.epoch_steps(epoch), t.device, rngs[i], own_stream=False)
        for i, t in enumerate(trainers)
    ]
    drive_packed(runs)
    for i, run in enumerate(runs):
        if run.error is not None:
            raise run.error
        rngs[i] = run.rng
