"""What an experiment spec is: planned runs tagged with their table cell, and a table layout.

A spec never reads results: it lists the runs a table or figure needs (:class:`PlannedRun`,
each tagged with the cell it feeds and its tuned configuration) at a given scale, and for tables
how the cells are laid out (:class:`TableLayout`). Selection, aggregation and rendering live in
``benchmark.reporting.tables``; figures in ``benchmark.reporting.plots``.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import pandas as pd

from benchmark.config.parse import config_from_dict
from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.training.validation import validate

Scale = Literal["smoke", "paper"]
SCALES: tuple[Scale, ...] = ("smoke", "paper")
# Columns of a plan frame; (section, row, goal sparsity, budget, x) is the cell a run feeds.
CELL = ["section", "row", "goal", "budget", "x"]
PLAN_COLUMNS = ["run_id", *CELL, "tuned", "seed", "method"]


@dataclass(frozen=True)
class PlannedRun:
    """One run a spec needs, tagged with the cell it feeds.

    ``sparsity`` is the goal sparsity column in percent, or None for methods whose sparsity is
    not specifiable (their column follows from the achieved sparsity). ``x`` is a figure's
    abscissa (e.g. total retraining epochs); 0 in tables. ``tuned`` names the configuration
    selected over (everything but the seed): runs differing only in the seed share it.
    """

    cfg: RunConfig
    section: str
    row: str
    sparsity: float | None
    budget: str = ""
    x: float = 0.0
    tuned: str = ""


# How a run that starts from a trained dense model finds its parent (``Problem.parent_rule``):
# "per_weight_decay" (the default, the paper's code: runners/pretrainedRunner.py looks the
# pretrained run up by the retraining run's own weight decay, ``attributeList =
# ['weight_decay']``): the parent is trained with the run's weight decay, so a retraining
# weight-decay grid trains one parent per weight decay and seed. "standard": one parent per seed,
# trained with the problem's standard weight decay, shared by every retraining weight decay
# (``method.parent_weight_decay``; our earlier reading of "only the weight decay is tuned").
PARENT_RULES: tuple[str, ...] = ("per_weight_decay", "standard")


@dataclass(frozen=True)
class Problem:
    """Dataset, model and original training of one row of the paper's training-setup table.

    ``weight_decays`` are the values a table tunes; ``dense_weight_decay`` is that of the
    standard dense training a retraining grid starts from (None: the first of
    ``weight_decays``; the paper's setup table gives none, see :attr:`standard_weight_decay`).
    ``parent_rule`` (one of :data:`PARENT_RULES`) says which dense parent a run from a trained
    model starts from; every spec (schedule tables, figures, LC/GSM from a trained model) reads
    it, so the project follows one rule everywhere.
    """

    name: str
    data: Mapping[str, Any]
    model: str
    epochs: int
    schedule: Mapping[str, Any]
    weight_decays: tuple[float, ...]
    seeds: tuple[int, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)
    dense_weight_decay: float | None = None
    # A benchmark.data.fakedata writer whose stand-in files data.root holds (smoke problems only).
    standin: str = ""
    parent_rule: str = "per_weight_decay"

    def __post_init__(self) -> None:
        if self.parent_rule not in PARENT_RULES:
            raise ConfigError("parent_rule", self.parent_rule, PARENT_RULES)

    @property
    def standard_weight_decay(self) -> float:
        """The weight decay of the standard dense training (our choice where the paper gives
        none: ``dense_weight_decay``, else the first, i.e. smallest, tuned value; 1e-4 for the
        CIFAR-10 networks, the paper's "if not otherwise specified" value on ImageNet)."""
        if self.dense_weight_decay is not None:
            return self.dense_weight_decay
        return self.weight_decays[0]

    def parent_settings(self) -> dict[str, float]:
        """The ``method.parent_weight_decay`` of IMP (and Renda et al.) runs on this problem:
        the standard weight decay under the "standard" rule when several are tuned, else
        nothing (the parent copies the run's weight decay, as the paper's code looks it up)."""
        if self.parent_rule != "standard" or len(self.weight_decays) < 2:
            return {}
        return {"method.parent_weight_decay": self.standard_weight_decay}

    def prepare(self) -> None:
        """Write the stand-in files under ``data.root`` when this problem uses some and they
        are missing (written to a temporary folder first, so a partial write is never used)."""
        if not self.standin:
            return
        root = Path(self.data["root"])
        if root.exists():
            return
        from benchmark.data.fakedata import WRITERS

        tmp = root.with_name(f"{root.name}.partial")
        if tmp.exists():
            shutil.rmtree(tmp)
        WRITERS[self.standin](tmp)
        tmp.rename(root)

    def base(self, store: Path | str) -> dict[str, Any]:
        """The nested config dict shared by every run on this problem (no method, no budget)."""
        out: dict[str, Any] = {
            "data": dict(self.data),
            "model": {"name": self.model},
            "schedule": dict(self.schedule),
            "output": {"dir": str(store)},
        }
        for section, values in self.extra.items():
            out.setdefault(section, {}).update(values)
        return out


def make_config(base: Mapping[str, Any], values: Mapping[str, Any]) -> RunConfig:
    """A copy of ``base`` with dotted ``values`` (``"method.sparsity": 0.9``, ``"seed": 1``)
    set; parsed and validated."""
    # Only the tables on the way to a value are copied: config_from_dict copies the rest.
    data = dict(base)
    for key, value in values.items():
        *sections, name = key.split(".")
        node = data
        for section in sections:
            child = dict(node.get(section, {}))
            node[section] = child
            node = child
        node[name] = value
    cfg = config_from_dict(data)
    validate(cfg)
    return cfg


def product(grid: Mapping[str, Iterable[Any]]) -> Iterator[dict[str, Any]]:
    """Every combination of a ``{key: values}`` grid, as dicts (one dict for an empty grid)."""
    keys = list(grid)
    for values in itertools.product(*(list(grid[k]) for k in keys)):
        yield dict(zip(keys, values, strict=True))


def tuned_key(values: Mapping[str, Any]) -> str:
    """A short stable name of a tuned configuration, e.g. ``optim.weight_decay=0.0005``."""
    return ",".join(f"{k}={values[k]!r}" for k in sorted(values))


_BUDGET_RE = re.compile(r"^(?:(\d+)x)?(\d+(?:\.\d+)?)%$")


def parse_budget(label: str, original_epochs: int) -> tuple[int, int]:
    """``'2x2.5%'`` of T original epochs -> (cycles, retraining epochs per cycle), at least 1."""
    match = _BUDGET_RE.match(label)
    if match is None:
        raise ConfigError("budget", label, "a label like '5%' or '2x2.5%'")
    cycles = int(match.group(1) or 1)
    epochs = max(1, round(float(match.group(2)) * original_epochs / 100))
    return cycles, epochs


@dataclass(frozen=True)
class Block:
    """A header (goal sparsities) over groups of rows; groups are separated by a rule."""

    sparsities: tuple[float, ...]
    groups: tuple[tuple[str, tuple[str, ...]], ...]
    title: str = ""


@dataclass(frozen=True)
class TableLayout:
    """Rows, column groups (sparsity, then budget) and sub-columns (metrics) of a table.

    ``per_row`` columns (e.g. images/s) hold one value per row, before the sparsity groups.
    Highlights (first/second/third) rank ``highlight_metric`` per column within each section of
    ``ranked_sections`` (None: every section). ``budget_name`` names what the second level of
    columns is ("budget"; a language-model table's "pattern" or "schedule");
    ``reference_rows`` are shown beside the others but neither ranked nor compared with a
    paper (the dense model, best by construction).
    """

    blocks: tuple[Block, ...]
    budgets: tuple[str, ...] = ("",)
    metrics: tuple[str, ...] = ("accuracy",)
    per_row: tuple[str, ...] = ()
    ranked_sections: tuple[str, ...] | None = None
    highlight_metric: str = "accuracy"
    budget_name: str = "budget"
    reference_rows: tuple[str, ...] = ()

    def ranked(self, section: str) -> bool:
        """Whether the rows of ``section`` take part in the highlighting."""
        return self.ranked_sections is None or section in self.ranked_sections


G = TypeVar("G")


class Experiment:
    """A table or figure of the paper: which runs it needs at each scale and how it is shown."""

    id: str = ""
    kind: Literal["table", "figure"] = "table"
    description: str = ""
    # The figure function of benchmark.reporting.plots that draws it (tables may have one too).
    plot: str | None = None
    # Whether CI reproduces it at smoke scale.
    ci: bool = False
    # Whether it is a table or figure of the paper (False: an extension beyond it, e.g. the
    # language-model tables, with no transcription in benchmark/experiments/paper).
    from_paper: bool = True
    # Why ``--paper`` has nothing to set beside this table, when it has no published numbers.
    unpublished: str = "the paper prints no numbers for it"

    def runs(self, scale: Scale, store: Path | str) -> list[PlannedRun]:
        """The runs this experiment needs at ``scale``, writing into ``store``."""
        raise NotImplementedError

    def layout(self, scale: Scale) -> TableLayout | None:
        """The table layout at ``scale`` (None for figures without a table)."""
        return None

    def prepare(self, scale: Scale) -> None:
        """Make what the runs at ``scale`` read available (e.g. write smoke stand-in files)."""

    @property
    def paper_table(self) -> str | None:
        """The id of the paper's own numbers (benchmark/experiments/paper), when it has a table."""
        from benchmark.experiments.paper_numbers import list_paper_tables

        return self.id if self.id in list_paper_tables() else None

    def published_numbers(self) -> pd.DataFrame | None:
        """The published values shown beside the table (``--paper``): the paper's own table in
        long format (``benchmark.experiments.paper_numbers``), or None."""
        from benchmark.experiments.paper_numbers import load_paper_table

        return None if self.paper_table is None else load_paper_table(self.paper_table)

    def plan(self, scale: Scale, store: Path | str) -> pd.DataFrame:
        """:meth:`runs` as a frame (one row per run: run id, cell, tuned configuration, seed)."""
        return plan_frame(self.runs(scale, store))


class GridExperiment(Experiment, Generic[G]):
    """An experiment whose runs come from one grid object per scale (smoke and paper)."""

    def __init__(self, id: str, description: str, smoke: G, paper: G, *, ci: bool = False) -> None:
        self.id, self.description, self.ci = id, description, ci
        self.grids: dict[str, G] = {"smoke": smoke, "paper": paper}


def plan_frame(runs: Iterable[PlannedRun], ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Planned runs as a frame with :data:`PLAN_COLUMNS`; a run listed twice is kept once.

    ``ids``: the runs' ids when the caller has them (a run id hashes the whole config: at paper
    scale computing them is most of the cost of a plan).
    """
    runs = list(runs)
    ids = [r.cfg.run_id for r in runs] if ids is None else list(ids)
    rows = [
        {
            "run_id": run_id,
            "section": r.section,
            "row": r.row,
            "goal": float("nan") if r.sparsity is None else float(r.sparsity),
            "budget": r.budget,
            "x": float(r.x),
            "tuned": r.tuned,
            "seed": r.cfg.seed,
            "method": r.cfg.method.name,
        }
        for r, run_id in zip(runs, ids, strict=True)
    ]
    frame = pd.DataFrame(rows, columns=PLAN_COLUMNS)
    return frame.drop_duplicates(subset=[*CELL, "run_id"], ignore_index=True)


def unique_configs(runs: Iterable[PlannedRun]) -> list[RunConfig]:
    """The distinct configs of ``runs`` (a dense reference feeds several cells), in order."""
    seen: dict[str, RunConfig] = {}
    for r in runs:
        seen.setdefault(r.cfg.run_id, r.cfg)
    return list(seen.values())


def registered(method: str) -> bool:
    """Whether ``method`` is registered now (other methods are skipped, their cells missing)."""
    from methods import METHODS, load_methods

    load_methods()
    return method in METHODS


def unknown_params(method: str, values: Iterable[str]) -> list[str]:
    """The dotted ``method.*`` keys of ``values`` that registered ``method`` does not declare."""
    from benchmark.config.run import METHOD_COMMON_KEYS
    from methods import get_method

    known = {f.name for f in dataclasses.fields(get_method(method).Params)}
    known |= set(METHOD_COMMON_KEYS)
    return [k for k in values if k.startswith("method.") and k.split(".", 1)[1] not in known]
