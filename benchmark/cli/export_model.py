"""``prunebench export-model RUN_ID FOLDER``: a finished language-model run's final weights as a
standard ``save_pretrained`` folder that loads anywhere transformers does.

The folder holds ``config.json`` (the run's architecture, ``dtype`` its ``model.dtype``),
``model.safetensors`` (the final weights: pruned entries are zeros, adapters merged), the
tokenizer the run read its text with (``save_pretrained``; bytes as a byte-level tokenizer with
the same ids), and ``prunebench_run.json`` (the run's record: its config and metrics, the
recorded perplexity among them). ``AutoModelForCausalLM.from_pretrained(FOLDER)`` and
``AutoTokenizer.from_pretrained(FOLDER)`` give the model the run evaluated.

Nothing is overwritten: FOLDER must be new or empty. The folder is written beside its place
under a temporary name and renamed into it when complete, so an interrupted export leaves no
half-written model folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmark.config.run import DEFAULT_STORE
from benchmark.core.errors import ConfigError
from benchmark.core.files import FILE_MODE

RECORD_FILE = "prunebench_run.json"


def add_parsers(sub: Any) -> None:
    """Register ``export-model`` on the ``prunebench`` sub-parser set."""
    p = sub.add_parser(
        "export-model",
        help="write a finished language-model run's final weights as a save_pretrained folder",
        description="Write the final (pruned, retrained, merged) weights of a finished "
        "language-model run as a standard transformers save_pretrained folder: config.json, "
        "model.safetensors (pruned weights stored as zeros), the run's tokenizer and the run's "
        "record (prunebench_run.json). FOLDER must be new or empty: nothing is overwritten.",
    )
    p.add_argument("run", metavar="RUN_ID", help="run id of a finished language-model run")
    p.add_argument("folder", metavar="FOLDER", help="the folder to write (new or empty)")
    p.add_argument("--store", default=DEFAULT_STORE, help="results store folder")


def check_target(folder: Path) -> None:
    """Refuse a FOLDER that exists as a file or a folder with anything in it."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(
            "FOLDER",
            str(folder),
            "a new or empty folder (export-model never overwrites; this one "
            f"{'is a file' if not folder.is_dir() else 'has files in it'})",
        )


def finished_lm_run(store_dir: str, run_id: str) -> tuple[dict[str, Any], Path]:
    """The record and weights file of the finished language-model run ``run_id``; a
    ConfigError naming RUN_ID (and the allowed runs) otherwise."""
    from benchmark.models.causal_lm import LM_MODELS
    from benchmark.store.results import FINISHED, Store

    store = Store(store_dir)
    record = store.read(run_id)
    if record is None or record.get("status") != FINISHED:
        state = "not in the store" if record is None else f"{record.get('status')}, not finished"
        raise ConfigError("RUN_ID", run_id, f"the id of a finished run in {store_dir} ({state})")
    model = (record.get("config") or {}).get("model", {}).get("name")
    if model not in LM_MODELS:
        raise ConfigError(
            "RUN_ID",
            run_id,
            f"a language-model run (model.name one of {', '.join(LM_MODELS)}); this run's "
            f"model.name is {model!r}",
        )
    weights = store.weights_path(run_id)
    if not weights.is_file():
        raise ConfigError(
            "RUN_ID",
            run_id,
            f"a run whose final weights are kept ({weights} is missing: `prunebench free` "
            "removes weights no table needs; rerun the run with --force to have them again)",
        )
    return record, weights


def export_model(run_id: str, folder: Path, store_dir: str) -> Path:
    """Write run ``run_id``'s final model, tokenizer and record into ``folder`` (see the module
    docstring); returns the folder."""
    from benchmark.config.parse import config_from_dict
    from benchmark.core.files import load_checkpoint
    from benchmark.data.lm_tokenizer import check_tokenizer_folder
    from benchmark.models.lm_export import lm_from_state, model_folder

    check_target(folder)
    record, weights = finished_lm_run(store_dir, run_id)
    cfg = config_from_dict(record["config"])
    if cfg.model.name == "causal_lm":
        model_folder(cfg.model.pretrained)  # the configuration is read from there
    if cfg.data.tokenizer not in ("", "bytes"):
        check_tokenizer_folder(cfg.data.tokenizer)
    model = lm_from_state(cfg.model.name, cfg.model.pretrained, load_checkpoint(weights))
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        _write(staging, model, cfg.data.tokenizer, record)
        if folder.exists():
            folder.rmdir()  # empty (checked): the complete folder takes its place
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def _write(folder: Path, model: Any, tokenizer: str, record: dict[str, Any]) -> None:
    """The model (safetensors), its tokenizer and the run's record, into ``folder``."""
    from transformers.utils import logging

    from benchmark.data.lm_tokenizer import save_tokenizer

    logging.disable_progress_bar()  # one line says what was written
    model.save_pretrained(folder, safe_serialization=True)
    save_tokenizer(tokenizer, folder)
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    # Modes as a plain mkdir and open() give them (the staging folder was private while written).
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for path in folder.iterdir():
        path.chmod(FILE_MODE & ~umask)


def cmd_export_model(args: argparse.Namespace) -> int:
    """``prunebench export-model RUN_ID FOLDER``."""
    folder = export_model(args.run, Path(args.folder), args.store)
    metrics = (json.loads((folder / RECORD_FILE).read_text()).get("metrics") or {}).get("test")
    ppl = f" (test perplexity {metrics['ppl']:.4g})" if metrics and "ppl" in metrics else ""
    print(f"wrote run {args.run}{ppl} to {folder}: load it with "
          f"AutoModelForCausalLM.from_pretrained({str(folder)!r})")  # fmt: skip
    return 0


COMMANDS = {"export-model": cmd_export_model}
