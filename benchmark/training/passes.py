"""How much a run trains, known before it runs: its dataset passes and its dense parent.

A run's passes (epochs over the training set) are the epochs its method trains
(``Method.total_epochs``: BIMP's initial training and cycles, IMP's retraining, ...) plus its
post-training fine-tuning (``finetune.epochs``); a dense parent it starts from
(``Method.parent_config``) is a run of its own. Cost estimates (``benchmark.launch.estimate``)
and the catalog of the specs (``prunebench list``) count both the same way.
"""

from __future__ import annotations

from benchmark.config.run import RunConfig
from methods import get_method


def run_passes(cfg: RunConfig) -> int:
    """Dataset passes of one run: its method's epochs plus post-training fine-tuning."""
    return int(get_method(cfg.method.name)(cfg).total_epochs()) + int(cfg.finetune.epochs)


def model_label(name: str, pretrained: str) -> str:
    """The model a cost is measured for: its name, or for a model whose architecture is its
    folder (``causal_lm``) the folder or ``hf:`` name (a 7B and a 70B model are not one
    workload)."""
    from benchmark.models.registry import FOLDER_MODELS

    return pretrained if name in FOLDER_MODELS and pretrained else name


def precision_label(dtype: str, training: str) -> str:
    """A run's precision: a half ``model.dtype`` (bf16, fp16), else its training precision
    ``training`` (``optim.precision()``: fp32, or bf16/fp16 autocast)."""
    return {"bfloat16": "bf16", "float16": "fp16"}.get(dtype, training)


def has_setup_phase(cfg: RunConfig) -> bool:
    """Whether the run spends measured time before training: a one-shot prune of a language
    model, with its calibration and evaluation (priced from finished runs' seconds)."""
    return bool(getattr(get_method(cfg.method.name), "setup_phase", False))


def parent_of(cfg: RunConfig) -> RunConfig | None:
    """The dense parent ``cfg`` starts from, or None."""
    return get_method(cfg.method.name)(cfg).parent_config()


class Parents:
    """The dense parent of each run (run id and config), computed once per run id: a
    paper-scale plan has thousands of runs and a handful of parents, and the cost and disk
    lines of one dry run both ask for every run's parent."""

    def __init__(self) -> None:
        self._of: dict[tuple[str, str], tuple[str, RunConfig] | None] = {}

    def of(self, run_id: str, cfg: RunConfig) -> tuple[str, RunConfig] | None:
        """(run id, config) of the dense parent run ``run_id`` (config ``cfg``) starts from,
        or None."""
        # Keyed by the data folder too: ``reproduce --data-root`` points a plan's configs at
        # another folder under the same run ids, and their parents must read from it as well.
        key = (run_id, cfg.data.root)
        if key not in self._of:
            parent = parent_of(cfg)
            self._of[key] = None if parent is None else (parent.run_id, parent)
        return self._of[key]
