"""Zero-shot accuracy of a language model through lm-evaluation-harness, as the pruning papers
report it (Wanda, SparseGPT, OWL, RIA, PERP: BoolQ, RTE, HellaSwag, WinoGrande, ARC-e, ARC-c and
OpenBookQA), on the run's final model.

``eval.zero_shot`` lists the tasks: lm-eval task names, paths of lm-eval task YAML files, or
``pydoc_cloze`` (the shipped smoke task, ``zero_shot_tasks/``). lm-eval is an optional extra
(``pip install -e '.[llm]'``). Nothing is downloaded: a named task's data come from the local
Hugging Face datasets cache, a YAML task's from the files it names (``data_files`` relative to
the YAML's folder); a task whose data are not there is a config error before any compute. Only
log-likelihood tasks (multiple choice) are evaluated, with no few-shot examples; the model is
scored by :class:`benchmark.tasks.lm_eval_adapter.HarnessLM` with the run's tokenizer.

The record (``zero_shot``) holds per task ``acc`` and, where the task defines it, ``acc_norm``
(accuracy with each choice's log-likelihood divided by its length in characters), the number of
examples and the task's version; ``mean_acc`` averages ``acc`` over the tasks and
``mean_acc_norm`` ``acc_norm`` where there is one (else ``acc``); and the lm-eval version, the
few-shot count (0) and the batch size.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.core.errors import ConfigError, check

if TYPE_CHECKING:
    from torch import nn

    from benchmark.config.run import RunConfig

FIELD = "eval.zero_shot"
TASKS_DIR = Path(__file__).parent / "zero_shot_tasks"
SHIPPED = {"pydoc_cloze": TASKS_DIR / "pydoc_cloze.yaml"}
# The tasks of Wanda's, OWL's and RIA's zero-shot tables (lm-eval names).
PAPER_TASKS = ("boolq", "rte", "hellaswag", "winogrande", "arc_easy", "arc_challenge", "openbookqa")
OUTPUT_TYPES = ("multiple_choice", "loglikelihood")
INSTALL = "lm-eval installed (pip install -e '.[llm]')"


def lm_eval_version() -> str | None:
    """The installed lm-eval's version, None when it is not installed."""
    try:
        return metadata.version("lm_eval")
    except metadata.PackageNotFoundError:
        return None


def is_yaml(entry: str) -> bool:
    """Whether an ``eval.zero_shot`` entry names a task YAML file (else a task name)."""
    return entry.endswith((".yaml", ".yml"))


def validate_zero_shot(cfg: RunConfig, language_model: bool) -> None:
    """The checks that need neither data nor lm-eval (a plan is made without them): the
    entries and that the model is a ``language_model``."""
    tasks, batch = cfg.eval.zero_shot, cfg.eval.zero_shot_batch_size
    check(batch >= 1, "eval.zero_shot_batch_size", batch, "an integer >= 1")
    if not tasks:
        return
    check(
        language_model,
        FIELD,
        tasks,
        f"[] for model.name = {cfg.model.name!r} (zero-shot tasks score language models)",
    )
    check(len(set(tasks)) == len(tasks), FIELD, tasks, "tasks named once each")
    for entry in tasks:
        check(bool(entry.strip()), FIELD, entry, "a task name or a task YAML file")
        if is_yaml(entry):
            check(Path(entry).is_file(), FIELD, entry, "an existing lm-eval task YAML file")


def task_spec(entry: str) -> str | dict[str, Any]:
    """What lm-eval loads for an entry: a task name, or a YAML's config with its data files'
    relative paths resolved against the YAML's folder."""
    path = SHIPPED.get(entry) or (Path(entry) if is_yaml(entry) else None)
    if path is None:
        return entry
    config = _read_yaml(path)
    kwargs = copy.deepcopy(config.get("dataset_kwargs") or {})
    files = kwargs.get("data_files")
    if isinstance(files, dict):
        kwargs["data_files"] = {k: _beside(path, v) for k, v in files.items()}
    elif files is not None:
        kwargs["data_files"] = _beside(path, files)
    if kwargs:
        config["dataset_kwargs"] = kwargs
    return config


def _read_yaml(path: Path) -> dict[str, Any]:
    """A task YAML as lm-eval reads it (``!function`` tags and ``include`` resolved)."""
    try:
        from lm_eval.tasks._yaml_loader import load_yaml  # lm-eval >= 0.4.10
    except ImportError:
        from lm_eval.utils import load_yaml_config  # earlier 0.4 releases

        return load_yaml_config(yaml_path=str(path))
    return load_yaml(path, resolve_func=True)


