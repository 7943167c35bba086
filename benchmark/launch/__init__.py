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

May import: core, config, store, methods, training.
"""

from benchmark.launch.planning import (
    JobSpec,
    Node,
    Plan,
    balance,
    grid_nodes,
    make_plan,
    pack,
    read_records,
    slurm_specs,
    unfinished_refs,
)
from benchmark.launch.profiles import PROFILE_RULES, SlurmProfile, load_profile, profile_path
from benchmark.launch.scheduler import (
    JobState,
    LaunchError,
    classify,
    expand_job_ids,
    first_line,
    job_states,
    slurm_states,
)
from benchmark.launch.settings import EXECUTORS, LaunchSettings, available_cores
from benchmark.launch.submit import SubmitResult, prepare, submit_grid, wait_for
from benchmark.launch.task import GridTask, ParentNotFinished, RunsFailed
from benchmark.store.submissions import (
    JobRef,
    SubmissionRecord,
    load_index,
    records_dir,
    store_lock,
)

__all__ = [
    "EXECUTORS",
    "GridTask",
    "JobRef",
    "JobSpec",
    "JobState",
    "LaunchError",
    "LaunchSettings",
    "Node",
    "PROFILE_RULES",
    "ParentNotFinished",
    "Plan",
    "RunsFailed",
    "SlurmProfile",
    "SubmissionRecord",
    "SubmitResult",
    "available_cores",
    "balance",
    "classify",
    "expand_job_ids",
    "first_line",
    "grid_nodes",
    "job_states",
    "load_index",
    "load_profile",
    "make_plan",
    "pack",
    "prepare",
    "profile_path",
    "read_records",
    "records_dir",
    "slurm_specs",
    "slurm_states",
    "store_lock",
    "submit_grid",
    "unfinished_refs",
    "wait_for",
]
