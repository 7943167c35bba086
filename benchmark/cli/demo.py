"""The main job on the embedded default: dense vs IMP (FT, ALLR) vs BIMP on digits."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from benchmark.config.parse import apply_overrides, config_from_dict, parse_override
from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.training.validation import validate
from methods.base import dense_parent


def demo_configs(
    store: Path, epochs: int, sparsity: float, overrides: Sequence[str] = ()
) -> dict[str, RunConfig]:
    """The demo's runs: a dense model, One Shot IMP with FT and ALLR from it, and BIMP.

    IMP starts from the dense run itself (same parent config, so it is trained once); it then
    retrains for a third of the budget. BIMP gets the same total budget as the dense model.
    ``overrides`` (``section.key=value``) apply to every run.
    """
    for override in overrides:
        section = parse_override(override)[0][0]
        if section in ("budget", "method"):
            # Each run's budget and method follow from --epochs and --sparsity; one --set value
            # for all four would break the equal-budget comparison (or T0 < T for BIMP).
            raise ConfigError(
                "demo --set",
                override,
                "keys outside [budget] and [method] (use --epochs N, "
                "--sparsity S; prunebench run trains any other configuration)",
            )
    retrain = max(1, epochs // 3)
    base: dict[str, Any] = {
        "data": {"name": "digits"},
        "model": {"name": "cnn_small"},
        "schedule": {"name": "linear", "lr": 0.1},
        "output": {"dir": str(store)},
        "logging": {"progress": False},
    }

    def make(method: dict[str, Any], budget: dict[str, Any]) -> RunConfig:
        data = apply_overrides({**base, "method": method, "budget": budget}, list(overrides))
        cfg = config_from_dict(data)
        validate(cfg)
        return cfg

    imp = {"name": "imp", "sparsity": sparsity, "parent_epochs": epochs}
    runs = {
        "IMP + FT": make({**imp, "schedule": "FT"}, {"epochs": retrain}),
        "IMP + ALLR": make({**imp, "schedule": "ALLR"}, {"epochs": retrain}),
        "BIMP (ALLR)": make(
            {"name": "bimp", "sparsity": sparsity, "schedule": "ALLR"},
            {"epochs": epochs, "initial_epochs": epochs - retrain, "cycles": 2},
        ),
    }
    return {"dense": dense_parent(runs["IMP + FT"], epochs), **runs}


def demo_table(records: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per demo run: accuracy, sparsity, theoretical speedup, images/s, epochs."""
    rows = []
    for label, rec in records.items():
        m = rec["metrics"]
        rows.append(
            {
                "method": label,
                "test acc (%)": 100 * m["test"]["top1"],
                "sparsity (%)": 100 * m["sparsity"],
                "speedup (x)": m["speedup"],
                "images/s": m["images_per_s"],
                "epochs": len(rec["history"]),
                "run id": rec["run_id"],
            }
        )
    return pd.DataFrame(rows)


def demo_text(table: pd.DataFrame) -> str:
    """The demo table as text fitting stdout's width (numbers with two decimals)."""
    from benchmark.core.textwidth import fit_table, width_of

    def cell(value: Any) -> str:
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    rows = [list(table.columns), *([cell(v) for v in r] for r in table.itertuples(index=False))]
    return fit_table(rows, width_of(), align="r" * len(table.columns))  # as pandas prints it


def demo_figure(table: pd.DataFrame, path: Path, sparsity: float = 0.9) -> None:
    """:func:`build_demo_figure` saved as PNG and PDF."""
    fig = build_demo_figure(table, sparsity)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path.with_suffix(".png"), dpi=120)
    fig.savefig(path.with_suffix(".pdf"))


def build_demo_figure(table: pd.DataFrame, sparsity: float = 0.9) -> Any:
    """Bar chart of test accuracy and a speedup-vs-accuracy scatter (a matplotlib Figure).

    Both say what they show on their face: digits, the goal ``sparsity`` and one seed per bar;
    the bars start at 0 (a cut axis made a 1-point gap look like a collapse) and carry their
    values.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), layout="tight")
    FigureCanvasAgg(fig)
    ax1, ax2 = fig.subplots(1, 2)
    colors = [f"C{i}" for i in range(len(table))]
    bars = ax1.bar(table["method"], table["test acc (%)"], color=colors)
    ax1.bar_label(bars, fmt="%.2f", fontsize=8)
    ax1.set_ylabel("test accuracy (%)")
    ax1.set_ylim(0, 105)
    ax1.tick_params(axis="x", rotation=20)
    # The dense model has no sparsity; every other bar is at the goal.
    ax1.set_title(f"digits: test accuracy at {100 * sparsity:g}% sparsity (dense: 0%), 1 seed")
    for (_, row), color in zip(table.iterrows(), colors, strict=True):
        ax2.scatter(row["speedup (x)"], row["test acc (%)"], color=color, label=row["method"], s=60)
    ax2.set_xlabel("theoretical speedup (x)")
    ax2.set_ylabel("test accuracy (%)")
    ax2.set_title(f"accuracy vs theoretical speedup ({100 * sparsity:g}%, 1 seed)")
    ax2.legend()
    return fig


def run_demo(
    store: Path,
    figure: Path,
    *,
    epochs: int = 30,
    sparsity: float = 0.9,
    overrides: Sequence[str] = (),
) -> pd.DataFrame:
    """Train (or reuse) the demo runs, print the comparison table and write the figure."""
    from benchmark.training.runner import execute

    records = {}
    for label, cfg in demo_configs(store, epochs, sparsity, overrides).items():
        print(f"[demo] {label}: run {cfg.run_id}", flush=True)
        records[label] = execute(cfg)
    table = demo_table(records)
    print()
    print(demo_text(table))
    demo_figure(table, figure, sparsity)
    print(f"\n[demo] trained with {environment_line(records.values())}")
    print(f"[demo] figure: {figure.with_suffix('.png')} (and .pdf); results: {store}/")
    return table


def environment_line(records: Any) -> str:
    """Where the runs were trained: torch version, device and threads.

    CPU results repeat bit for bit only with the same versions and thread count.
    """
    envs = {
        (r["environment"].get("torch"), r["environment"].get("device"), r["environment"]["threads"])
        for r in records
    }
    return "; ".join(f"torch {t} on {d}, {n} thread(s)" for t, d, n in sorted(envs, key=str))