def _beside(yaml: Path, files: str | list[str]) -> str | list[str]:
    """Data file paths relative to the YAML's folder made absolute."""
    if isinstance(files, list):
        return [str(yaml.parent / f) for f in files]
    return str(yaml.parent / files)


@contextmanager
def offline() -> Iterator[None]:
    """Hugging Face Hub and datasets offline while the tasks load: nothing is downloaded."""
    import datasets.config
    import huggingface_hub.constants as hub

    config = datasets.config
    saved = (config.HF_HUB_OFFLINE, config.HF_DATASETS_OFFLINE, hub.HF_HUB_OFFLINE)
    config.HF_HUB_OFFLINE = config.HF_DATASETS_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        config.HF_HUB_OFFLINE, config.HF_DATASETS_OFFLINE, hub.HF_HUB_OFFLINE = saved


def load_tasks(entries: Sequence[str]) -> dict[str, Any]:
    """The lm-eval task objects of ``entries`` (name -> task), their data loaded offline; a
    task lm-eval does not know, whose data are missing or that is not multiple choice is a
    ConfigError naming it."""
    from lm_eval.tasks import TaskManager

    specs = [task_spec(e) for e in entries]
    # lm-eval indexes its own tasks (seconds) only when a name needs them.
    manager = TaskManager(include_defaults=any(isinstance(s, str) for s in specs))
    out: dict[str, Any] = {}
    for entry, spec in zip(entries, specs, strict=True):
        try:
            with offline():
                tasks = manager.load([spec])["tasks"]
        except Exception as err:  # lm-eval and datasets raise many kinds; name the task
            raise ConfigError(
                FIELD,
                entry,
                "a multiple-choice lm-eval task whose data are in the local Hugging Face "
                f"datasets cache or in local files (nothing is downloaded): {err}",
            ) from None
        for name, task in tasks.items():  # a group's tasks one by one
            kind = task.get_config("output_type")
            check(kind in OUTPUT_TYPES, FIELD, entry, f"a task of output type {OUTPUT_TYPES} "
                  f"({name} is {kind!r})")  # fmt: skip
            out[name] = task
    return out


def check_zero_shot_data(cfg: RunConfig) -> None:
    """Before any compute: lm-eval is installed and every zero-shot task loads offline (see
    :func:`load_tasks`)."""
    if cfg.eval.zero_shot:
        check(lm_eval_version() is not None, FIELD, cfg.eval.zero_shot, INSTALL)
        load_tasks(cfg.eval.zero_shot)


def evaluate_zero_shot(model: nn.Module, encode: Any, cfg: RunConfig) -> dict[str, Any]:
    """The zero-shot record of ``model`` (see the module docstring); ``encode``: the run's
    tokenizer."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from benchmark.measure.metrics import eval_mode
    from benchmark.tasks.lm_eval_adapter import HarnessLM

    tasks = load_tasks(cfg.eval.zero_shot)
    batch = cfg.eval.zero_shot_batch_size
    with eval_mode(model), offline():
        results = lm_eval.simple_evaluate(
            model=HarnessLM(model, encode, batch),
            tasks=list(tasks.values()),
            num_fewshot=0,
            batch_size=batch,
            bootstrap_iters=0,
            log_samples=False,
            random_seed=cfg.seed,
            numpy_random_seed=cfg.seed,
            torch_random_seed=cfg.seed,
            fewshot_random_seed=cfg.seed,
            # The tasks are built: no index of lm-eval's own (seconds) is needed.
            task_manager=TaskManager(include_defaults=False),
        )
    assert results is not None
    per_task = {}
    for name in tasks:
        scores = results["results"][name]
        entry = {"acc": float(scores["acc,none"])}
        if "acc_norm,none" in scores:
            entry["acc_norm"] = float(scores["acc_norm,none"])
        entry["examples"] = int(results["n-samples"][name]["effective"])
        entry["version"] = results["versions"].get(name)
        per_task[name] = entry
    accs = [t["acc"] for t in per_task.values()]
    norms = [t.get("acc_norm", t["acc"]) for t in per_task.values()]
    return {
        "tasks": per_task,
        "mean_acc": sum(accs) / len(accs),
        "mean_acc_norm": sum(norms) / len(norms),
        "lm_eval": lm_eval_version(),
        "num_fewshot": 0,
        "batch_size": batch,
    }
