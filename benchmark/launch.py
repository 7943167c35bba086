"""Submit grids: SLURM (submitit job arrays), local worker processes or in-process debug runs.

The launcher is idempotent. Before it submits anything it looks at three sources of truth:

- the results store: finished runs are never resubmitted; runs whose result says ``failed`` only
  with ``retry_failed``;
- the submission records, ``<store>/grids/<grid>.json``, one per grid: which job (SLURM array
  task or local process) each run was last submitted in. Every grid's record is read, so the same
  run reached from two grids is never queued twice;
- the scheduler (``squeue``/``sacct``, or the local process table): whether those jobs are still
  queued or running. A run whose job ended without a result (cancelled, killed) is resubmitted.

Runs that start from a trained dense parent (``Method.parent_config()``) depend on it: the parent
is submitted once, in a task of its own, and its children wait for it (SLURM ``afterok`` on the
parent's array task; locally, the next dependency level starts when the previous one is done).

Every task runs :class:`GridTask`, a submitit ``Checkpointable``: on the time-limit or preemption
signal submitit requeues it, and each run resumes from the core's last epoch checkpoint (the run
looks for it itself, so a job killed outright resumes the same way).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import submitit
from submitit.core.utils import UncompletedJobError

from benchmark.checkpoint import write_json_atomic
from benchmark.config import RunConfig, check, config_to_dict
from benchmark.errors import ConfigError
from benchmark.grid import Expansion, Grid, expand
from benchmark.store import FAILED, FINISHED, Store

EXECUTORS = ("slurm", "local", "debug")
RECORD_DIR = "grids"
RECORD_VERSION = 1
# SLURM's default MaxArraySize is 1001 (indices 0-1000); larger batches become several arrays.
MAX_ARRAY_TASKS = 1000
LOG_TAIL_LINES = 40
# squeue states of a job that holds (or is about to hold) an allocation.
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT"})
REPO_ROOT = Path(__file__).resolve().parents[1]


class LaunchError(RuntimeError):
    """The scheduler could not be reached or refused a submission."""


# --------------------------------------------------------------------------- cluster profiles


@dataclass
class SlurmProfile:
    """A cluster profile (``slurm/profiles/*.toml``): where and how array tasks run."""

    partition: str
    account: str
    qos: str
    constraint: str
    gpus_per_task: int
    cpus_per_task: int
    mem_gb: float
    time_min: int
    signal_delay_s: int
    array_parallelism: int

    def executor_parameters(self) -> dict[str, Any]:
        """Parameters of ``submitit.SlurmExecutor`` ("" and 0 mean: do not pass the option)."""
        params: dict[str, Any] = {
            "cpus_per_task": self.cpus_per_task,
            "time": self.time_min,
            "signal_delay_s": self.signal_delay_s,
            "array_parallelism": self.array_parallelism,
        }
        for key in ("partition", "account", "qos", "constraint"):
            if getattr(self, key):
                params[key] = getattr(self, key)
        if self.gpus_per_task:
            params["gpus_per_task"] = self.gpus_per_task
        if self.mem_gb:
            gb = float(self.mem_gb)
            params["mem"] = f"{int(gb)}G" if gb.is_integer() else f"{int(gb * 1024)}M"
        return params


PROFILE_RULES: dict[str, tuple[type, Callable[[Any], bool], str]] = {
    "partition": (str, lambda v: True, "a string"),
    "account": (str, lambda v: True, "a string"),
    "qos": (str, lambda v: True, "a string"),
    "constraint": (str, lambda v: True, "a string"),
    "gpus_per_task": (int, lambda v: v >= 0, "an integer >= 0"),
    "cpus_per_task": (int, lambda v: v >= 1, "an integer >= 1"),
    "mem_gb": (float, lambda v: v >= 0, "a number >= 0 (0: the partition's default)"),
    "time_min": (int, lambda v: v >= 1, "whole minutes >= 1"),
    "signal_delay_s": (int, lambda v: v >= 0, "an integer >= 0"),
    "array_parallelism": (int, lambda v: v >= 1, "an integer >= 1"),
}


def profile_path(name: str | Path) -> Path:
    """The profile file: a path, or a name under ``slurm/profiles/`` (here, then the repo)."""
    path = Path(name)
    if path.suffix == ".toml" or path.is_file():
        return path
    for root in (Path.cwd(), REPO_ROOT):
        candidate = root / "slurm" / "profiles" / f"{name}.toml"
        if candidate.is_file():
            return candidate
    known = sorted(p.stem for p in (REPO_ROOT / "slurm" / "profiles").glob("*.toml"))
    raise ConfigError("--profile", str(name), "a profile file or one of " + ", ".join(known))


def load_profile(name: str | Path, overrides: Mapping[str, Any] | None = None) -> SlurmProfile:
    """Read a cluster profile and apply flag overrides; every error names the key."""
    path = profile_path(name)
    if not path.is_file():
        raise ConfigError("--profile", str(name), "an existing profile TOML file")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError("--profile", str(path), f"valid TOML ({err})") from None
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    for key in data:
        check(
            key in PROFILE_RULES, f"{path}: {key}", data[key], "one of " + ", ".join(PROFILE_RULES)
        )
    values: dict[str, Any] = {}
    for key, (tp, ok, allowed) in PROFILE_RULES.items():
        where = f"--{key.replace('_', '-')}" if key in overrides else f"{path}: {key}"
        if key not in overrides and key not in data:
            raise ConfigError(where, None, f"{allowed} (every profile key is required)")
        value = overrides.get(key, data.get(key))
        if tp is float:
            good = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            good = isinstance(value, tp) and not isinstance(value, bool)
        check(good and ok(value), where, value, allowed)
        values[key] = value
    profile = SlurmProfile(**values)
    delay_src = "--signal-delay-s" if "signal_delay_s" in overrides else f"{path}: signal_delay_s"
    time_src = "--time-min" if "time_min" in overrides else f"{path}: time_min"
    check(
        profile.signal_delay_s < profile.time_min * 60,
        delay_src,
        profile.signal_delay_s,
        f"fewer seconds than the time limit ({time_src} = {profile.time_min} min)",
    )
    return profile


# --------------------------------------------------------------------------- settings


@dataclass
class LaunchSettings:
    """How a grid is executed."""

    executor: str = "local"
    workers: int = 1  # local: parallel worker processes
    runs_per_task: int = 1  # slurm: runs packed into one array task
    threads: int = 0  # torch threads per run; 0 derives them (cores per worker, cpus_per_task)
    profile: SlurmProfile | None = None
    local_time_min: float = 0.0  # local: a time limit per worker (0: none)
    local_signal_delay_s: int = 30
    max_requeues: int = 3  # submitit's max_num_timeout
    hold: bool = False  # submit SLURM jobs held (benchmarks of the submission itself)
    python: str | None = None  # the interpreter jobs run (default: this one)

    def validate(self) -> None:
        """Raise ConfigError naming the flag of a bad setting."""
        check(self.executor in EXECUTORS, "--executor", self.executor, EXECUTORS)
        check(self.workers >= 1, "--workers", self.workers, "an integer >= 1")
        check(self.runs_per_task >= 1, "--runs-per-task", self.runs_per_task, "an integer >= 1")
        check(self.threads >= 0, "--threads", self.threads, "an integer >= 0 (0: derived)")
        check(self.max_requeues >= 0, "--max-requeues", self.max_requeues, "an integer >= 0")
        check(self.local_time_min >= 0, "--time-min", self.local_time_min, "minutes >= 0")
        if self.executor == "slurm":
            check(self.profile is not None, "--profile", None, "a cluster profile for slurm")

    def run_threads(self) -> int:
        """Torch threads of each run: its share of the cores it was given."""
        if self.threads:
            return self.threads
        if self.executor == "slurm":
            assert self.profile is not None
            return self.profile.cpus_per_task
        if self.executor == "local":
            # Oversubscribing the cores slows every worker down more than it gains.
            return max(1, available_cores() // self.workers)
        return 0


def available_cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------- the job callable


class ParentNotFinished(RuntimeError):
    """A run's dense parent has no finished result and weights to start from."""


class RunsFailed(RuntimeError):
    """Some runs of a task failed (each is recorded in the store); fails the job."""


class GridTask(submitit.helpers.Checkpointable):
    """One job (array task): trains its runs in order; finished runs are skipped.

    Checkpointable: on the time-limit/preemption signal submitit pickles this object (which holds
    only configs) and requeues the job; each run then resumes from its epoch checkpoint.
    """

    def __init__(self, configs: Sequence[RunConfig], threads: int = 0, isolate: bool = True):
        self.configs = list(configs)
        self.threads = threads
        # isolate: a failing run is recorded and the others go on (False: the debug executor
        # lets the original exception reach the debugger).
        self.isolate = isolate

    def __call__(self) -> dict[str, str]:
        from benchmark.runner import execute

        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
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
            except UncompletedJobError as err:
                # Raised by submitit's signal handler when it will not requeue any more (too
                # many time-outs): the job is over, so the other runs cannot go on either.
                _record_failure(store, cfg, err)
                raise
            except Exception as err:
                if not self.isolate:
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


def _log(message: str) -> None:
    print(f"[prunebench] {time.strftime('%H:%M:%S')} {message}", flush=True)


def _require_parent(cfg: RunConfig, store: Store) -> None:
    from methods import get_method

    parent = get_method(cfg.method.name)(cfg).parent_config()
    if parent is None:
        return
    pid = parent.run_id
    # Never train a parent inside a child: two children would race to train it.
    if not (store.is_finished(pid) and store.weights_path(pid).exists()):
        status = store.status(pid) or "no result"
        raise ParentNotFinished(f"dense parent {pid} has not finished ({status})")


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
        record = {
            "run_id": rid,
            "status": FAILED,
            "method": cfg.method.name,
            "config": config_to_dict(cfg),
            "error": f"{type(err).__name__}: {err}",
            "traceback": traceback.format_exc().splitlines()[-20:],
            "finished": time.time(),
        }
    job_id, tail = _job_log_tail()
    record["job_id"] = job_id
    record["log_tail"] = tail
    store.write(record)


# --------------------------------------------------------------------------- submission records


@dataclass(frozen=True)
class JobRef:
    """Where a run was last submitted."""

    job_id: str
    executor: str
    submitted: float
    folder: str
    host: str
    grid: str


def records_dir(store: Path) -> Path:
    """The folder of submission records and submitit job folders."""
    return Path(store) / RECORD_DIR


class SubmissionRecord:
    """``<store>/grids/<grid>.json``: the jobs each submit call created for one grid.

    Each submission lists its job ids and, for each job, the run ids it holds; a run's current job
    is its latest submission. Submissions whose runs all moved on to later ones are dropped, so the
    record stays small.
    """

    def __init__(self, path: Path, grid: str, file: str | None = None) -> None:
        self.path = path
        self.grid = grid
        self.file = file
        self.submissions: list[dict[str, Any]] = []

    @classmethod
    def load(cls, path: Path) -> SubmissionRecord:
        """Read a record (an empty one if the file does not exist)."""
        record = cls(path, path.stem)
        if path.exists():
            data = json.loads(path.read_text())
            record.grid = data.get("grid", path.stem)
            record.file = data.get("file")
            record.submissions = list(data.get("submissions", []))
        return record

    def add(
        self,
        executor: str,
        folder: Path,
        jobs: Sequence[str],
        tasks: Sequence[Sequence[str]],
        after: str | None = None,
    ) -> None:
        """Append one submission: ``jobs[i]`` runs the run ids ``tasks[i]``."""
        self.submissions.append(
            {
                "time": time.time(),
                "executor": executor,
                "host": socket.gethostname(),
                "folder": str(folder),
                "after": after,
                "jobs": list(jobs),
                "tasks": [list(t) for t in tasks],
            }
        )

    def latest(self) -> dict[str, JobRef]:
        """Each run's latest job."""
        out: dict[str, JobRef] = {}
        for sub in self.submissions:
            for job, runs in zip(sub["jobs"], sub["tasks"], strict=True):
                ref = JobRef(
                    job, sub["executor"], sub["time"], sub["folder"], sub["host"], self.grid
                )
                for rid in runs:
                    out[rid] = ref
        return out

    def save(self) -> None:
        """Atomically write the record, dropping superseded submissions."""
        current = {(ref.submitted, ref.job_id) for ref in self.latest().values()}
        self.submissions = [
            s for s in self.submissions if any((s["time"], j) in current for j in s["jobs"])
        ]
        write_json_atomic(
            self.path,
            {
                "version": RECORD_VERSION,
                "grid": self.grid,
                "file": self.file,
                "submissions": self.submissions,
            },
        )


def load_index(store: Path) -> dict[str, JobRef]:
    """Every run's latest job over all grids' records of ``store``."""
    index: dict[str, JobRef] = {}
    folder = records_dir(store)
    if not folder.exists():
        return index
    for path in sorted(folder.glob("*.json")):
        for rid, ref in SubmissionRecord.load(path).latest().items():
            if rid not in index or ref.submitted > index[rid].submitted:
                index[rid] = ref
    return index


_HELD_LOCKS: set[Path] = set()


@contextlib.contextmanager
def store_lock(store: Path) -> Iterator[None]:
    """Serialise submissions to one store (planning reads, submitting writes the records).

    Re-entrant within a process: flock would block on a second descriptor of the same file.
    """
    folder = records_dir(store).resolve()
    if folder in _HELD_LOCKS:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        _HELD_LOCKS.add(folder)
        try:
            yield
        finally:
            _HELD_LOCKS.discard(folder)
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- job states


@dataclass(frozen=True)
class JobState:
    """What the scheduler says about a job."""

    state: str  # RUNNING, PENDING, COMPLETED, CANCELLED, FAILED, TIMEOUT, ..., UNKNOWN
    active: bool  # queued or running
    reason: str = ""

    @property
    def running(self) -> bool:
        """Whether the job holds an allocation now."""
        return self.active and self.state in RUNNING_STATES


def job_states(refs: Iterable[JobRef]) -> dict[str, JobState]:
    """The current state of every job in ``refs`` (one squeue and one sacct call for SLURM)."""
    refs = list({r.job_id: r for r in refs}.values())
    out: dict[str, JobState] = {}
    slurm_ids = [r.job_id for r in refs if r.executor == "slurm"]
    if slurm_ids:
        out.update(slurm_states(slurm_ids))
    for ref in refs:
        if ref.executor == "local":
            out[ref.job_id] = _local_state(ref)
        elif ref.executor == "debug":
            out[ref.job_id] = JobState("COMPLETED", active=False)
    return out


def _run(cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise LaunchError(f"{cmd[0]} failed: {err}") from None


def slurm_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    """States of SLURM jobs / array tasks: squeue for queued ones, sacct for ended ones."""
    wanted = set(job_ids)
    bases = sorted({j.split("_")[0] for j in wanted}, key=int)
    out: dict[str, JobState] = {}
    for chunk in _chunks(bases, 500):
        res = _run(["squeue", "-h", "-r", "-o", "%i|%T|%r", "-j", ",".join(chunk)])
        if res.returncode != 0:
            if "Invalid job id" in res.stderr:
                continue  # none of these jobs is known to slurmctld any more
            raise LaunchError(f"squeue failed: {res.stderr.strip() or res.stdout.strip()}")
        for line in res.stdout.splitlines():
            parts = line.strip().split("|")
            if len(parts) >= 2 and parts[0] in wanted:
                out[parts[0]] = JobState(
                    parts[1], active=True, reason=parts[2] if len(parts) > 2 else ""
                )
    ended = sorted(wanted - set(out))
    if ended:
        out.update(_sacct_states(ended))
    for job in wanted - set(out):
        out[job] = JobState("UNKNOWN", active=False)
    return out


def _sacct_states(job_ids: Sequence[str]) -> dict[str, JobState]:
    wanted = set(job_ids)
    bases = sorted({j.split("_")[0] for j in wanted}, key=int)
    out: dict[str, JobState] = {}
    for chunk in _chunks(bases, 500):
        cmd = ["sacct", "-n", "-P", "-X", "-o", "JobID,State", "-j", ",".join(chunk)]
        res = _run(cmd)
        if res.returncode != 0:
            return out  # no accounting: ended jobs stay UNKNOWN
        for line in res.stdout.splitlines():
            job, _, state = line.strip().partition("|")
            for jid in expand_job_ids(job):
                if jid in wanted:
                    # "CANCELLED by 0" -> CANCELLED; sacct may lag a just-ended job.
                    out[jid] = JobState(state.split(" ")[0] or "UNKNOWN", active=False)
    return out


def expand_job_ids(text: str) -> list[str]:
    """``12_[0-2,5%4]`` -> ``12_0 12_1 12_2 12_5`` (sacct folds tasks that never started)."""
    m = re.fullmatch(r"(\d+)_\[([^\]]*)\]", text)
    if m is None:
        return [text]
    base, spec = m.group(1), m.group(2).split("%")[0]
    ids = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            ids += [f"{base}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return ids


def _local_state(ref: JobRef) -> JobState:
    if ref.host == socket.gethostname():
        try:
            cmdline = Path(f"/proc/{ref.job_id}/cmdline").read_bytes()
        except OSError:
            cmdline = b""
        if b"submitit.local" in cmdline:
            return JobState("RUNNING", active=True)
    result = submitit.core.utils.JobPaths(ref.folder, ref.job_id).result_pickle
    if result.exists():
        with contextlib.suppress(Exception):
            outcome, _ = submitit.core.utils.pickle_load(result)
            return JobState("COMPLETED" if outcome == "success" else "FAILED", active=False)
    return JobState("ENDED", active=False)


def classify(
    record: dict[str, Any] | None, ref: JobRef | None, state: JobState | None
) -> tuple[str, str]:
    """(state, detail) of one run from its stored record, latest job and that job's state."""
    status = record.get("status") if record else None
    if status == FINISHED:
        return "finished", ""
    # A failure recorded after the latest submission belongs to that job, which may still be
    # running other runs of its task.
    failed_since = status == FAILED and (ref is None or record.get("finished", 0) >= ref.submitted)
    if state is not None and state.active and not failed_since:
        if state.running:
            return "running", ""
        return "pending", "" if state.reason == "None" else state.reason
    if status == FAILED:
        return "failed", first_line(record.get("error", "failed"))
    if ref is not None and state is not None and state.state not in ("COMPLETED", "UNKNOWN"):
        return "failed", f"{state.state}: the job ended without a result"
    return "missing", ""


def first_line(text: str) -> str:
    """The first non-empty line of ``text``."""
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


# --------------------------------------------------------------------------- planning


@dataclass
class Node:
    """A run the launcher considers: a grid run or a dense parent some grid run needs."""

    run_id: str
    cfg: RunConfig
    parent: str | None  # the run id of its dense parent
    in_grid: bool = True


@dataclass
class Plan:
    """What a submission will do, decided from the store, the records and the scheduler."""

    submit: list[Node] = field(default_factory=list)
    # run id -> the existing job of its parent, when that parent is queued or running
    after_job: dict[str, str] = field(default_factory=dict)
    finished: list[str] = field(default_factory=list)
    active: dict[str, str] = field(default_factory=dict)  # run id -> its queued/running job
    failed: list[str] = field(default_factory=list)  # failed in the store, not retried
    blocked: dict[str, str] = field(default_factory=dict)  # run id -> failed parent run id

    def levels(self) -> list[list[Node]]:
        """The runs to submit by dependency level: parents before their children."""
        ids = {n.run_id for n in self.submit}
        level: dict[str, int] = {}

        def depth(node: Node) -> int:
            if node.run_id not in level:
                parent = node.parent if node.parent in ids else None
                below = depth(by_id[parent]) + 1 if parent else 0
                level[node.run_id] = max(below, 1 if node.run_id in self.after_job else 0)
            return level[node.run_id]

        by_id = {n.run_id: n for n in self.submit}
        out: dict[int, list[Node]] = {}
        for node in self.submit:
            out.setdefault(depth(node), []).append(node)
        return [out[k] for k in sorted(out)]

    def parents(self) -> set[str]:
        """Run ids that other runs of this submission depend on."""
        ids = {n.run_id for n in self.submit}
        return {n.parent for n in self.submit if n.parent in ids}


def grid_nodes(expansion: Expansion) -> list[Node]:
    """The grid's runs plus the dense parents they need (parents first, each once)."""
    from methods import get_method

    nodes: dict[str, Node] = {}
    children: list[Node] = []
    in_grid = {r.run_id for r in expansion.runs}
    for run in expansion.runs:
        parent = get_method(run.method)(run.cfg).parent_config()
        pid = parent.run_id if parent is not None else None
        if parent is not None and pid not in in_grid and pid not in nodes:
            nodes[pid] = Node(pid, parent, None, in_grid=False)
        children.append(Node(run.run_id, run.cfg, pid))
    return list(nodes.values()) + children


def read_records(store: Store, run_ids: Iterable[str]) -> dict[str, dict[str, Any] | None]:
    """The stored result of each run (None when it has none)."""
    return {rid: store.read(rid) if store.result_path(rid).exists() else None for rid in run_ids}


def unfinished_refs(
    index: Mapping[str, JobRef], records: Mapping[str, dict[str, Any] | None]
) -> list[JobRef]:
    """The latest jobs of the runs without a finished result: all the scheduler is asked."""
    return [
        index[rid]
        for rid, rec in records.items()
        if rid in index and (rec is None or rec.get("status") != FINISHED)
    ]


def make_plan(
    nodes: Sequence[Node],
    store: Store,
    index: Mapping[str, JobRef],
    states: Mapping[str, JobState],
    retry_failed: bool = False,
    records: Mapping[str, dict[str, Any] | None] | None = None,
) -> Plan:
    """Decide, per run, whether to submit it, and what it must wait for.

    ``records`` are the runs' stored results when the caller has read them already.
    """
    plan = Plan()
    status: dict[str, str] = {}
    records = records if records is not None else read_records(store, [n.run_id for n in nodes])
    for node in nodes:
        rid = node.run_id
        record = records[rid]
        ref = index.get(rid)
        category, _ = classify(record, ref, states.get(ref.job_id) if ref else None)
        if category in ("running", "pending"):
            status[rid] = "active"
        elif category == "failed" and record is not None and record.get("status") == FAILED:
            status[rid] = "submit" if retry_failed else "failed"
        elif category == "finished":
            status[rid] = "finished"
        else:  # never submitted, or its job ended without a result: the run never failed
            status[rid] = "submit"
    by_id = {n.run_id: n for n in nodes}
    # Only parents some child still needs are worth submitting.
    needed = {n.parent for n in nodes if n.in_grid and n.parent and status[n.run_id] == "submit"}
    for node in nodes:
        rid = node.run_id
        if not node.in_grid and rid not in needed:
            continue
        kind = status[rid]
        if kind == "finished":
            plan.finished.append(rid)
        elif kind == "active":
            plan.active[rid] = index[rid].job_id
        elif kind == "failed":
            plan.failed.append(rid)
        elif node.parent and node.parent in by_id and status[node.parent] == "failed":
            plan.blocked[rid] = node.parent
        elif node.parent and node.parent in by_id and status[node.parent] == "active":
            plan.after_job[rid] = index[node.parent].job_id
            plan.submit.append(node)
        else:
            plan.submit.append(node)
    return plan


# --------------------------------------------------------------------------- job specs


@dataclass
class JobSpec:
    """One array (or the local workers of one level): tasks of runs and what they wait for."""

    tasks: list[list[Node]]
    after: str | None = None  # an existing job id, or "run:<run id>" of a job of this submission

    def describe(self) -> str:
        """E.g. ``3 tasks (7 runs), after the job of dense-...``."""
        runs = sum(len(t) for t in self.tasks)
        text = f"{_plural(len(self.tasks), 'task')} ({_plural(runs, 'run')})"
        if self.after:
            dep = self.after[4:] if self.after.startswith("run:") else self.after
            text += f", after {'the job of ' if self.after.startswith('run:') else 'job '}{dep}"
        return text


def pack(nodes: Sequence[Node], runs_per_task: int, alone: set[str]) -> list[list[Node]]:
    """Consecutive runs per task; runs in ``alone`` (parents) get a task of their own."""
    tasks = [[n] for n in nodes if n.run_id in alone]
    rest = [n for n in nodes if n.run_id not in alone]
    tasks += [list(rest[i : i + runs_per_task]) for i in range(0, len(rest), runs_per_task)]
    return tasks


def balance(nodes: Sequence[Node], workers: int) -> list[list[Node]]:
    """Spread runs over at most ``workers`` tasks, longest first (LPT), keeping grid order."""
    tasks: list[list[Node]] = [[] for _ in range(min(workers, len(nodes)))]
    loads = [0] * len(tasks)
    for node in sorted(nodes, key=lambda n: -_cost(n.cfg)):
        i = loads.index(min(loads))
        tasks[i].append(node)
        loads[i] += _cost(node.cfg)
    order = {n.run_id: k for k, n in enumerate(nodes)}
    return [sorted(t, key=lambda n: order[n.run_id]) for t in tasks if t]


def _cost(cfg: RunConfig) -> int:
    return cfg.budget.epochs + cfg.finetune.epochs


def slurm_specs(plan: Plan, runs_per_task: int) -> list[list[JobSpec]]:
    """Per dependency level, the arrays to submit: one per distinct parent job."""
    parents = plan.parents()
    ids = {n.run_id for n in plan.submit}
    out = []
    for nodes in plan.levels():
        groups: dict[str | None, list[Node]] = {}
        for node in nodes:
            if node.run_id in plan.after_job:
                after: str | None = plan.after_job[node.run_id]
            elif node.parent in ids:
                after = f"run:{node.parent}"
            else:
                after = None
            groups.setdefault(after, []).append(node)
        specs = []
        for after, members in groups.items():
            tasks = pack(members, runs_per_task, parents)
            for chunk in _chunks(tasks, MAX_ARRAY_TASKS):
                specs.append(JobSpec(list(chunk), after))
        out.append(specs)
    return out


# --------------------------------------------------------------------------- submission


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

    def summary(self) -> str:
        """A few lines for the terminal."""
        p = self.plan
        lines = []
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
        lines.append(
            f"skipped: {len(p.finished)} finished, {len(p.active)} already queued or running, "
            f"{len(p.failed)} failed (resubmit with --retry-failed), "
            f"{len(p.blocked)} waiting on a failed parent"
        )
        return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


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
            "on this machine with: sudo bash slurm/dev-cluster.sh start)"
        )
    store = Path(store).resolve()
    out = out if out is not None else sys.stdout
    grid = expansion.grid
    nodes = grid_nodes(expansion)
    record_path = records_dir(store) / f"{grid.name}.json"
    with store_lock(store):
        index = load_index(store)
        records = read_records(Store(store), [n.run_id for n in nodes])
        states = job_states(unfinished_refs(index, records))
        plan = make_plan(nodes, Store(store), index, states, retry_failed, records)
        result = SubmitResult(grid.name, settings.executor, plan, dry_run=dry_run)
        if settings.executor == "slurm":
            levels = slurm_specs(plan, settings.runs_per_task)
        else:
            levels = [[JobSpec(balance(level, settings.workers))] for level in plan.levels()]
        result.specs = [s for specs in levels for s in specs]
        if dry_run or not plan.submit:
            return result
        record = SubmissionRecord.load(record_path)
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
    threads = settings.run_threads()
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
            fns = [GridTask([n.cfg for n in task], threads) for task in spec.tasks]
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
    threads = settings.run_threads()
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
            jobs = _start_here(tasks, folder, settings, threads)
            ids = [[n.run_id for n in t] for t in tasks]
            if settings.executor == "local":
                record.add("local", folder / "local", [j.job_id for j in jobs], ids)
                record.save()
        result.jobs += [j.job_id for j in jobs]
        result.submitted_runs += [rid for t in ids for rid in t]
        where = "in this process"
        if settings.executor == "local":
            pids = ", ".join(j.job_id for j in jobs)
            where = f"in {_plural(len(jobs), 'local worker')} (pids {pids})"
        result.arrays.append(f"level {i}: {_plural(sum(map(len, ids)), 'run')} {where}")
        if settings.executor == "debug":
            for job in jobs:
                job.result()  # runs the task here, in this process
        else:
            _wait_local(jobs, [rid for t in ids for rid in t], st, out)


def _start_here(
    tasks: list[list[Node]], folder: Path, settings: LaunchSettings, threads: int
) -> list[Any]:
    if settings.executor == "debug":
        executor: submitit.Executor = submitit.DebugExecutor(folder=folder / "debug" / "%j")
        return executor.submit_array(
            [GridTask([n.cfg for n in t], threads, isolate=False) for t in tasks]
        )
    # A flat folder: submitit's local controller would create a literal "%j" folder.
    local = submitit.LocalExecutor(
        folder=folder / "local", max_num_timeout=settings.max_requeues, python=settings.python
    )
    # No time limit unless asked for one (submitit's local default is 2 minutes).
    limit = settings.local_time_min or 60 * 24 * 365
    local.update_parameters(timeout_min=limit, signal_delay_s=settings.local_signal_delay_s)
    return local.submit_array([GridTask([n.cfg for n in t], threads) for t in tasks])


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


def _wait_local(jobs: Sequence[Any], runs: Sequence[str], store: Store, out: TextIO) -> None:
    from tqdm.auto import tqdm

    bar_off = not out.isatty()  # a bar redrawn with \r only clutters logs and pipes
    with tqdm(total=len(runs), unit="run", desc="local", file=out, disable=bar_off) as bar:
        while True:
            done = not any(not j.done() for j in jobs)
            finished = sum(1 for r in runs if store.status(r) in (FINISHED, FAILED))
            bar.update(finished - bar.n)
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
    """Follow submitted runs with a progress bar until none is queued or running."""
    from tqdm.auto import tqdm

    store = Path(store)
    st = Store(store)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    out = out or sys.stderr
    with tqdm(total=len(runs), unit="run", desc="runs", file=out, disable=not out.isatty()) as bar:
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
            bar.set_postfix(running=running, pending=len(active) - running, failed=failed)
            if not [r for r in active if status[r] != FINISHED]:
                return status
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"{len(active)} runs still queued or running")
            time.sleep(poll_s)


def prepare(
    grid: Grid,
    store: str | Path,
    settings: LaunchSettings | None = None,
    *,
    check_configs: bool = True,
) -> Expansion:
    """Expand a grid for a store: absolute ``output.dir``, the executor's threads, no tqdm.

    ``check_configs=False`` skips the cross-field validation of each cell (and the dataset
    and model registries it imports), for read-only queries of an already submitted grid.
    """
    extra: dict[str, Any] = {"output.dir": str(Path(store).resolve()), "logging.progress": False}
    if settings is not None:
        extra["runtime.threads"] = settings.run_threads()
    return expand(grid, extra, check_configs=check_configs)


__all__ = [
    "EXECUTORS",
    "GridTask",
    "JobRef",
    "JobState",
    "LaunchError",
    "LaunchSettings",
    "Plan",
    "SlurmProfile",
    "SubmissionRecord",
    "SubmitResult",
    "expand_job_ids",
    "grid_nodes",
    "job_states",
    "load_index",
    "load_profile",
    "make_plan",
    "prepare",
    "submit_grid",
    "wait_for",
]
