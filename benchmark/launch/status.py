"""Where a grid stands: finished / running / pending / failed / missing runs per method.

A run's state comes from the store first (a finished result wins), then from the scheduler state
of the job its latest submission put it in, then from a failed result:

- ``running`` / ``pending``: its job is running / queued (the pending reason is kept, e.g.
  ``Dependency`` while a dense parent trains);
- ``failed``: the run raised (its record holds the error and the last lines of its log), or its
  job ended without writing a result (cancelled, killed, node failure). ``submit`` resubmits the
  latter by itself and the former only with ``--retry-failed``;
- ``missing``: never submitted, or not since its last job.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from benchmark.launch import (
    LaunchError,
    classify,
    grid_nodes,
    job_states,
    load_index,
    read_records,
    unfinished_refs,
)
from benchmark.launch.expansion import Expansion
from benchmark.store.leftovers import find_leftovers, owner_state
from benchmark.store.records import Skipped, skipped_line
from benchmark.store.results import Store

CATEGORIES = ("finished", "running", "pending", "failed", "missing")
PARENT_LABEL = "{} (parent)"


@dataclass
class RunStatus:
    """One run's state, its latest job and the first line of what went wrong."""

    run_id: str
    method: str
    state: str
    job_id: str | None = None
    detail: str = ""
    # A finished language-model run's test perplexity (its headline; None for other tasks).
    ppl: float | None = None


@dataclass
class GridStatus:
    """Every run of a grid (and the dense parents it needs) with its state."""

    grid: str
    store: Path
    runs: list[RunStatus]
    executors: dict[str, str] = field(default_factory=dict)  # job id -> executor
    warning: str = ""
    # Records of its runs that could not be used (they count as missing), and the files that
    # killed writes of its runs left (benchmark.store.leftovers).
    skipped: list[Skipped] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, Counter[str]]:
        """Per method (grid order) and ``all``: how many runs are in each state."""
        out: dict[str, Counter[str]] = {}
        for run in self.runs:
            out.setdefault(run.method, Counter())[run.state] += 1
        out["all"] = Counter(run.state for run in self.runs)
        return out

    def best_ppl(self) -> dict[str, float]:
        """Per method and ``all``: the lowest test perplexity of its finished language-model
        runs (none for a method without one)."""
        out: dict[str, float] = {}
        for run in self.runs:
            if run.ppl is not None:
                for key in (run.method, "all"):
                    out[key] = min(out.get(key, run.ppl), run.ppl)
        return out

    @property
    def active(self) -> int:
        """Runs queued or running."""
        return sum(1 for r in self.runs if r.state in ("running", "pending"))

    def failures(self) -> list[RunStatus]:
        """Failed runs, in grid order."""
        return [r for r in self.runs if r.state == "failed"]

    def jobs(self) -> dict[str, Counter[str]]:
        """Per job (array id or process id): states of the unfinished runs it holds."""
        out: dict[str, Counter[str]] = {}
        for run in self.runs:
            if run.job_id is None or run.state in ("finished", "missing"):
                continue
            out.setdefault(run.job_id.split("_")[0], Counter())[run.state] += 1
        return out

    def job_ids(self) -> dict[str, list[str]]:
        """Per executor, the jobs (array ids, process ids) holding the runs' latest attempts."""
        out: dict[str, list[str]] = {}
        for job in sorted({r.job_id.split("_")[0] for r in self.runs if r.job_id}, key=_job_key):
            out.setdefault(self.executors.get(job, "?"), []).append(job)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "grid": self.grid,
            "store": str(self.store),
            "counts": {k: dict(v) for k, v in self.counts().items()},
            "jobs": self.job_ids(),
            "runs": [vars(r) for r in self.runs],
            "skipped": [str(s) for s in self.skipped],
            "leftovers": self.leftovers,
        }


def grid_status(expansion: Expansion, store: str | Path) -> GridStatus:
    """The state of every run of ``expansion`` in ``store`` (one scheduler query)."""
    store = Path(store).resolve()
    st = Store(store)
    nodes = grid_nodes(expansion)
    index = load_index(store)
    records = read_records(st, [n.run_id for n in nodes])
    refs = [index[rid] for rid in records if rid in index]
    warning = ""
    try:
        # The scheduler is asked only about runs without a finished result.
        states = job_states(unfinished_refs(index, records))
    except LaunchError as err:  # the store still tells what finished and what failed
        states = {}
        warning = f"{err}; queued and running runs show as missing"
    runs = []
    for node in nodes:
        rid = node.run_id
        ref = index.get(rid)
        state = states.get(ref.job_id) if ref is not None else None
        category, detail = classify(records[rid], ref, state)
        method = node.cfg.method.name
        label = method if node.in_grid else PARENT_LABEL.format(method)
        job = ref.job_id if ref else None
        ppl = _test_ppl(records[rid]) if category == "finished" else None
        runs.append(RunStatus(rid, label, category, job, detail, ppl))
    _one_running_run_per_job(runs)
    executors = {ref.job_id.split("_")[0]: ref.executor for ref in refs}
    left = [
        f"{item.describe()}; {owner_state(st, item.run_id)}" for item in find_leftovers(st, records)
    ]
    skipped = list(st.skipped.values())
    return GridStatus(expansion.grid.name, store, runs, executors, warning, skipped, left)


