"""What the scheduler says: job states from squeue/sacct or the local process table."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.store.results import FAILED, FINISHED
from benchmark.store.submissions import JobRef


class LaunchError(RuntimeError):
    """The scheduler could not be reached or refused a submission."""


# squeue states of a job that holds (or is about to hold) an allocation.
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT"})


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


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
    """Running while its worker process lives on this host; afterwards simply ENDED.

    submitit keeps a local job's outcome in a result pickle, at a folder the submission record
    names. That pickle is never read here: a record is data (a store may come from anywhere),
    and each run's own result JSON already says how it ended.
    """
    if ref.host == socket.gethostname() and ref.job_id.isdigit():
        try:
            cmdline = Path(f"/proc/{ref.job_id}/cmdline").read_bytes()
        except OSError:
            cmdline = b""
        if b"submitit.local" in cmdline:
            return JobState("RUNNING", active=True)
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
        if ref.executor == "local":
            worker = f"its local worker {ref.job_id} on {ref.host}"
            return "failed", f"{worker} ended without a result (killed or stopped)"
        return "failed", f"{state.state}: the job ended without a result"
    return "missing", ""


def first_line(text: str) -> str:
    """The first non-empty line of ``text``."""
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return ""
