"""The forward work of a one-shot language-model run, in tokens, known before it runs.

A one-shot run (a method with a setup phase, ``methods._llm``) may train no dataset pass at all;
its work is forward passes, counted here in tokens:

* **calibration**: ``method.calibration_samples`` windows of ``data.max_length`` tokens, once
  where the criterion reads its inputs (Wanda, SparseGPT) and once more for OWL's outlier
  ratios (``method.allocation = "owl"``); magnitude pruning reads none, the dense reference
  (sparsity 0) prunes nothing;
* **evaluation**: the non-overlapping windows of ``data.max_length`` tokens of the test split
  (right after the prune and at the end) and of the validation split (at the end). How many
  windows a split has depends on its tokenised text: it is counted from the text where the
  data set's files are there (embedded data always), else left ``None``: not counted.

Zero-shot tasks and a retraining's per-epoch evaluations are not counted.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from benchmark.config.run import DataConfig, RunConfig
from benchmark.core.errors import ConfigError, DatasetError

# Evaluations of each split by a one-shot run: the test split after the prune
# (``record_prune``) and at the end, the validation split at the end (``final_metrics``).
EVALUATIONS = {"test": 2, "val": 1}


@dataclass(frozen=True)
class ForwardTokens:
    """A one-shot run's forward tokens: calibration, and evaluation (None: not counted)."""

    calibration: int
    evaluation: int | None

    @property
    def total(self) -> int | None:
        """Calibration and evaluation tokens together (None while evaluation is not counted)."""
        return None if self.evaluation is None else self.calibration + self.evaluation

    def as_dict(self) -> dict[str, int | None]:
        """The record's ``forward_tokens``."""
        return {"calibration": self.calibration, "evaluation": self.evaluation}


def calibration_passes(cfg: RunConfig) -> int:
    """Forward passes of the one-shot prune over its calibration windows (see module doc)."""
    from methods import get_method

    if cfg.method.sparsity == 0:
        return 0
    reads = bool(getattr(get_method(cfg.method.name), "calibrates", False))
    owl = getattr(cfg.method.params, "allocation", "uniform") == "owl"
    return int(reads) + int(owl)


def oneshot_tokens(
    cfg: RunConfig, windows: Mapping[str, int] | None = None
) -> ForwardTokens | None:
    """The forward tokens of ``cfg``'s one-shot phase (None for a run without one); the
    evaluation windows per split are ``windows`` where the caller has them (a run that has
    built its data), else counted from the files (:func:`eval_windows`)."""
    from benchmark.training.passes import has_setup_phase

    if not has_setup_phase(cfg):
        return None
    length = cfg.data.max_length
    samples = int(getattr(cfg.method.params, "calibration_samples", 0))
    calibration = calibration_passes(cfg) * samples * length
    found = eval_windows(cfg.data) if windows is None else windows
    if found is None:
        return ForwardTokens(calibration, None)
    evaluation = sum(times * found[split] * length for split, times in EVALUATIONS.items())
    return ForwardTokens(calibration, evaluation)


def eval_windows(data: DataConfig) -> dict[str, int] | None:
    """The evaluation windows of each split of ``data`` (its text tokenised and cut into windows
    of ``data.max_length`` tokens, as the run cuts it); None where its files or its tokenizer
    are not there."""
    from benchmark.data.presence import missing_files

    if missing_files(data):
        return None
    return _count_windows(
        data.name, data.root, data.tokenizer, data.slow_tokenizer, data.max_length
    )


@functools.cache
def _count_windows(
    name: str, root: str, tokenizer: str, slow: bool, length: int
) -> dict[str, int] | None:
    from benchmark.data.language import split_texts
    from benchmark.data.lm_tokenizer import load_tokenizer

    cfg = DataConfig(name=name, root=root, tokenizer=tokenizer, slow_tokenizer=slow)
    try:
        encode = load_tokenizer(tokenizer, slow)[0]
        texts = split_texts(cfg)
    except (ConfigError, DatasetError, OSError):
        return None
    return {split: len(encode(texts[split])) // length for split in EVALUATIONS}
