"""Your own checkpoint in a spec: ``--model NAME=FOLDER`` runs (and tabulates) a spec's
paper-scale grid on a local ``save_pretrained`` folder instead of the Hub model it names.

``NAME`` is one of the spec's models as its sections name them (``Llama-2-7B``), its Hub repo
(``meta-llama/Llama-2-7b-hf``) or ``hf:`` name, in any case. The folder must hold the model's
``config.json``; it is the tokenizer folder too (``data.tokenizer``), as a Hub snapshot is. The
runs get the ids of that model (``model.pretrained`` is part of the id), the rows, columns and
published values stay, and the table notes which model each section ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmark.core.errors import ConfigError

FLAG = "--model"


def parse_models(values: Sequence[str]) -> dict[str, str]:
    """``["NAME=FOLDER", ...]`` as a dict (ConfigError naming the flag when malformed)."""
    out: dict[str, str] = {}
    for value in values:
        name, sep, folder = value.partition("=")
        if not sep or not name.strip() or not folder.strip():
            raise ConfigError(FLAG, value, "NAME=FOLDER, e.g. Llama-2-7B=/models/llama-2-7b")
        out[name.strip()] = folder.strip()
    return out


def with_models(experiment: Any, values: Sequence[str], scale: str) -> Any:
    """``experiment`` with the models of ``values`` (``--model`` arguments) replaced by local
    folders; ``experiment`` itself when there are none. ConfigError, naming ``--model``, for a
    spec without Hub models, the smoke scale, an unknown name or a folder without
    ``config.json``."""
    if not values:
        return experiment
    hub = getattr(experiment, "hub_models", None)
    if hub is None:
        raise ConfigError(
            FLAG, values[0], "a spec whose paper scale loads Hub models (the language-model specs)"
        )
    if scale != "paper":
        raise ConfigError(FLAG, values[0], "a model of the paper scale: add --scale paper")
    models: dict[str, str] = hub()
    known = {}
    for section, pretrained in models.items():
        repo = pretrained.removeprefix("hf:")
        for key in (section, repo, pretrained, repo.rsplit("/", 1)[-1]):
            known[key.lower()] = section
    folders: dict[str, str] = {}
    for name, folder in parse_models(values).items():
        section = known.get(name.lower())
        if section is None:
            allowed = ", ".join(f"{s} ({p})" for s, p in models.items())
            raise ConfigError(FLAG, name, f"one of the spec's models: {allowed}")
        path = Path(folder).expanduser().resolve()
        if not (path / "config.json").is_file():
            raise ConfigError(
                FLAG, f"{name}={folder}", f"a save_pretrained folder: {path}/config.json is missing"
            )
        folders[section] = str(path)
    return experiment.with_models(folders)
