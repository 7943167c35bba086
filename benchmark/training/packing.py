"""K runs of one grid sharing one device inside one process.

One run at batch 128 leaves most of a modern GPU idle, and K processes sharing a card take turns
on it rather than overlapping (without MPS). Here the K runs live in one process, each with its
own config, model, optimizer, data, checkpoint, resume and result, and their training steps are
interleaved: every run's epoch loop is a generator (:mod:`benchmark.training.loop`) that yields
after each training iteration, and :func:`drive_packed` advances the runs in turn, each turn on
the run's own CUDA stream so that one run's kernels overlap another's.

A run trained packed computes what it computes alone: a turn restores the run's own random
number generators (torch's CPU and device generators, NumPy's, Python's) before it steps and
saves them after, so no run consumes another's random numbers, and the kernels are those of a
run alone. Bit for bit where the kernels are deterministic (the CPU; ``runtime.deterministic``
on a GPU); otherwise within the float noise of cuDNN's autotuned algorithm choices, which may
differ between a run alone and a run sharing the device.

Settings that are global to a process (device, thread count, deterministic kernels, the fast
path's switches) must be equal within a pack: :func:`pack_key` says which.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError


def pack_key(cfg: RunConfig) -> tuple[Any, ...]:
    """What runs sharing one process must agree on: the process-wide runtime settings."""
    rt = cfg.runtime
    return (rt.device, rt.threads, rt.deterministic, rt.cuda_graphs, rt.channels_last)


def check_packable(cfgs: Sequence[RunConfig]) -> None:
    """Refuse, before anything runs, a pack whose runs need different process-wide settings."""
    keys = {pack_key(cfg) for cfg in cfgs}
    if len(keys) > 1:
        raise ConfigError(
            "runtime",
            sorted(str(k) for k in keys),
            "one (device, threads, deterministic, cuda_graphs, channels_last) for every run "
            "of a pack: runs that share a process share these settings",
        )


@dataclass
class RngState:
    """Every random number generator a run draws from, saved between its turns."""

    torch_cpu: torch.Tensor
    numpy: tuple[Any, ...]
    python: tuple[Any, ...]
    device: torch.Tensor | None = None

    @classmethod
    def capture(cls, device: torch.device) -> RngState:
        """The generators' current states."""
        return cls(
            torch_cpu=torch.get_rng_state(),
            numpy=np.random.get_state(),
            python=random.getstate(),
            device=torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        )

    def restore(self, device: torch.device) -> None:
        """Make these the generators' states."""
        torch.set_rng_state(self.torch_cpu)
        np.random.set_state(self.numpy)
        random.setstate(self.python)
        if self.device is not None:
            torch.cuda.set_rng_state(self.device, device)


@dataclass
class PackedRun:
    """One run of a pack: its step generator, device, stream and generators' state.

    ``rng`` is the run's generators as they stood when it would have started alone: captured
    right after its trainer was built (which seeds them) and resumed. ``on_done(result)`` is
    called once the generator returns, ``on_error(error)`` if it raises; neither stops the other
    runs.
    """

    name: str
    steps: Generator[None, None, Any]
    device: torch.device
    rng: RngState
    on_done: Callable[[Any], None] = lambda _result: None
    on_error: Callable[[BaseException], None] = lambda _error: None
    stream: Any = None
    own_stream: bool = True
    turns: int = 0
    result: Any = None
    error: BaseException | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.device.type == "cuda" and self.stream is None and self.own_stream:
            self.stream = torch.cuda.Stream(self.device)

    @contextlib.contextmanager
    def turn(self) -> Iterator[None]:
        """This run's generators and stream for the duration of one step (the generators are
        left as the step left them: :func:`drive_packed` restores the caller's at the end)."""
        self.rng.restore(self.device)
        stream = torch.cuda.stream(self.stream) if self.stream is not None else None
        try:
            with stream if stream is not None else contextlib.nullcontext():
                yield
        finally:
            self.rng = RngState.capture(self.device)
            self.turns += 1


def drive_packed(
    runs: Sequence[PackedRun], refill: Callable[[], list[PackedRun]] | None = None
) -> None:
    """Advance every run one step in turn until all have ended (each with a result or error).

    ``on_done`` and ``on_error`` run in the run's own turn (its stream, its generators). A run
    that raises, in a step or in ``on_done``, is ended with ``on_error`` and the others go on;
    KeyboardInterrupt and SystemExit stop the whole pack. ``refill``, called after every turn
    (outside it), gives the runs that start now (in the place of one that ended): each takes
    its first turn in the same round as the others' next.
    """
    active = list(runs)
    # The caller's generators, saved once: each turn sets the run's own, so there is nothing to
    # restore between two turns.
    outer = {run.device: RngState.capture(run.device) for run in runs}
    try:
        _drive(active, refill or list)
    finally:
        for device, state in outer.items():
            state.restore(device)


