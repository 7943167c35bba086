"""The job callable: :class:`GridTask` trains the runs of one job, recording failures."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
import traceback
from collections.abc import Sequence

import submitit
from submitit.core.utils import UncompletedJobError

from benchmark.config.parse import replace_section
from benchmark.config.run import RunConfig
from benchmark.launch.local_worker import follow_local_worker
from benchmark.store.results import FAILED, FINISHED, ResultExistsError, RunLockedError, Store

LOG_TAIL_LINES = 40
SKIPPED = "skipped"  # another job holds the run's lock


class ParentNotFinished(RuntimeError):
    """A run's dense parent has no finished result and weights to start from."""


class RunsFailed(RuntimeError):
    """Some runs of a task failed (each is recorded in the store); fails the job."""


class GridTask(submitit.helpers.Checkpointable):
    """One job (array task): trains its runs in order; finished runs are skipped.

    Checkpointable: on the time-limit/preemption signal submitit pickles this object (which holds
    only configs) and requeues the job; each run then resumes from its epoch checkpoint.
    """

    def __init__(
        self,
        configs: Sequence[RunConfig],
        threads: int = 0,
        isolate: bool = True,
        pack: int = 1,
        array: int = 1,
        layout: str | None = None,
    ) -> None:
        # ``threads``: for runs whose config leaves runtime.threads at 0 only (an explicit value
        # is never replaced; the submitter resolves threads by LaunchSettings.run_threads).
        self.configs = [_with_default_threads(c, threads) for c in configs]
        self.threads = threads
        # isolate: a failing run is recorded and the others go on (False: the debug executor
        # lets the original exception reach the debugger).
        self.isolate = isolate
        # pack: runs trained at once on the job's device (benchmark.training.packing).
        self.pack = pack
        # array: compatible runs trained as one array model (benchmark.training.array), in
        # ``layout`` (None: the device's default).
        self.array = array
        self.layout = layout

    def __call__(self) -> dict[str, str]:
        from benchmark.training.distributed import job_process_group

        follow_local_worker()  # a stopped local worker stops this task too
        # A job of several tasks trains each run data-parallel; there a failing run ends the
        # job (the ranks must stay in step), so it is never isolated.
        with job_process_group(self.configs) as parallel:
            if (self.pack > 1 or self.array > 1) and not parallel:
                return self._run_packed()
            return self._run(parallel)

    def _run(self, parallel: bool) -> dict[str, str]:
        from benchmark.training.runner import execute

        # Each run sets its own threads (runtime.threads, in the trainer): no job-wide value.
        outcome: dict[str, str] = {}
        for cfg in self.configs:
            rid = cfg.run_id
            store = Store(cfg.output.dir)
            if store.is_finished(rid):
                outcome[rid] = FINISHED
                continue
            resume = store.checkpoint_path(rid).exists()
            _log(f"run {rid}: {'resuming from its checkpoint' if resume else 'starting'}")
            try:
                _require_parent(cfg, store)
                execute(cfg)
            except RunLockedError as err:
                # Another job trains this run right now: it records the result, not this one.
                _log(f"run {rid}: skipped, {err}")
                outcome[rid] = SKIPPED
                continue
            except UncompletedJobError as err:
                # Raised by submitit's signal handler when it will not requeue any more (too
                # many time-outs): the job is over, so the other runs cannot go on either.
                _record_failure(store, cfg, err)
                raise
            except Exception as err:
                if parallel:
                    _record_failure(store, cfg, err)
                if parallel or not self.isolate:
                    raise
                traceback.print_exc()
                _log(f"run {rid}: FAILED ({type(err).__name__}: {err})")
                _record_failure(store, cfg, err)
                outcome[rid] = FAILED
                continue
            _log(f"run {rid}: finished")
            outcome[rid] = FINISHED
        failed = [rid for rid, state in outcome.items() if state == FAILED]
        if failed:
            raise RunsFailed(
                f"{len(failed)} of {len(self.configs)} runs failed: {', '.join(failed)}"
            )
        return outcome

    def _run_packed(self) -> dict[str, str]:
        """Train the runs ``pack`` at a time in this process, each recorded as if alone."""
        from benchmark.training.packing import execute_packed

        outcome: dict[str, str] = {}
        todo = []
        for cfg in self.configs:
            store = Store(cfg.output.dir)
            if store.is_finished(cfg.run_id):
                outcome[cfg.run_id] = FINISHED
                continue
            try:
                _require_parent(cfg, store)
            except ParentNotFinished as err:
                _log(f"run {cfg.run_id}: FAILED ({err})")
                _record_failure(store, cfg, err)
                outcome[cfg.run_id] = FAILED
                continue
            todo.append(cfg)
        todo = self._run_arrays(todo, outcome)
        for start in range(0, len(todo), self.pack):
            pack = todo[start : start + self.pack]
            _log(f"training {len(pack)} runs at once: {', '.join(c.run_id for c in pack)}")
            for cfg, result in zip(pack, execute_packed(pack), strict=True):
                outcome[cfg.run_id] = self._outcome(cfg, result)
        failed = [rid for rid, state in outcome.items() if state == FAILED]
        if failed:
            raise RunsFailed(
                f"{len(failed)} of {len(self.configs)} runs failed: {', '.join(failed)}"
            )
        return outcome

    def _run_arrays(self, todo: list[RunConfig], outcome: dict[str, str]) -> list[RunConfig]:
        """Train the arrays ``todo`` forms (``array`` > 1: each through up to that many slots,
        a run that ends giving its slot to the next); returns the runs left to pack."""
        if self.array <= 1:
            return todo
        from benchmark.training.array.fit import ALONE, execute_array, form_arrays

        arrays, rest, why = form_arrays(todo, self.array, self.layout)
        # A run left alone that has a checkpoint may have trained in an array (the others of it
        # finished before a kill): it goes on in an array if its checkpoint says so.
        again = [c for c in rest if why[c.run_id] == ALONE and _has_checkpoint(c)]
        arrays += [[c] for c in again]
        rest = [c for c in rest if c not in again]
        for cfg in rest:
            _log(f"run {cfg.run_id}: packed, not in an array: {why[cfg.run_id]}")
        for array in arrays:
            # execute_array says whether they train as an array or packed, once it knows.
            results = execute_array(array, layout=self.layout, size=self.array, log=_log)
            for cfg, result in zip(array, results, strict=True):
                outcome[cfg.run_id] = self._outcome(cfg, result)
        return rest

    @staticmethod
    def _outcome(cfg: RunConfig, result: object) -> str:
        """A packed run's state; its failure recorded with this job's id and log tail."""
        rid = cfg.run_id
        if isinstance(result, dict):
            _log(f"run {rid}: finished")
            return FINISHED
        if isinstance(result, RunLockedError):
            _log(f"run {rid}: skipped, {result}")
            return SKIPPED
        assert isinstance(result, BaseException)
        if isinstance(result, UncompletedJobError):
            raise result
        _log(f"run {rid}: FAILED ({type(result).__name__}: {result})")
        _record_failure(Store(cfg.output.dir), cfg, result)
        return FAILED


