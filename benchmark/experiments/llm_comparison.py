"""What the language-model comparison specs share (``tab_llm_zero_shot``, ``tab_llm_owl``,
``tab_llm_ria``): the zero-shot tasks, the smoke section (the tiny Llama on ``pydoc`` with the
``pydoc_cloze`` task) and a table of a source's published perplexities with the zero-shot mean
beside.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmark.experiments.base import Problem
from benchmark.experiments.llm_problems import LM_SMOKE, SMOKE_PARENT_EPOCHS, pretrained_lm
from benchmark.experiments.llm_tables import LMColumn, LMGrid, LMRow, LMTable

# The lm-eval tasks of Wanda's zero-shot table (benchmark.tasks.zero_shot.PAPER_TASKS).
TASKS = ("boolq", "rte", "hellaswag", "winogrande", "arc_easy", "arc_challenge", "openbookqa")
SMOKE_TASKS = ("pydoc_cloze",)
SMOKE_SECTION = "tiny Llama (pydoc)"
# The settings of OWL's and RIA's numbers (their main.py defaults and scripts).
C4_2048 = {"data.max_length": 2048, "method.calibration_samples": 128, "seed": 0}


def smoke_grid(rows: tuple[LMRow, ...], columns: tuple[LMColumn, ...]) -> LMGrid:
    """The smoke section: the tiny Llama's dense parent pruned, scored on ``pydoc_cloze``."""
    settings = {"method.parent_epochs": SMOKE_PARENT_EPOCHS, "eval.zero_shot": list(SMOKE_TASKS)}
    return LMGrid(LM_SMOKE, SMOKE_SECTION, rows, columns, settings)


def paper_grids(
    problems: tuple[Problem, ...], rows: tuple[LMRow, ...], columns: tuple[LMColumn, ...]
) -> tuple[LMGrid, ...]:
    """One section per model, scored on the seven zero-shot tasks."""
    settings = {"eval.zero_shot": list(TASKS)}
    return tuple(LMGrid(p, p.name, rows, columns, settings) for p in problems)


def published_table(
    id: str,
    description: str,
    models: Mapping[str, str],
    rows: tuple[LMRow, ...],
    columns: tuple[LMColumn, ...],
    published: Mapping[tuple[str, str, float, str], float],
    source: str,
    settings: Mapping[str, Any] = C4_2048,
) -> LMTable:
    """A table of ``models`` (section -> Hub repo, context 2048) with the perplexities of
    ``source`` beside (the first model's set against the smoke section), the zero-shot mean as
    a column and ``--paper`` warning where the runs differ from ``settings``."""
    problems = tuple(pretrained_lm(name, repo, 2048) for name, repo in models.items())
    spec = LMTable(
        id,
        description,
        smoke=(smoke_grid(rows, columns),),
        paper=paper_grids(problems, rows, columns),
        published=published,
        source=source,
        smoke_reference=next(iter(models)),
        reference_rows=("Dense",),  # as the one-shot table: shown, neither ranked nor compared
    )
    spec.metrics = ("ppl", "sparsity", "zs_mean")
    spec.smoke_metrics = ("ppl", "sparsity", *(f"zs_{t}" for t in SMOKE_TASKS))
    spec.paper_settings = {name: settings for name in models}
    return spec