def _test_ppl(record: dict[str, Any] | None) -> float | None:
    """The test perplexity of a language-model record, else None."""
    ppl = ((record or {}).get("metrics") or {}).get("test", {}).get("ppl")
    return None if ppl is None else float(ppl)


def _one_running_run_per_job(runs: list[RunStatus]) -> None:
    """A job trains its runs one after the other, in grid order: only the first is running.

    The others of a running job (``--runs-per-task`` on SLURM, a local worker) wait in it.
    """
    busy: set[str] = set()
    for run in runs:
        if run.state != "running" or run.job_id is None:
            continue
        if run.job_id in busy:
            run.state, run.detail = "pending", f"after the running run of job {run.job_id}"
        busy.add(run.job_id)


def _job_key(job: str) -> tuple[int, str]:
    return (int(job), job) if job.isdigit() else (0, job)


def format_status(status: GridStatus, max_failures: int = 20, max_jobs: int = 10) -> str:
    """The status table, the jobs still holding runs and the first line of each failure."""
    counts = status.counts()
    # Language models: the lowest test perplexity so far, not a count, is what people look for.
    best = status.best_ppl()
    ppl = ("best PPL",) if best else ()
    header = ("method", "runs", *CATEGORIES, *ppl)
    rows = [
        (name, str(sum(c.values())), *(str(c.get(k, 0)) for k in CATEGORIES))
        + ((f"{best[name]:.2f}" if name in best else "-",) if best else ())
        for name, c in counts.items()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    out = [f"grid {status.grid}: {len(status.runs)} runs in {status.store}", line(header)]
    out.append("  ".join("-" * w for w in widths))
    out += [line(r) for r in rows[:-1]]
    out.append("  ".join("-" * w for w in widths))
    out.append(line(rows[-1]))
    if best:
        out.append("best PPL: the lowest test perplexity of the finished runs (lower is better)")
    if status.warning:
        out.append(f"warning: {status.warning}")
    for executor, ids in status.job_ids().items():
        shown = ", ".join(ids[:max_jobs]) + (
            f", ... ({len(ids)} in all)" if len(ids) > max_jobs else ""
        )
        out.append(f"{executor} jobs: {shown}")
    jobs = status.jobs()
    if jobs:
        out.append(f"jobs of unfinished runs ({len(jobs)}):")
        for job, c in list(jobs.items())[:max_jobs]:
            parts = ", ".join(f"{n} {k}" for k, n in c.items())
            out.append(f"  {status.executors.get(job, '?')} {job}: {parts}")
        if len(jobs) > max_jobs:
            out.append(f"  ... and {len(jobs) - max_jobs} more")
    pending = Counter(r.detail for r in status.runs if r.state == "pending" and r.detail)
    if pending:
        out.append("pending because: " + ", ".join(f"{k} ({n})" for k, n in pending.items()))
    if status.skipped:
        out.append(skipped_line(status.skipped, "their runs count as missing"))
    if status.leftovers:
        out.append(
            f"files left by killed writes ({len(status.leftovers)}; prunebench free removes "
            "those of runs no process holds):"
        )
        out += [f"  {line}" for line in status.leftovers[:max_failures]]
        if len(status.leftovers) > max_failures:
            out.append(f"  ... and {len(status.leftovers) - max_failures} more")
    failures = status.failures()
    if failures:
        out.append(f"failures ({len(failures)}):")
        for run in failures[:max_failures]:
            job = f"job {run.job_id}" if run.job_id else "no job"
            out.append(f"  {run.run_id}  {job}  {run.detail}")
        if len(failures) > max_failures:
            out.append(f"  ... and {len(failures) - max_failures} more (--all lists them)")
    return "\n".join(out)


def progress_line(status: GridStatus, started: float) -> str:
    """A progress bar of the runs that are done (finished or failed)."""
    from tqdm import tqdm

    c = status.counts()["all"]
    done = c.get("finished", 0) + c.get("failed", 0)
    return tqdm.format_meter(
        done,
        len(status.runs),
        time.monotonic() - started,
        ncols=80,
        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} runs done [{elapsed}]",
    )


def watch(
    expansion: Expansion,
    store: str | Path,
    *,
    interval_s: float = 10.0,
    max_failures: int = 20,
    out: TextIO | None = None,
    max_refreshes: int | None = None,
) -> GridStatus:
    """Refresh the status table until no run is queued or running (or Ctrl-C)."""
    out = out or sys.stdout
    started = time.monotonic()
    refreshes = 0
    while True:
        status = grid_status(expansion, store)
        if out.isatty():
            out.write("\x1b[2J\x1b[H")  # clear the screen between refreshes
        out.write(format_status(status, max_failures) + "\n")
        out.write(progress_line(status, started) + "\n")
        out.flush()
        refreshes += 1
        if status.active == 0 or (max_refreshes is not None and refreshes >= max_refreshes):
            return status
        time.sleep(interval_s)
