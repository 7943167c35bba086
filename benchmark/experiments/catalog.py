"""What the command line knows of every experiment before it loads one.

Loading the specs needs torch (the methods' presets and checks) and takes seconds; ``prunebench
list`` and the checks of a table or figure id must answer at once. So the facts those need (each
id, its kind, whether it has a table and a figure, its description, the run ids it plans at smoke
scale and the size of its paper-scale plan: runs, dense parents and dataset passes) are
generated from the specs into ``catalog.json`` beside this module, with ``python -m
benchmark.experiments.catalog --write``, and a test checks the file against the specs, so it
cannot drift from them.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmark.config.run import DEFAULT_STORE
from benchmark.core.errors import ConfigError, close_matches
from benchmark.experiments.not_reproducible import NOT_REPRODUCIBLE

CATALOG_FILE = Path(__file__).with_name("catalog.json")
CATALOG_VERSION = 1
# The store folder the plans are made for: run ids do not depend on it.
PLAN_STORE = DEFAULT_STORE

Need = Literal["any", "table", "figure"]


@dataclass(frozen=True)
class Entry:
    """One experiment as the command line sees it without loading it."""

    id: str
    kind: str
    description: str
    table: bool
    figure: bool
    smoke_runs: tuple[str, ...] = ()
    paper_runs: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def entry_of(experiment: Any) -> Entry:
    """The catalog entry of a loaded spec (plans both scales)."""
    smoke = experiment.plan("smoke", PLAN_STORE)
    runs = experiment.runs("paper", PLAN_STORE)
    return Entry(
        id=experiment.id,
        kind=experiment.kind,
        description=experiment.description,
        table=experiment.layout("paper") is not None,
        figure=experiment.plot is not None,
        smoke_runs=tuple(sorted(set(smoke["run_id"]))),
        paper_runs=len({r.cfg.run_id for r in runs}),
        extra=paper_passes(r.cfg for r in runs),
    )


def paper_passes(configs: Iterable[Any]) -> dict[str, Any]:
    """The dataset passes of a paper-scale plan (``prunebench list``): in total, per model, and
    how many dense parents it trains first (their passes included), counted as a cost estimate
    counts them (``benchmark.training.passes``)."""
    from benchmark.training.passes import parent_of, run_passes

    runs: dict[str, Any] = {}
    parents: dict[str, Any] = {}
    for cfg in configs:
        runs.setdefault(cfg.run_id, cfg)
        parent = parent_of(cfg)
        if parent is not None:
            parents.setdefault(parent.run_id, parent)
    every = [*runs.values(), *(p for pid, p in parents.items() if pid not in runs)]
    by_model: dict[str, int] = {}
    for cfg in every:
        by_model[cfg.model.name] = by_model.get(cfg.model.name, 0) + run_passes(cfg)
    return {
        "paper_passes": sum(by_model.values()),
        "paper_passes_by_model": dict(sorted(by_model.items())),
        "paper_parents": len(every) - len(runs),
    }


def build() -> dict[str, Any]:
    """The catalog of every registered spec, as written to ``catalog.json``."""
    from benchmark.experiments.registry import EXPERIMENTS

    entries = [asdict(entry_of(EXPERIMENTS.get(name))) for name in EXPERIMENTS.names()]
    for entry in entries:
        entry["smoke_runs"] = list(entry["smoke_runs"])
    return {"version": CATALOG_VERSION, "experiments": entries}


@functools.cache
def load() -> dict[str, Entry]:
    """The catalog's entries by id (read once per process)."""
    data = json.loads(CATALOG_FILE.read_text())
    return {
        e["id"]: Entry(**{**e, "smoke_runs": tuple(e["smoke_runs"])}) for e in data["experiments"]
    }


def check_id(experiment_id: str, need: Need = "any") -> Entry:
    """The entry of ``experiment_id``; a ConfigError naming the ids that fit ``need`` otherwise.

    A table id asked for a figure (or the reverse) is told which ids have one; a paper table
    that no spec rebuilds is told why.
    """
    entries = load()
    field_name = {"any": "experiment id", "table": "table id", "figure": "figure id"}[need]
    if experiment_id in NOT_REPRODUCIBLE:
        raise ConfigError(
            field_name,
            experiment_id,
            f"a reproducible id; this table is not: {NOT_REPRODUCIBLE[experiment_id]}",
        )
    fitting = [e.id for e in entries.values() if need == "any" or getattr(e, need)]
    entry = entries.get(experiment_id)
    if entry is None:
        what = {"any": "a table or figure", "table": "a table", "figure": "a figure"}[need]
        raise ConfigError(
            field_name,
            experiment_id,
            f"the id of {what}: prunebench list shows them ({len(fitting)})",
            suggest=close_matches(experiment_id, fitting),
        )
    if need != "any" and not getattr(entry, need):
        # Name the command that does fit, not the dozens of ids that would.
        other, command = ("figure", "plot") if need == "table" else ("table", "table")
        raise ConfigError(
            field_name,
            experiment_id,
            f"an id with a {need} (prunebench list shows the {len(fitting)}); {experiment_id} is "
            f"a {other} only: prunebench {command} {experiment_id} builds it",
        )
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    """Write the catalog from the specs (``--write``) or check that the file matches them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {CATALOG_FILE.name}")
    args = parser.parse_args(argv)
    fresh = build()
    text = json.dumps(fresh, indent=1, sort_keys=True) + "\n"
    if args.write:
        CATALOG_FILE.write_text(text)
        print(f"wrote {CATALOG_FILE} ({len(fresh['experiments'])} experiments)")
        return 0
    if not CATALOG_FILE.exists() or CATALOG_FILE.read_text() != text:
        print(
            f"{CATALOG_FILE} is out of date: python -m benchmark.experiments.catalog --write",
            file=sys.stderr,
        )
        return 1
    print(f"{CATALOG_FILE.name} matches the specs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
