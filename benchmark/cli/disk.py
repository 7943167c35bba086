"""The disk lines of ``reproduce --dry-run`` and ``submit --dry-run``, and ``reproduce --keep
needed`` (see :mod:`benchmark.reporting.keep` and :mod:`benchmark.store.footprint`).

Heavy imports happen inside the functions, so ``--help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def free_after_reproduce(experiment: Any, scale: str, store_dir: str, runs: Sequence[Any]) -> str:
    """``reproduce --keep needed``: free what the table just built no longer needs."""
    from benchmark.reporting.keep import Considered, free_weights, plan_free

    spec = Considered(experiment, scale, list(runs))
    plan = free_weights(store_dir, plan_free(store_dir, [spec]))
    return plan.summary(done=True).replace("\n", "; ")


def reproduce_disk_line(
    experiment: Any,
    scale: str,
    runs: Sequence[Any],
    missing: Sequence[tuple[str, Any]],
    store_dir: str,
    what: str = "missing runs",
    more_parents: Sequence[Any] = (),
    run_ids: Sequence[str] | None = None,
    known: Any = None,
) -> str:
    """The dry run's disk line: the weights of the ``missing`` runs ((run id, config) pairs) and
    of the dense parents they still need, packed and as dense, and what ``--keep needed`` keeps
    of the whole table (every run of ``runs``, the full plan, whatever the slice) once it is
    complete.

    ``what`` names the missing runs; ``more_parents``: dense parents they may need besides
    their own (those staged tuning's undecided cells may select); ``run_ids``: the ids of
    ``runs`` in order, and ``known`` their dense parents (``training.passes.Parents``), when
    the caller has them."""
    from benchmark.reporting.keep import kept_bytes_estimate
    from benchmark.store.footprint import format_bytes
    from benchmark.store.results import Store
    from benchmark.training.footprint import config_bytes, estimate_runs
    from benchmark.training.passes import Parents

    # A paper-scale plan has thousands of runs: each id and parent is computed once.
    ids = [r.cfg.run_id for r in runs] if run_ids is None else list(run_ids)
    configs = dict(zip(ids, (r.cfg for r in runs), strict=True))
    known = Parents() if known is None else known
    every_parent: dict[str, Any] = {}
    parent_id: dict[str, str] = {}
    for rid, cfg in [*configs.items(), *missing]:
        parent = known.of(rid, cfg)
        if parent is not None:
            parent_id[rid] = parent[0]
            every_parent.setdefault(*parent)
    store = Store(store_dir)
    wanted = {pid: every_parent[pid] for rid, _ in missing if (pid := parent_id.get(rid))}
    wanted |= {p.run_id: p for p in more_parents}
    parents = {pid: p for pid, p in wanted.items() if not store.is_finished(pid)}
    needed = estimate_runs([*missing, *parents.items()])
    # Every run of the table and every dense parent, so the kept figure is the whole table's,
    # the same for every slice of it.
    configs |= every_parent
    sizes = {rid: (config_bytes(cfg) or (0, 0))[1] for rid, cfg in configs.items()}
    layout = experiment.layout(scale)
    kept = kept_bytes_estimate(runs, sizes, layout, ids, every_parent)
    extra = f" and their {len(parents)} dense parents" if parents else ""
    line = needed.line(f"the {len(missing)} {what}{extra}")
    return (
        f"disk: {line}; with --keep needed the whole table (every slice of it) keeps "
        f"~{format_bytes(kept)} once complete"
    )


def submit_disk_line(result: Any) -> str:
    """The dry run's disk line of a grid: the weights of the runs it would submit."""
    from benchmark.training.footprint import estimate

    return "  disk: " + estimate(n.cfg for n in result.plan.submit).line(
        f"the {len(result.plan.submit)} runs to submit"
    )
