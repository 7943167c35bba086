"""Planning a submission: which runs to submit, in which dependency level and task."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmark.config.run import RunConfig
from benchmark.launch.expansion import Expansion
from benchmark.launch.scheduler import JobState, _chunks, classify
from benchmark.store.results import FAILED, FINISHED, Store
from benchmark.store.submissions import JobRef

# SLURM's default MaxArraySize is 1001 (indices 0-1000); larger batches become several arrays.
MAX_ARRAY_TASKS = 1000


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


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
