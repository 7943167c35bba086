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
import sys
from collections.abc import Sequence
from typing import Any

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
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


def why_not_fused(cfg: RunConfig) -> str:
    """Why run ``cfg`` cannot share an array with others ("" when it can, by its config)."""
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
    return ""


def array_key(cfg: RunConfig) -> tuple[Any, ...]:
    """What the runs of one array must agree on (see the module docstring)."""
    cls = get_method(cfg.method.name)
    epochs = cls(cfg).total_epochs() + cfg.finetune.epochs
    # A method with a hook between backward and step (GSM, LC, DPF, DNW) groups its optimizer's
    # parameters its own way and steps its arrays eagerly: its runs share arrays with its own.
    own = cfg.method.name if hooks_between(cls) else ""
    return (cfg.model.name, repr(cfg.data), epochs, cfg.optim.precision(), pack_key(cfg), own)


def form_arrays(
    cfgs: Sequence[RunConfig], size: int
) -> tuple[list[list[RunConfig]], list[RunConfig], dict[str, str]]:
    """Split ``cfgs`` into arrays of at most ``size`` compatible runs, and the runs left over
    (to pack), with why each of those is left over (by run id)."""
    groups: dict[tuple[Any, ...], list[RunConfig]] = {}
    rest: list[RunConfig] = []
    why: dict[str, str] = {}
    for cfg in cfgs:
        reason = why_not_fused(cfg)
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
                why[chunk[0].run_id] = "no other run of the grid fits its array"
    return arrays, rest, why


def why_not_together(trainers: Sequence[Any]) -> str:
    """Why these started runs cannot train as one array now ("" when they can)."""
    first = trainers[0]
    for name, value in (
        ("iterations per epoch", lambda t: t.ipe),
        ("epochs", lambda t: t.total_epochs),
        ("epoch to resume from", lambda t: t.state.epoch),
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


def execute_array(
    cfgs: Sequence[RunConfig], *, force: bool = False, layout: str | None = None
) -> list[dict[str, Any] | BaseException]:
    """Train ``cfgs`` as one array in this process, each into its store as if it trained alone.

    Returns, per config, its record or the error that ended it (as
    :func:`~benchmark.training.packing.execute_packed`). Runs that cannot share an array after
    all (resumed at different epochs, a model that draws random numbers) train packed, with one
    line saying why. ``layout``: the forward's (one of LAYOUTS; None: the device's default).
    """
    if layout is not None and layout not in LAYOUTS:
        raise ConfigError("--array-layout", layout, f"one of {', '.join(LAYOUTS)}")
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
        array = None
        if len(trainers) > 1:
            why = why_not_together(trainers)
            if why:
                print(
                    f"training {len(trainers)} runs packed, not as an array: {why}", file=sys.stderr
                )
            else:
                chosen = layout or default_layout(trainers[0].device.type, trainers[0].model)
                try:
                    array = ArrayStep(trainers, chosen)
                except ConfigError as err:  # e.g. a method that optimises only some parameters
                    print(
                        f"training {len(trainers)} runs packed, not as an array: {err}",
                        file=sys.stderr,
                    )
        runs = []
        for k, (i, session, rng) in enumerate(started):
            session.trainer.stream_only = True
            run = packed_run(session, i, results, rng, own_stream=array is None)
            if array is not None:
                _join(run, array, k)
            runs.append(run)
        drive_packed(runs)
    return [r if r is not None else RuntimeError("not run") for r in results]


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
        metrics["array"] = array.record()
        done(metrics)

    def on_error(err: BaseException) -> None:
        array.retire(k)
        failed(err)

    run.on_done, run.on_error = on_done, on_error