def _has_checkpoint(cfg: RunConfig) -> bool:
    return Store(cfg.output.dir).checkpoint_path(cfg.run_id).exists()


def _with_default_threads(cfg: RunConfig, threads: int) -> RunConfig:
    if not threads or cfg.runtime.threads:
        return cfg
    return replace_section(cfg, runtime=dataclasses.replace(cfg.runtime, threads=threads))


def _log(message: str) -> None:
    print(f"[prunebench] {time.strftime('%H:%M:%S')} {message}", flush=True)


def _require_parent(cfg: RunConfig, store: Store) -> None:
    from methods import get_method

    parent = get_method(cfg.method.name)(cfg).parent_config()
    if parent is None:
        return
    pid = parent.run_id
    # Never train a parent inside a child: two children would race to train it.
    if not store.is_finished(pid):
        status = store.status(pid) or "no result"
        raise ParentNotFinished(f"dense parent {pid} has not finished ({status})")
    weights = store.weights_path(pid)
    if not weights.exists():
        raise ParentNotFinished(
            f"dense parent {pid} has finished but its weights {weights} are missing: train it "
            "again with `prunebench run --force` on its config, or `prunebench run` on this "
            "run's config, which retrains the parent first"
        )


def _job_log_tail() -> tuple[str | None, list[str]]:
    """This job's id and the last lines of its stderr and stdout logs (empty outside a job)."""
    try:
        env = submitit.JobEnvironment()
        job_id, paths = env.job_id, env.paths
    except (RuntimeError, KeyError):  # not inside a submitit job
        return None, []
    sys.stdout.flush()
    sys.stderr.flush()
    lines: list[str] = []
    for path in (paths.stdout, paths.stderr):
        with contextlib.suppress(OSError):
            lines += [f"{path.name}: {line}" for line in path.read_text().splitlines()[-20:]]
    return job_id, lines[-LOG_TAIL_LINES:]


def _record_failure(store: Store, cfg: RunConfig, err: BaseException) -> None:
    """Add the job id and log tail to the failed record the runner wrote (or write one)."""
    rid = cfg.run_id
    if store.is_finished(rid):
        return
    record = store.read(rid)
    if record is None or record.get("status") != FAILED:
        from benchmark.training.runner import failure_record

        record = failure_record(cfg, err)
    job_id, tail = _job_log_tail()
    record["job_id"] = job_id
    record["log_tail"] = tail
    with contextlib.suppress(ResultExistsError):  # a finished result appeared meanwhile
        store.write(record)
