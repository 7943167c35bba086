"""Time the aggregation of a 10,000-run store into a table (the quality bar: under 5 seconds).

``python -m benchmark.bench.tables [--runs N]`` builds a synthetic store frame (the shape
``load_store`` returns) for a schedule-comparison table at the paper's layout, then times
selection, aggregation and rendering (Markdown, LaTeX, CSV) together.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from benchmark.experiments.base import Block, TableLayout

SCHEDULES = ("FT", "LRW", "SLR", "CLR", "LLR", "ALLR")
TUNED = ("constant", "stepped", "cosine", "linear")


def synthetic_plan(runs: int, seeds: int = 2) -> tuple[pd.DataFrame, TableLayout]:
    """A plan of ``runs`` runs over a 10-row x 4-sparsity x 4-budget table, and its layout."""
    sparsities = (50.0, 90.0, 95.0, 99.0)
    budgets = ("2.5%", "5%", "10%", "25%")
    rows = [("translation", r) for r in SCHEDULES] + [("tuned", r) for r in TUNED]
    cells = [(s, r, g, b) for s, r in rows for g in sparsities for b in budgets]
    configs = max(1, runs // (len(cells) * seeds))
    records = []
    for i in range(runs):
        section, row, goal, budget = cells[i % len(cells)]
        tuned = (i // len(cells)) % configs
        seed = i // (len(cells) * configs)
        records.append((f"run-{i:06d}", section, row, goal, budget, 0.0, f"t{tuned}", seed, "imp"))
    plan = pd.DataFrame(
        records,
        columns=["run_id", "section", "row", "goal", "budget", "x", "tuned", "seed", "method"],
    )
    layout = TableLayout(
        blocks=(Block(sparsities, (("translation", SCHEDULES), ("tuned", TUNED))),),
        budgets=budgets,
        ranked_sections=("translation",),
    )
    return plan, layout


def synthetic_store(plan: pd.DataFrame, seed: int = 0, missing: float = 0.0) -> pd.DataFrame:
    """A store frame with one finished record per planned run (a ``missing`` fraction left out)."""
    rng = np.random.default_rng(seed)
    n = len(plan)
    goal = plan["goal"].fillna(90.0).to_numpy() / 100
    acc = np.clip(0.95 - 0.2 * goal**4 + rng.normal(0, 0.01, n), 0, 1)
    store = pd.DataFrame(
        {
            "run_id": plan["run_id"].to_numpy(),
            "status": "finished",
            "val.top1": np.clip(acc + rng.normal(0, 0.005, n), 0, 1),
            "test.top1": acc,
            "sparsity": goal,
            "speedup": 1 / (1 - goal * 0.9),
            "images_per_s": rng.uniform(3000, 4000, n),
        }
    )
    keep = rng.random(n) >= missing
    return store[keep].reset_index(drop=True)


def time_aggregation(runs: int = 10_000, repeats: int = 3) -> float:
    """Best wall time (seconds) of building and rendering the table from a ``runs``-run store."""
    from benchmark.reporting.render import render_csv, render_latex, render_markdown
    from benchmark.reporting.tables import build_table

    plan, layout = synthetic_plan(runs)
    store = synthetic_store(plan)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        table = build_table("synthetic", "paper", layout, plan, store)
        render_markdown(table), render_latex(table), render_csv(table)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    """Print the aggregation time of a synthetic store."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args(argv)
    seconds = time_aggregation(args.runs)
    print(f"aggregated {args.runs} runs into a table in {seconds:.3f} s (best of 3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
