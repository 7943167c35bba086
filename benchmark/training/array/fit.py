"""Which runs of a grid can share an array, and training them as one, each recorded alone.

Runs share an array when their iterations can go in lockstep with one model: the same model and
data set (batch size, epoch fraction), the same number of epochs in all, the same precision and
process-wide runtime settings, a method whose per-iteration hooks can run per run (dense, IMP
with any retraining schedule, BIMP, Renda, GMP; and GSM, LC, DPF, DNW, whose hook between
backward and step runs on each run's own gradients, in arrays of their own method, stepped
eagerly) and no gradient clipping. They may differ in seed,
learning rate and schedule, weight decay, momentum, goal sparsity, criterion and prune epochs:
each run's own epoch loop, schedule and pruning hooks run on its own slice of the array.
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
    epochs = cls(cfg).total_epochs() + cfg.finetune.epochs
    # A method with a hook between backward and step (GSM, LC, DPF, DNW) groups its optimizer's
    # parameters its own way and steps its arrays eagerly: its runs share arrays with its own.
    own = cfg.method.name if hooks_between(cls) else ""
    return (cfg.model.name, repr(cfg.data), epochs, cfg.optim.bf16, pack_key(cfg), own)


# Why a run that could share an array is left to pack: it has no partner.
ALONE = "no other run of the grid fits its array"


def form_arrays(
    cfgs: Sequence[RunConfig], size: int, layout: str | None = None
) -> tuple[list[list[RunConfig]], list[RunConfig], dict[str, str]]:
    """Split ``cfgs`` into arrays of at most ``size`` compatible runs (in ``layout``; None:
    the device's default), and the runs left over (to pack), with why each of those is left
    over (by run id: :data:`ALONE` for a run that could share an array but has no partner)."""
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
        for start in range(0, len(group), size):
            chunk = group[start : start + size]
            if len(chunk) > 1:
                arrays.append(chunk)
            else:
                rest.extend(chunk)
                why[chunk[0].run_id] = ALONE
    return arrays, rest, why


def why_not_together(trainers: Sequence[Any]) -> str:
    """Why these started runs cannot train as one array now ("" when they can)."""
    first = trainers[0]
    # Runs resumed at different epochs train together all the same (their epochs start and
    # end at the same iterations): an array's runs resume as one array, whichever of them a
    # kill left an epoch behind the others.
    for name, value in (
        ("iterations per epoch", lambda t: t.ipe),
        ("epochs", lambda t: t.total_epochs),
        ("device", lambda t: str(t.device)),
        ("bf16", lambda t: t.cfg.optim.bf16),
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
    log: Callable[[str], None] = _stderr,
) -> list[dict[str, Any] | BaseException]:
    """Train ``cfgs`` as one array in this process, each into its store as if it trained alone.

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
            "runs with one model, data set and epochs, and the same method when it has a "
            "before_step hook",
        )
    results: list[dict[str, Any] | BaseException | None] = [None] * len(cfgs)
    with contextlib.ExitStack() as locks:
        started = open_sessions(cfgs, locks, results, force=force)
        trainers = [session.trainer for _, session, _ in started]
        array = _form(trainers, layout, log)
        runs = []
        for k, (i, session, rng) in enumerate(started):
            session.trainer.stream_only = True
            run = packed_run(session, i, results, rng, own_stream=array is None)
            if array is not None:
                _join(run, array, k)
            runs.append(run)
        drive_packed(runs)
    return [r if r is not None else RuntimeError("not run") for r in results]


def _form(trainers: list[Any], layout: str | None, log: Callable[[str], None]) -> ArrayStep | None:
    """The array of the started ``trainers``, or None when they train packed (said in
    ``log``). One run alone forms an array only when it trained in one before (its resumed
    state says so): its remaining epochs are trained as the others were."""
    ids = ", ".join(t.cfg.run_id for t in trainers)
    if not trainers or (len(trainers) == 1 and trainers[0].state.array is None):
        return None
    why = why_not_together(trainers)
    if not why:
        chosen = layout or default_layout(trainers[0].device.type, trainers[0].model)
        try:
            array = ArrayStep(trainers, chosen)
        except ConfigError as err:  # e.g. a method that optimises only some parameters
            why = str(err)
        else:
            n = len(trainers)
            log(f"training {n} run{'s' * (n > 1)} as one array ({chosen} layout): {ids}")
            return array
    log(f"training {len(trainers)} runs packed, not as an array: {why}")
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


def _join(run: Any, array: ArrayStep, k: int) -> None:
    """Make packed run ``run`` member ``k`` of ``array``: its record says so, and its end
    (finished or failed) lets the others go on without it."""
    done, failed = run.on_done, run.on_error

    def on_done(metrics: dict[str, Any]) -> None:
        array.retire(k)
        done(metrics)

    def on_error(err: BaseException) -> None:
        array.retire(k)
        failed(err)

    run.on_done, run.on_error = on_done, on_error
