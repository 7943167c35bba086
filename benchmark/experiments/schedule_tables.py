"""The retraining-schedule tables: IMP from a dense parent, one row per schedule.

Rows are the translation schemes (FT, LRW, SLR, CLR, LLR, ALLR or the ALLR variants) and,
below a rule, the grid-searched schedules (constant, stepped, cosine, linear); columns are goal
sparsities, each split by retraining budget (``'5%'`` of the original epochs, ``'2x2.5%'`` for two
cycles). Only the weight decay is tuned for the translation schemes; the tuned schedules also
tune their initial learning rate and warm-up (Appendix C). Highlights rank the translations.

The tuned weight decay is the retraining one, and each run starts from the dense parent trained
with its own weight decay, as the paper's code looks its pretrained model up by the retraining
run's weight decay (``Problem.parent_rule``; "standard" shares one parent per seed, trained with
the problem's standard weight decay, by every retraining weight decay).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.experiments.base import (
    Block,
    GridExperiment,
    PlannedRun,
    Problem,
    Scale,
    TableLayout,
    make_config,
    parse_budget,
    product,
    tuned_key,
)

TRANSLATIONS = ("FT", "LRW", "SLR", "CLR", "LLR", "ALLR")
TUNED = ("constant", "stepped", "cosine", "linear")
# Row label (as printed in the paper) -> method.schedule name.
SCHEDULE_NAMES = {
    "ALLRd1": "ALLR-d1",
    "ALLRd2": "ALLR-d2",
    **{t: f"tuned-{t}" for t in TUNED},
}


@dataclass(frozen=True)
class ScheduleGrid:
    """The runs of one schedule table at one scale."""

    problem: Problem
    sparsities: tuple[float, ...]
    budgets: tuple[str, ...]
    translations: tuple[str, ...] = TRANSLATIONS
    tuned: tuple[str, ...] = ()
    tuned_lrs: tuple[float, ...] = ()
    warmups: tuple[float, ...] = (0.0, 0.1)
    structured: bool = False
    # The reported metric: "accuracy", "iou" (segmentation) or "bleu" (translation).
    metric: str = "accuracy"
    # Retraining epochs of budget labels whose printed percentage the paper contradicts (label ->
    # epochs per cycle); other labels are that percentage of the original epochs (parse_budget).
    budget_epochs: Mapping[str, int] = field(default_factory=dict)

    def cycles_and_epochs(self, budget: str) -> tuple[int, int]:
        """(cycles, retraining epochs per cycle) of the budget label ``budget``."""
        cycles, epochs = parse_budget(budget, self.problem.epochs)
        return cycles, self.budget_epochs.get(budget, epochs)


class ScheduleTable(GridExperiment[ScheduleGrid]):
    """A retraining-schedule comparison table (IMP, One Shot or iterative)."""

    kind = "table"

    def runs(self, scale: Scale, store: Path | str) -> list[PlannedRun]:
        g = self.grids[scale]
        p = g.problem
        base = p.base(store)
        out = []
        rows = [("translation", r) for r in g.translations] + [("tuned", r) for r in g.tuned]
        for (section, label), sparsity, budget in product_rows(rows, g.sparsities, g.budgets):
            cycles, epochs = g.cycles_and_epochs(budget)
            axes: dict[str, tuple] = {"optim.weight_decay": p.weight_decays}
            if section == "tuned":
                axes |= {"method.initial_lr": g.tuned_lrs, "method.warmup_fraction": g.warmups}
            for tuned in product(axes):
                for seed in p.seeds:
                    cfg = make_config(
                        base,
                        {
                            **tuned,
                            **p.parent_settings(),
                            "seed": seed,
                            "method.name": "imp",
                            "method.sparsity": sparsity / 100,
                            "method.schedule": SCHEDULE_NAMES.get(label, label),
                            "method.parent_epochs": p.epochs,
                            "method.structured": g.structured,
                            "budget.epochs": cycles * epochs,
                            "budget.cycles": cycles,
                        },
                    )
                    out.append(
                        PlannedRun(cfg, section, label, sparsity, budget, 0.0, tuned_key(tuned))
                    )
        return out

    def layout(self, scale: Scale) -> TableLayout:
        g = self.grids[scale]
        groups = [("translation", g.translations)] + ([("tuned", g.tuned)] if g.tuned else [])
        return TableLayout(
            blocks=(Block(g.sparsities, tuple(groups)),),
            budgets=g.budgets,
            metrics=(g.metric,),
            ranked_sections=("translation",),
            highlight_metric=g.metric,
        )

    def prepare(self, scale: Scale) -> None:
        """Write the stand-in files of a smoke problem when they are missing."""
        self.grids[scale].problem.prepare()


def product_rows(
    rows: list[tuple[str, str]], sparsities: tuple[float, ...], budgets: tuple[str, ...]
) -> list[tuple[tuple[str, str], float, str]]:
    """Every (row, sparsity, budget) cell of a schedule table."""
    return [(r, s, b) for r in rows for s in sparsities for b in budgets]


# The paper's CIFAR-10 budgets; on the smoke problem's 40 epochs they are 1, 2, 4 and 10 epochs.
SMOKE_BUDGETS = ("2.5%", "5%", "10%", "25%")
SMOKE_ITERATIVE_BUDGETS = ("2x2.5%", "2x5%", "2x10%", "3x2.5%", "3x5%", "3x10%")


def smoke_grid(
    translations: tuple[str, ...] = TRANSLATIONS,
    *,
    iterative: bool = False,
    structured: bool = False,
    sparsities: tuple[float, ...] = (90, 95),
) -> ScheduleGrid:
    """The smoke stand-in of a schedule table: digits and cnn_small (``SMOKE_RETRAIN``), 2
    sparsities x the paper's 4 (One Shot) or 6 (iterative) budgets x 8 seeds."""
    from benchmark.experiments.problems import SMOKE_RETRAIN

    budgets = SMOKE_ITERATIVE_BUDGETS if iterative else SMOKE_BUDGETS
    return ScheduleGrid(SMOKE_RETRAIN, sparsities, budgets, translations, structured=structured)


def task_smoke_grid(problem: Problem, metric: str, iterative: bool = False) -> ScheduleGrid:
    """The smoke stand-in of a segmentation or translation schedule table: the translation
    schemes on ``problem`` (tiny model, stand-in files), one sparsity and one budget."""
    budgets = ("2x10%",) if iterative else ("20%",)
    return ScheduleGrid(problem, (50,), budgets, metric=metric)


def oneshot_and_iterative(
    table: str,
    title: str,
    problems: tuple[Problem, Problem],
    sparsities: tuple[float, ...],
    budgets: tuple[tuple[str, ...], tuple[str, ...]],
    metric: str,
) -> tuple[ScheduleTable, ScheduleTable]:
    """The One Shot table ``table`` and its ``-iterative`` twin of the translation schemes on the
    (paper, smoke) ``problems``, with the (One Shot, iterative) paper ``budgets``."""
    paper, smoke = problems
    label = {"iou": "mIoU", "bleu": "BLEU"}.get(metric, metric)
    return (
        ScheduleTable(
            table,
            f"{title} One Shot IMP: retraining schedules ({label})",
            smoke=task_smoke_grid(smoke, metric),
            paper=ScheduleGrid(paper, sparsities, budgets[0], metric=metric),
        ),
        ScheduleTable(
            f"{table}-iterative",
            f"{title} iterative IMP (2-3 cycles): retraining schedules ({label})",
            smoke=task_smoke_grid(smoke, metric, iterative=True),
            paper=ScheduleGrid(paper, sparsities, budgets[1], metric=metric),
        ),
    )
