"""Submitting a planned grid: SLURM job arrays, local worker processes or in-process debug runs."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import submitit

from benchmark.config.parse import replace_section
from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.launch.arrays import array_lines
from benchmark.launch.expansion import Expansion, expand
from benchmark.launch.grid import MAX_CELLS, Grid
from benchmark.launch.local_worker import (
    dead_local_workers,
    dead_worker_note,
    outlived_note,
    outliving_tasks,
    stderr_into,
)
from benchmark.launch.planning import (
    JobSpec,
    Node,
    Plan,
    _plural,
    balance,
    grid_nodes,
    make_plan,
    read_records,
    slurm_specs,
    unfinished_refs,
)
from benchmark.launch.scheduler import LaunchError, job_states
from benchmark.launch.settings import LaunchSettings
from benchmark.launch.task import GridTask
from benchmark.store.results import FAILED, FINISHED, Store
from benchmark.store.submissions import SubmissionRecord, load_index, records_dir, store_lock


@dataclass
class SubmitResult:
    """What a submit call did (or, with ``dry_run``, would do)."""

    grid: str
    executor: str
    plan: Plan
    specs: list[JobSpec] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)  # the new job ids (array tasks, processes)
    arrays: list[str] = field(default_factory=list)  # one line per submitted array / level
    dry_run: bool = False
    submitted_runs: list[str] = field(default_factory=list)
    # Local workers of earlier submissions that ended without results: pid -> runs.
    dead_workers: dict[str, list[str]] = field(default_factory=dict)
    outlived: dict[str, Any] = field(default_factory=dict)  # their runs still trained: owner
    settings: LaunchSettings = field(default_factory=LaunchSettings)  # --runs-per-gpu, --array

    def summary(self) -> str:
        """A few lines for the terminal."""
        p = self.plan
        lines = [f"note: {dead_worker_note(self.dead_workers)}"] if self.dead_workers else []
        lines += [f"note: {outlived_note(self.outlived)}"] if self.outlived else []
        n_runs = len(p.submit)
        if self.dry_run:
            n_jobs = sum(len(s.tasks) for s in self.specs)
            lines.append(
                f"dry run: would submit {_plural(n_runs, 'run')} in {_plural(n_jobs, 'job')} "
                f"({self.executor}, grid {self.grid})"
            )
            lines += [f"  {s.describe()}" for s in self.specs]
        else:
            if not self.jobs:
                lines.append(f"submitted 0 jobs: nothing to run in grid {self.grid}")
            else:
                lines.append(
                    f"submitted {_plural(len(self.submitted_runs), 'run')} in "
                    f"{_plural(len(self.jobs), 'job')} ({self.executor}, grid {self.grid})"
                )
            lines += [f"  {a}" for a in self.arrays]
        runs_per_gpu, array = self.settings.runs_per_gpu, self.settings.array
        if runs_per_gpu > 1:
            lines.append(
                f"  each job trains up to {runs_per_gpu} runs at once on its device, in one "
                "process (--runs-per-gpu)"
            )
        if array > 1:
            lines += array_lines(self.specs, array, self.settings.array_layout)
        lines.append(
            f"skipped: {len(p.finished)} finished, {len(p.active)} already queued or running, "
            f"{len(p.failed)} failed (resubmit with --retry-failed), "
            f"{len(p.blocked)} waiting on a failed parent"
        )
        return "\n".join(lines)


def _folder(store: Path, grid: str) -> Path:
    return records_dir(store) / grid


def submit_grid(
    expansion: Expansion,
    store: str | Path,
    settings: LaunchSettings,
    *,
    retry_failed: bool = False,
    dry_run: bool = False,
    wait: bool = False,
    out: TextIO | None = None,
) -> SubmitResult:
    """Submit every run of ``expansion`` that is not finished, queued or running.

    ``expansion`` must have been expanded with ``output.dir`` = ``store`` (see
    :func:`prepare`). SLURM returns once the arrays are queued (``wait`` follows them with a
    progress bar); the local and debug executors return when every run is done.
    """
    settings.validate()
    if settings.executor == "slurm" and not dry_run and shutil.which("sbatch") is None:
        raise LaunchError(
            "sbatch is not on PATH: no SLURM here (use --executor local, or start a cluster "
            "on this machine with: bash slurm/dev-cluster.sh start, as root)"
        )
    store = Path(store).resolve()
    out = out if out is not None else sys.stdout
    grid = expansion.grid
    nodes = grid_nodes(expansion)
    _check_data_parallel(nodes, settings)
    note = _threads_note(nodes, settings)
    if note:
        print(f"note: {note}", file=out, flush=True)
    record_path = records_dir(store) / f"{grid.name}.json"
    # A dry run only reads: no lock file, no folder (the store may be read-only).
    with contextlib.nullcontext() if dry_run else store_lock(store):
        index = load_index(store)
        records = read_records(Store(store), [n.run_id for n in nodes])
        states = job_states(unfinished_refs(index, records))
        plan = make_plan(nodes, Store(store), index, states, retry_failed, records)
        result = SubmitResult(grid.name, settings.executor, plan, dry_run=dry_run)
        result.dead_workers = dead_local_workers(index, records, states)
        result.outlived = outliving_tasks(Store(store), sum(result.dead_workers.values(), []))
        result.settings = settings
        if settings.executor == "slurm":
            levels = slurm_specs(plan, settings.task_runs())
        else:
            levels = [[JobSpec(balance(level, settings.workers))] for level in plan.levels()]
        result.specs = [s for specs in levels for s in specs]
        if dry_run or not plan.submit:
            return result
        record = SubmissionRecord.load_or_set_aside(record_path)
        record.grid = grid.name
        record.file = str(grid.path.resolve()) if grid.path else None
        if settings.executor == "slurm":
            _submit_slurm(levels, store, settings, record, result)
        else:
            # The first level is started under the planning lock, later ones re-check.
            _submit_here(levels, store, settings, record, result, out)
    if settings.executor == "slurm" and wait:
        wait_for(result.submitted_runs, store, out=out)
    return result


def _submit_slurm(
    levels: list[list[JobSpec]],
    store: Path,
    settings: LaunchSettings,
    record: SubmissionRecord,
    result: SubmitResult,
) -> None:
    assert settings.profile is not None
    folder = _folder(store, record.grid)
    job_of: dict[str, str] = {}
    for specs in levels:
        for spec in specs:
            after = spec.after
            if after is not None and after.startswith("run:"):
                after = job_of[after[4:]]
            executor = submitit.SlurmExecutor(
                folder=folder / "%j", max_num_timeout=settings.max_requeues, python=settings.python
            )
            extra: dict[str, Any] = {"requeue": True}
            params = settings.profile.executor_parameters()
            params["job_name"] = f"pb-{record.grid}"
            if after is not None:
                params["dependency"] = f"afterok:{after}"
                # A failed parent cancels its children instead of leaving them pending forever.
                extra["kill-on-invalid-dep"] = "yes"
            if settings.hold:
                extra["hold"] = True
            params["additional_parameters"] = extra
            executor.update_parameters(**params)
            fns = [_task(task, settings) for task in spec.tasks]
            try:
                jobs = executor.submit_array(fns)
            except Exception as err:  # sbatch's message says what the cluster rejected
                raise LaunchError(f"sbatch rejected the array: {err}") from err
            job_ids = [j.job_id for j in jobs]
            tasks = [[n.run_id for n in task] for task in spec.tasks]
            record.add("slurm", folder / "%j", job_ids, tasks, after)
            record.save()  # after every array: a crash never loses a job id
            for job_id, task in zip(job_ids, tasks, strict=True):
                job_of.update(dict.fromkeys(task, job_id))
            result.jobs += job_ids
            result.submitted_runs += [rid for task in tasks for rid in task]
            base = job_ids[0].split("_")[0]
            kind = f"array {base}" if "_" in job_ids[0] else f"job {base}"
            dep = f", afterok:{after}" if after else ""
            runs = sum(len(t) for t in tasks)
            result.arrays.append(
                f"{kind}: {_plural(len(tasks), 'task')} ({_plural(runs, 'run')}){dep}"
            )


def _submit_here(
    levels: list[list[JobSpec]],
    store: Path,
    settings: LaunchSettings,
    record: SubmissionRecord,
    result: SubmitResult,
    out: TextIO,
) -> None:
    """Local workers or the in-process debug executor, one dependency level at a time."""
    folder = _folder(store, record.grid)
    st = Store(store)
    for i, specs in enumerate(levels):
        (spec,) = specs
        nodes = [n for task in spec.tasks for n in task]
        if i > 0:
            _wait_for_parent_jobs(store, nodes, result.plan)
        with store_lock(store):
            ready = [n for n in nodes if _parent_ready(n, st, result)]
            if i > 0:
                ready = _still_to_run(ready, store)
            tasks = balance(ready, settings.workers) if ready else []
            if not tasks:
                continue
            jobs = _start_here(tasks, folder, settings)
            ids = [[n.run_id for n in t] for t in tasks]
            if settings.executor == "local":
                record.add("local", folder / "local", [j.job_id for j in jobs], ids)
                record.save()
        result.jobs += [j.job_id for j in jobs]
        result.submitted_runs += [rid for t in ids for rid in t]
        where = "in this process"
        if settings.executor == "local":
            pids = ", ".join(j.job_id for j in jobs)
            where = (
                f"in {_plural(len(jobs), 'local worker')} (pids {pids}; logs in {folder / 'local'})"
            )
        line = f"level {i}: {_plural(sum(map(len, ids)), 'run')} {where}"
        result.arrays.append(line)
        if settings.executor == "debug":
            for job in jobs:
                job.result()  # runs the task here, in this process
        else:
            # Say at once what runs where and where each worker logs, then follow the runs.
            print(f"[local] {line}", file=out, flush=True)
            for job in jobs:
                print(f"[local]   worker {job.job_id}: {job.paths.stderr}", file=out, flush=True)
            _wait_local(jobs, [rid for t in ids for rid in t], st, out, level=i)


def _start_here(tasks: list[list[Node]], folder: Path, settings: LaunchSettings) -> list[Any]:
    if settings.executor == "debug":
        executor: submitit.Executor = submitit.DebugExecutor(folder=folder / "debug" / "%j")
        return executor.submit_array([_task(t, settings, isolate=False) for t in tasks])
    # A flat folder: submitit's local controller would create a literal "%j" folder.
    local = submitit.LocalExecutor(
        folder=folder / "local", max_num_timeout=settings.max_requeues, python=settings.python
    )
    # No time limit unless asked for one (submitit's local default is 2 minutes).
    limit = settings.local_time_min or 60 * 24 * 365
    local.update_parameters(timeout_min=limit, signal_delay_s=settings.local_signal_delay_s)
    # submitit's worker controllers inherit our stderr: Ctrl-C reaches them too, and each would
    # print its KeyboardInterrupt traceback under prunebench's one line. Their stderr goes to a
    # log beside the workers' own logs instead.
    with stderr_into(folder / "local" / "controllers.log"):
        return local.submit_array([_task(t, settings) for t in tasks])


def _wait_for_parent_jobs(store: Path, nodes: Sequence[Node], plan: Plan) -> None:
    """Wait until the jobs (of other submissions) that parents of ``nodes`` run in are done."""
    jobs = {plan.after_job[n.run_id] for n in nodes if n.run_id in plan.after_job}
    while jobs:
        index = load_index(store)
        refs = {ref.job_id: ref for ref in index.values() if ref.job_id in jobs}
        states = job_states(refs.values())
        jobs = {j for j in jobs if j in states and states[j].active}
        if jobs:
            time.sleep(2.0)


def _still_to_run(nodes: Sequence[Node], store: Path) -> list[Node]:
    index = load_index(store)
    states = job_states(index[n.run_id] for n in nodes if n.run_id in index)
    st = Store(store)
    out = []
    for node in nodes:
        ref = index.get(node.run_id)
        if st.is_finished(node.run_id) or (ref is not None and states[ref.job_id].active):
            continue
        out.append(node)
    return out


def _parent_ready(node: Node, store: Store, result: SubmitResult) -> bool:
    # Locally a child starts only once its parent finished; otherwise it waits on the parent.
    if node.parent is None or store.is_finished(node.parent):
        return True
    result.plan.blocked[node.run_id] = node.parent
    return False


def _wait_local(
    jobs: Sequence[Any], runs: Sequence[str], store: Store, out: TextIO, level: int = 0
) -> None:
    """Follow local workers: a progress bar on a terminal, a line per finished run otherwise.

    Each worker trains its runs one after the other, so at most one run per worker is running.
    """
    from tqdm.auto import tqdm

    tty = out.isatty()  # a bar redrawn with \r only clutters logs and pipes
    desc = f"level {level}"
    reported = -1
    with tqdm(total=len(runs), unit="run", desc=desc, file=out, disable=not tty) as bar:
        while True:
            done = not any(not j.done() for j in jobs)
            states = [store.status(r) for r in runs]
            finished = sum(1 for s in states if s in (FINISHED, FAILED))
            failed = sum(1 for s in states if s == FAILED)
            running = 0 if done else min(len(runs) - finished, sum(not j.done() for j in jobs))
            bar.update(finished - bar.n)
            bar.set_postfix(running=running, failed=failed, refresh=False)
            if not tty and finished != reported:
                print(
                    f"[local] {desc}: {finished}/{len(runs)} runs done ({failed} failed), "
                    f"{running} running",
                    file=out,
                    flush=True,
                )
                reported = finished
            if done:
                break
            time.sleep(0.5)


def wait_for(
    runs: Sequence[str],
    store: str | Path,
    *,
    poll_s: float = 5.0,
    timeout_s: float | None = None,
    out: TextIO | None = None,
) -> dict[str, str]:
    """Follow submitted runs until none is queued or running, then print a summary line.

    A progress bar on a terminal; elsewhere (a log, a pipe) one line whenever the counts change.
    """
    from tqdm.auto import tqdm

    store = Path(store)
    st = Store(store)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    out = out or sys.stderr
    tty = out.isatty()
    shown = None
    with tqdm(total=len(runs), unit="run", desc="runs", file=out, disable=not tty) as bar:
        while True:
            index = load_index(store)
            refs = [index[r] for r in runs if r in index]
            states = job_states(refs)
            status = {r: st.status(r) or "" for r in runs}
            done = sum(1 for s in status.values() if s in (FINISHED, FAILED))
            bar.update(done - bar.n)
            active = [r for r in runs if r in index and states[index[r].job_id].active]
            running = sum(1 for r in active if states[index[r].job_id].running)
            failed = sum(1 for s in status.values() if s == FAILED)
            pending = len(active) - running
            bar.set_postfix(running=running, pending=pending, failed=failed)
            counts = (done, running, pending, failed)
            if not tty and counts != shown:
                print(
                    f"[wait] {done}/{len(runs)} runs done ({failed} failed), {running} running, "
                    f"{pending} pending",
                    file=out,
                    flush=True,
                )
                shown = counts
            if not [r for r in active if status[r] != FINISHED]:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{len(active)} runs still queued or running")
            time.sleep(poll_s)
    finished = sum(1 for s in status.values() if s == FINISHED)
    lost = len(runs) - finished - failed
    print(
        f"[wait] done: {finished} finished, {failed} failed"
        + (f", {lost} ended without a result (resubmit to rerun them)" if lost else ""),
        file=out,
        flush=True,
    )
    return status


def prepare(
    grid: Grid,
    store: str | Path,
    settings: LaunchSettings | None = None,
    *,
    check_configs: bool = True,
    max_cells: int = MAX_CELLS,
) -> Expansion:
    """Expand a grid for a store: absolute ``output.dir``, no tqdm.

    ``check_configs=False`` skips the cross-field validation of each cell (and the dataset
    and model registries it imports), for read-only queries of an already submitted grid. The
    configs keep the grid's ``runtime.threads``: :func:`submit_grid` gives each run its threads
    when it builds the jobs, by the one rule of :meth:`LaunchSettings.run_threads` (and says
    when ``--threads`` replaces a value the grid set). ``settings`` is not needed for that; it
    is accepted so that callers may pass what they will submit with.
    """
    del settings
    extra: dict[str, Any] = {"output.dir": str(Path(store).resolve()), "logging.progress": False}
    return expand(grid, extra, check_configs=check_configs, max_cells=max_cells)


def with_threads(cfg: RunConfig, settings: LaunchSettings) -> RunConfig:
    """``cfg`` with the torch threads its job gives it (:meth:`LaunchSettings.run_threads`)."""
    threads = settings.run_threads(cfg.runtime.threads)
    if threads == cfg.runtime.threads:
        return cfg
    return replace_section(cfg, runtime=dataclasses.replace(cfg.runtime, threads=threads))


def _threads_note(nodes: Sequence[Node], settings: LaunchSettings) -> str:
    """The line saying that --threads replaces values the configs set ("" when none)."""
    replaced = sorted(
        {n.cfg.runtime.threads for n in nodes if n.cfg.runtime.threads not in (0, settings.threads)}
    )
    if not settings.threads or not replaced:
        return ""
    count = sum(n.cfg.runtime.threads in replaced for n in nodes)
    values = ", ".join(map(str, replaced))
    return (
        f"--threads {settings.threads} replaces runtime.threads = {values} of "
        f"{_plural(count, 'run')} (an explicit --threads wins)"
    )


def _task(nodes: Sequence[Node], settings: LaunchSettings, isolate: bool = True) -> GridTask:
    """The job of ``nodes``: their configs with the threads the one rule gives them."""
    configs = [with_threads(n.cfg, settings) for n in nodes]
    pack, array, layout = settings.runs_per_gpu, settings.array, settings.array_layout
    return GridTask(configs, isolate=isolate, pack=pack, array=array, layout=layout)


def _check_data_parallel(nodes: list[Node], settings: LaunchSettings) -> None:
    """Refuse, before anything is queued, runs that the profile's processes cannot share (each
    job would otherwise fail on the cluster with the same config error)."""
    from benchmark.training.process_checks import check_batch, check_batchnorm_processes

    procs = 1
    if settings.executor == "slurm" and settings.profile is not None:
        procs = settings.profile.processes_per_run
    for node in nodes:
        # A run id that says per-process BatchNorm over N processes needs N processes.
        model, runtime = node.cfg.model, node.cfg.runtime
        check_batchnorm_processes(model.batchnorm_processes, runtime.sync_bn, procs)
    if procs == 1:
        return
    if settings.runs_per_gpu > 1:
        raise ConfigError(
            "--runs-per-gpu", settings.runs_per_gpu, "1 with a profile of several processes per run"
        )
    for node in nodes:
        try:
            check_batch(node.cfg.data.batch_size, procs)
        except ConfigError as err:
            raise ConfigError(
                "data.batch_size",
                node.cfg.data.batch_size,
                f"a multiple of the profile's {procs} processes per run "
                f"(tasks_per_node x nodes; run {node.run_id})",
            ) from err