def _drive(active: list[PackedRun], refill: Callable[[], list[PackedRun]]) -> None:
    """Turn the ``active`` runs until none is left (:func:`drive_packed`)."""
    while active:
        round_ = list(active)
        while round_:
            run = round_.pop(0)
            _turn(run, active)
            joining = refill()
            active += joining
            round_ += joining


def _turn(run: PackedRun, active: list[PackedRun]) -> None:
    """One step of ``run``; an ended run leaves ``active`` (:func:`drive_packed`)."""
    with run.turn():
        try:
            next(run.steps)
            return
        except StopIteration as done:
            run.result = done.value
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as err:  # noqa: BLE001 - one run's failure is its own
            run.error = err
        active.remove(run)
        if run.error is None:
            try:
                run.on_done(run.result)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as err:  # noqa: BLE001
                run.error = err
        if run.error is not None:
            run.on_error(run.error)


def execute_packed(
    cfgs: Sequence[RunConfig], *, force: bool = False
) -> list[dict[str, Any] | BaseException]:
    """Train ``cfgs`` together in this process, each into its store as if it trained alone.

    Returns, per config, its record (finished now, or before) or the error that ended it: a run
    that is locked by another process, fails or diverges is that run's outcome alone. Every
    config is validated before anything starts; each run holds its own lock and writes its own
    checkpoint, record and weights.
    """
    results: list[dict[str, Any] | BaseException | None] = [None] * len(cfgs)
    with contextlib.ExitStack() as locks:
        started = open_sessions(cfgs, locks, results, force=force)
        runs = []
        for i, session, rng in started:
            session.trainer.stream_only = True
            runs.append(packed_run(session, i, results, rng))
        drive_packed(runs)
    return [r if r is not None else RuntimeError("not run") for r in results]


def open_sessions(
    cfgs: Sequence[RunConfig],
    locks: contextlib.ExitStack,
    results: list[Any],
    *,
    force: bool = False,
) -> list[tuple[int, Any, RngState]]:
    """Validate ``cfgs``, lock and start (or resume) each run: its index, its session and its
    random number generators as they stood right after its trainer was built (and resumed).

    A run locked elsewhere, finished before or failing to start gets its outcome in
    ``results[index]`` instead; the locks are held until ``locks`` closes.
    """
    from benchmark.store.errors import RunLockedError
    from benchmark.store.results import Store
    from benchmark.training.distributed import world_size
    from benchmark.training.preflight import check_runtime
    from benchmark.training.runner import Session, begin
    from benchmark.training.validation import validate

    check_packable(cfgs)
    if world_size() > 1:
        raise ConfigError("--runs-per-gpu", len(cfgs), "1 for data-parallel runs")
    for cfg in cfgs:
        validate(cfg)
        check_runtime(cfg)
    started = []
    for i, cfg in enumerate(cfgs):
        store = Store(cfg.output.dir)
        try:
            locks.enter_context(store.lock(f"run-{cfg.run_id}", wait=False))
        except RunLockedError as err:
            results[i] = RunLockedError(f"run {cfg.run_id} is already running: {err}")
            continue
        try:
            store.clean_run_files(cfg.run_id)
            session = begin(cfg, store, force=force)
        except Exception as err:  # noqa: BLE001 - recorded by begin; others go on
            results[i] = err
            continue
        if not isinstance(session, Session):
            results[i] = session  # finished before
            continue
        started.append((i, session, RngState.capture(session.trainer.device)))
    return started


def packed_run(
    session: Any, index: int, results: list[Any], rng: RngState, own_stream: bool = True
) -> PackedRun:
    """The pack entry of a started run: its outcome lands in ``results[index]``.

    ``own_stream``: the run's steps on a CUDA stream of its own (not for an array's runs, whose
    steps are one).
    """

    def done(metrics: dict[str, Any]) -> None:
        results[index] = session.finish(metrics)

    def failed(err: BaseException) -> None:
        if results[index] is None:
            session.fail(err)
        results[index] = err

    trainer = session.trainer
    return PackedRun(
        name=session.cfg.run_id,
        steps=trainer.fit_steps(),
        device=trainer.device,
        rng=rng,
        on_done=done,
        on_error=failed,
        own_stream=own_stream,
    )
