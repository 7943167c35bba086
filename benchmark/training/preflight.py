"""The checks a run passes before any compute, in one place: for one run (``run`` and every
executed run) and for a whole plan (``reproduce`` and ``submit``, before their first run).

Before anything is written, a run's values are validated, its device and store are checked,
the named weights it loads must be on this machine, and its dataset's files must be where it
reads them. A plan of thousands of runs shares a handful of devices, stores, models and data
sections: each distinct check is made once, and a failing one names a run it stops (and how
many more it would have stopped).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError, DatasetError, check
from benchmark.core.files import make_dirs
from benchmark.data.presence import check_data_files
from benchmark.models.pretrained import require_available
from benchmark.tasks.zero_shot import check_zero_shot_data
from benchmark.training.lm_checks import check_lm_files
from benchmark.training.passes import Parents
from benchmark.training.validation import validate
from methods import get_method


def check_runtime(cfg: RunConfig) -> None:
    """Refuse, before anything is written, a device this machine lacks or an unwritable store."""
    check_device(cfg)
    check_store(cfg)


def check_device(cfg: RunConfig) -> None:
    """Refuse a ``runtime.device`` this machine lacks."""
    dev = cfg.runtime.device
    if dev.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(dev.split(":", 1)[1]) if ":" in dev else 0
        check(
            index < count,
            "runtime.device",
            dev,
            f"a device this machine has: {count} CUDA device(s) here; use 'auto' or 'cpu'",
        )
    if dev == "mps":
        check(
            torch.backends.mps.is_available(),
            "runtime.device",
            dev,
            "a device this machine has: MPS is not available here; use 'auto' or 'cpu'",
        )


def check_store(cfg: RunConfig) -> None:
    """Refuse an ``output.dir`` this process cannot create or write."""
    root = Path(cfg.output.dir)
    try:
        make_dirs(root)  # group-writable inside a group-writable folder
        with tempfile.TemporaryFile(dir=root):
            pass
    except OSError as err:
        raise ConfigError(
            "output.dir", cfg.output.dir, f"a folder this process can create and write ({err})"
        ) from None


def check_weights(cfg: RunConfig) -> None:
    """Refuse, before anything is written, named pretrained weights (``model.pretrained``)
    this machine lacks, for a run that loads them: one without a dense parent (a child starts
    from its parent's weights, and its parent's own run checks them); and a language model's
    folder, tokenizer or vocabulary that do not fit
    (:func:`~benchmark.training.lm_checks.check_lm_files`)."""
    loads = get_method(cfg.method.name)(cfg).parent_config() is None
    if cfg.model.pretrained and loads:
        require_available(cfg.model.pretrained)
    check_lm_files(cfg, loads_model=loads)


def check_before_compute(cfg: RunConfig) -> None:
    """Everything a run checks before it writes anything (ConfigError, DatasetError); the
    store's folder, the one check that writes, last."""
    validate(cfg)
    check_device(cfg)
    check_weights(cfg)
    check_data_files(cfg.data)
    check_zero_shot_data(cfg)
    check_store(cfg)


# Each check of a plan, with what makes two runs' checks the same (their configs are valid:
# a plan is validated as it is built).
PLAN_CHECKS: tuple[tuple[Callable[[RunConfig], object], Callable[[RunConfig], None]], ...] = (
    (lambda c: c.runtime.device, check_device),
    (lambda c: (c.method.name, repr(c.model), repr(c.data)), check_weights),
    (lambda c: repr(c.data), lambda c: check_data_files(c.data)),
    (lambda c: tuple(c.eval.zero_shot), check_zero_shot_data),
    (lambda c: c.output.dir, check_store),
)


def check_plan(
    configs: Sequence[RunConfig],
    parents: Parents | None = None,
    finished: Callable[[str], bool] = lambda run_id: False,
    *,
    here: bool = True,
) -> None:
    """The checks of :func:`check_before_compute` for ``configs`` and the dense parents they
    start from that are not ``finished`` yet; the first failing one raised, naming its run.
    ``here``: the runs train on this machine (not on a cluster's nodes, whose devices only
    they can check)."""
    parents = parents or Parents()
    runs: dict[str, RunConfig] = {}
    for cfg in configs:
        parent = parents.of(cfg.run_id, cfg)
        if parent is not None and not finished(parent[0]):
            runs.setdefault(*parent)  # parents first: they train first
    runs.update((c.run_id, c) for c in configs)
    for key, run_check in PLAN_CHECKS[0 if here else 1 :]:
        groups: dict[object, list[RunConfig]] = {}
        for cfg in runs.values():
            groups.setdefault(key(cfg), []).append(cfg)
        for group in groups.values():
            try:
                run_check(group[0])
            except (ConfigError, DatasetError) as err:
                raise _naming(err, group[0].run_id, len(group) - 1) from None


def _naming(err: ConfigError | DatasetError, run_id: str, more: int) -> Exception:
    """``err`` saying which run it stops (and how many more of the plan share it)."""
    runs = f"run {run_id}" + (f" and {more} more of the plan" if more else "")
    if isinstance(err, ConfigError):
        return ConfigError(
            err.field,
            err.value,
            f"{err.allowed} (checked before any run started: {runs})",
            unknown=err.unknown,
            suggest=err.suggest,
        )
    return DatasetError(f"{err} (checked before any run started: {runs})")
