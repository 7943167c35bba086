"""What ``reproduce`` says about the runs of its plan that failed: each distinct first line of
their errors once, with how many runs it stopped and which, the runs that could not start
because their dense parent failed, and how to run them again (``--retry-failed``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Run ids named per distinct error; the rest are counted.
SHOWN_IDS = 3


def first_line(record: Mapping[str, Any]) -> str:
    """The first line of a failed record's error ("Type: message")."""
    error = str(record.get("error") or "no error recorded").strip()
    return error.splitlines()[0] if error else "no error recorded"


def failure_lines(failed: Mapping[str, Mapping[str, Any]], blocked: int) -> list[str]:
    """The failed runs (run id -> record) grouped by the first line of their error, the most
    common first, and the runs that waited on a failed parent."""
    groups: dict[str, list[str]] = {}
    for run_id, record in failed.items():
        groups.setdefault(first_line(record), []).append(run_id)
    lines = [f"{len(failed)} run{'s' * (len(failed) != 1)} failed:"] if failed else []
    for error, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        more = f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else ""
        lines.append(f"  {len(ids)} run{'s' * (len(ids) != 1)}: {error}")
        lines.append(f"    {', '.join(ids[:SHOWN_IDS])}{more}")
    if blocked:
        lines.append(
            f"{blocked} more run{'s' * (blocked != 1)} did not start: the dense parent they "
            "start from failed"
        )
    return lines


def report_failures(
    configs: Sequence[Any], store_dir: str | Path, parents: Any, command: str
) -> bool:
    """Print, on stderr, the failures among ``configs`` and the dense parents they start from
    (``parents``: a ``training.passes.Parents``); whether any run failed."""
    from benchmark.store.results import FAILED, Store

    store = Store(store_dir)
    records: dict[str, dict[str, Any] | None] = {}
    waiting = 0
    for cfg in configs:
        record = records.setdefault(cfg.run_id, store.read(cfg.run_id))
        parent = parents.of(cfg.run_id, cfg)
        if parent is not None:
            parent_record = records.setdefault(parent[0], store.read(parent[0]))
            failed_parent = parent_record is not None and parent_record.get("status") == FAILED
            waiting += record is None and failed_parent
    failed = {rid: r for rid, r in records.items() if r is not None and r.get("status") == FAILED}
    if not failed:
        return False
    for line in failure_lines(failed, waiting):
        print(f"[{command}] {line}", file=sys.stderr)
    print(
        f"[{command}] each record: prunebench show RUN_ID --store {store_dir}; once the cause is "
        f"fixed, the same {command} command with --retry-failed runs them again",
        file=sys.stderr,
    )
    return True
