"""Configuration: TOML round trip, overrides, validation before compute, stable run ids."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from benchmark.cli import main
from benchmark.config.parse import config_from_dict, config_to_toml, dataclass_from_dict
from benchmark.config.run import IDENTITY_VERSION, RunConfig, canonical_dict, run_id, run_identity
from benchmark.core.errors import ConfigError
from benchmark.training.validation import load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_defaults_are_bimp_on_digits() -> None:
    cfg = load_config()
    assert cfg.data.name == "digits"
    assert cfg.method.name == "bimp"
    assert cfg.method.params.schedule == "ALLR"
    assert cfg.budget.initial_epochs > 0


def test_toml_file_and_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
seed = 3
[optim]
weight_decay = 1e-4
nesterov = true
[method]
name = "imp"
sparsity = 0.95
schedule = "LLR"
[budget]
epochs = 6
cycles = 3
""",
    )
    cfg = load_config(path, ["method.sparsity=0.98", "schedule.lr=0.05", "method.criterion=lamp"])
    assert cfg.seed == 3
    assert cfg.optim.nesterov is True and cfg.optim.weight_decay == 1e-4
    assert cfg.method.sparsity == 0.98 and cfg.method.params.schedule == "LLR"
    assert cfg.method.params.criterion == "lamp"  # bare strings need no quotes
    assert cfg.schedule.lr == 0.05 and cfg.budget.cycles == 3


def test_toml_round_trip_preserves_config_and_id(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        [
            "method.name=imp",
            "budget.epochs=4",
            "method.retrain_epochs=[1, 3]",
            "budget.cycles=2",
            "schedule.name=stepped",
            "schedule.milestones=[2.0]",
            "schedule.values=[0.01]",
        ],
    )
    text = config_to_toml(cfg)
    again = load_config(write(tmp_path, text))
    assert again == cfg
    assert again.run_id == cfg.run_id


def test_int_is_accepted_for_float() -> None:
    cfg = config_from_dict({"schedule": {"lr": 1}})
    assert isinstance(cfg.schedule.lr, float)


@pytest.mark.parametrize(
    ("overrides", "field", "fragment"),
    [
        (["method.sparsity=1.0"], "method.sparsity", "[0, 1)"),
        (["method.sparsity=-0.1"], "method.sparsity", "[0, 1)"),
        (["budget.epochs=0"], "budget.epochs", "> 0"),
        (
            ["budget.initial_epochs=10", "budget.epochs=10"],
            "budget.initial_epochs",
            "[1, budget.epochs)",
        ),
        (["budget.initial_epochs=0"], "budget.initial_epochs", "[1, budget.epochs)"),
        (["budget.cycles=9"], "budget.cycles", "at most the retraining epochs"),
        (["data.name=mnist"], "data.name", "'cifar10'"),
        (["model.name=resnet7"], "model.name", "'resnet56'"),
        (["method.name=magic"], "method.name", "'bimp'"),
        (["method.schedule=XYZ"], "method.schedule", "'ALLR'"),
        (["method.criterion=best"], "method.criterion", "'global'"),
        (["method.warmup_fraction=0.5"], "method.warmup_fraction", "0 or 0.1"),
        (["optim.momentum=1.5"], "optim.momentum", "[0, 1)"),
        (["optim.nesterov=1"], "optim.nesterov", "true or false"),
        (["budget.epochs=ten"], "budget.epochs", "an integer"),
        (["data.colour=1"], "data.colour", "batch_size"),
        (["method.sparsity_goal=0.9"], "method.sparsity_goal", "criterion"),
        (["oops.key=1"], "oops", "the key oops is unknown (value {'key': 1}); allowed: a section"),
        (["runtime.device=tpu"], "runtime.device", "'cuda'"),
        (["budget.initial_epochs=-1"], "budget.initial_epochs", ">= 0"),
        (["method.retrain_epochs=[1, 1, 1]"], "method.retrain_epochs", "budget.cycles"),
    ],
)
def test_invalid_values_name_field_and_allowed(
    overrides: list[str], field: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    assert info.value.field == field
    assert fragment in str(info.value)


def test_cli_rejects_bad_config_with_status_2_and_writes_nothing(tmp_path: Path, capsys) -> None:
    store = tmp_path / "store"
    code = main(["run", "--set", f"output.dir='{store}'", "--set", "method.sparsity=1.5"])
    assert code == 2
    err = capsys.readouterr().err
    assert "method.sparsity" in err and "[0, 1)" in err
    assert not store.exists()


def test_cli_exit_status_in_a_real_process(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmark.cli",
            "run",
            "--set",
            "data.name=mnist",
            "--set",
            f"output.dir='{tmp_path / 's'}'",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "data.name" in out.stderr and "digits" in out.stderr
    assert not (tmp_path / "s").exists()


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.toml")
    assert info.value.field == "config"


def test_print_config_emits_loadable_toml(tmp_path: Path, capsys) -> None:
    assert main(["run", "--print-config", "--set", "method.sparsity=0.8"]) == 0
    text = capsys.readouterr().out
    assert "sparsity = 0.8" in text
    cfg = load_config(write(tmp_path, text))
    assert cfg.method.sparsity == 0.8


def test_run_id_ignores_defaults_and_non_identity_sections() -> None:
    base = load_config()
    assert canonical_dict(base) == {
        "budget": {"initial_epochs": 7, "cycles": 2},
        "method": {"name": "bimp"},
    }
    explicit_default = load_config(None, ["optim.momentum=0.9", "method.schedule='ALLR'"])
    assert explicit_default.run_id == base.run_id
    elsewhere = load_config(
        None, ["output.dir='/tmp/x'", "logging.progress=false", "runtime.device='cpu'"]
    )
    assert elsewhere.run_id == base.run_id
    # Where and how the files are read: the same run on a cluster whose data lives elsewhere.
    reading = ["data.root='/datasets'", "data.workers=8", "data.download=true"]
    assert load_config(None, [*reading, "data.check_integrity=false"]).run_id == base.run_id
    assert "data" not in canonical_dict(load_config(None, reading))
    assert load_config(None, ["data.eval_batch_size=512"]).run_id != base.run_id
    assert load_config(None, ["seed=1"]).run_id != base.run_id
    assert load_config(None, ["method.sparsity=0.95"]).run_id != base.run_id


def test_budget_fields_a_method_ignores_are_not_identity() -> None:
    a = load_config(None, ["method.name=imp", "budget.initial_epochs=3"])
    b = load_config(None, ["method.name=imp", "budget.initial_epochs=5"])
    assert a.run_id == b.run_id
    c = load_config(None, ["budget.initial_epochs=5"])  # bimp reads T0
    assert c.run_id != load_config().run_id


@pytest.mark.parametrize("method", ["cs", "str", "dst"])
def test_goal_sparsity_is_not_identity_of_methods_that_ignore_it(method: str) -> None:
    a = load_config(None, [f"method.name={method}", "method.sparsity=0.5"])
    b = load_config(None, [f"method.name={method}", "method.sparsity=0.95"])
    assert a.run_id == b.run_id
    assert "sparsity" not in canonical_dict(a).get("method", {})
    # a hyperparameter the method does read still moves the id
    other = {"cs": "method.l1=1e-9", "str": "method.s_init=-3.0", "dst": "method.alpha=1e-6"}
    assert load_config(None, [f"method.name={method}", other[method]]).run_id != a.run_id


def test_run_id_is_stable_across_field_additions() -> None:
    # A new field with a default is left out of the canonical dict, so ids never move.
    cfg = RunConfig()
    assert "finetune" not in canonical_dict(cfg)


# Literal ids: if one of these changes, every stored result would be orphaned. They moved on
# purpose with IDENTITY_VERSION 2 (PyTorch-default init, Nesterov when weight decay > 0, the
# reference WRN-28-10) and 3 (the reference's pruning counts, CS's temperature at evaluation,
# data-parallel runs normalising BatchNorm over the whole batch): the same configs compute
# something else since, so results stored before must not be found under them. The ids of
# version 1 are kept in OLD_IDS, those of version 2 in V2_IDS.
RESNET56_DENSE = (
    "method.name=dense",
    "data.name=cifar10",
    "model.name=resnet56",
    "budget.epochs=200",
    "schedule.name=stepped",
    "schedule.milestones=[90, 180]",
    "schedule.values=[0.01, 0.001]",
)
PINNED_IDS = {
    (): "bimp-27c0bc54d546",
    ("method.sparsity=0.95",): "bimp-d03b050c29d2",
    ("method.name=imp", "method.schedule=FT", "budget.epochs=5"): "imp-326a5e22eb7a",
    RESNET56_DENSE: "dense-053a5dcaa696",
}
# IDENTITY_VERSION 2: a multi-process run stored per-process BatchNorm under these ids.
V2_IDS = {
    (): "bimp-2a554cecf8f8",
    ("method.sparsity=0.95",): "bimp-905b517dce44",
    ("method.name=imp", "method.schedule=FT", "budget.epochs=5"): "imp-3f9ef8784154",
    RESNET56_DENSE: "dense-e64ee347c4bd",
}
# The same configs' ids before IDENTITY_VERSION 2 (He-normal init, plain momentum).
OLD_IDS = {
    (): "bimp-9d938b73dad5",
    ("method.sparsity=0.95",): "bimp-c496de584b15",
    ("method.name=imp", "method.schedule=FT", "budget.epochs=5"): "imp-3cede9ba7939",
    RESNET56_DENSE: "dense-8cacdd78292d",
}


@pytest.mark.parametrize(("overrides", "expected"), list(PINNED_IDS.items()))
def test_pinned_run_ids(overrides: tuple[str, ...], expected: str) -> None:
    assert run_id(load_config(None, list(overrides))) == expected


@pytest.mark.parametrize(("overrides", "old"), list(V2_IDS.items()))
def test_version_2_run_ids_no_longer_collide(overrides: tuple[str, ...], old: str) -> None:
    cfg = load_config(None, list(overrides))
    text = json.dumps({**run_identity(cfg), "identity_version": 2}, sort_keys=True,
                      separators=(",", ":"))  # fmt: skip
    assert f"{cfg.method.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}" == old
    assert run_id(cfg) != old and run_identity(cfg)["identity_version"] >= 3


def _unversioned_id(cfg: RunConfig) -> str:
    # How ids were computed before IDENTITY_VERSION existed: the canonical dict alone.
    text = json.dumps(canonical_dict(cfg), sort_keys=True, separators=(",", ":"))
    return f"{cfg.method.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@pytest.mark.parametrize(("overrides", "old"), list(V2_IDS.items()))
def test_version_2_ids_are_the_same_configs_hashed_with_version_2(
    overrides: tuple[str, ...], old: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the version moved these ids (issue 25 added no field that these configs set).
    cfg = load_config(None, list(overrides))
    assert run_id(cfg) != old
    monkeypatch.setattr("benchmark.config.run.IDENTITY_VERSION", 2)
    assert run_id(cfg) == old


@pytest.mark.parametrize(("overrides", "old"), list(OLD_IDS.items()))
def test_old_run_ids_no_longer_collide(overrides: tuple[str, ...], old: str) -> None:
    cfg = load_config(None, list(overrides))
    # The canonical configs did not change (no new field is set): only the version moved the
    # id, and the old hashing still reproduces the stored id ...
    assert _unversioned_id(cfg) == old
    # ... which the new id never equals, for this config or any variant of the new fields.
    variants = [cfg] + [
        load_config(None, [*overrides, *extra])
        for extra in (["model.init=he_normal"], ["optim.nesterov=false"], ["optim.nesterov=true"])
    ]
    new_ids = {run_id(v) for v in variants}
    assert old not in new_ids and set(OLD_IDS.values()).isdisjoint(new_ids)
    assert run_identity(cfg)["identity_version"] == IDENTITY_VERSION >= 3


def test_new_defaults_are_in_the_run_identity_only_when_changed() -> None:
    base = load_config()
    assert base.model.init == "default" and base.optim.nesterov is None
    he = load_config(None, ["model.init=he_normal"])
    assert canonical_dict(he)["model"] == {"init": "he_normal"}
    assert he.run_id != base.run_id
    forced = load_config(None, ["optim.nesterov=false"])
    assert canonical_dict(forced)["optim"] == {"nesterov": False}
    assert forced.run_id != base.run_id


@pytest.mark.parametrize(
    ("overrides", "nesterov"),
    [
        ([], True),  # weight decay 5e-4 > 0: the paper's code's rule
        (["optim.weight_decay=0"], False),
        (["optim.weight_decay=0", "optim.nesterov=true"], True),
        (["optim.nesterov=false"], False),
        (["optim.momentum=0"], False),
    ],
)
def test_nesterov_follows_the_reference_rule_unless_set(
    overrides: list[str], nesterov: bool
) -> None:
    assert load_config(None, overrides).optim.use_nesterov() is nesterov


def test_nesterov_without_momentum_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, ["optim.momentum=0", "optim.nesterov=true"])
    assert info.value.field == "optim.nesterov"


def test_unknown_init_names_the_field_and_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(None, ["model.init=xavier"])
    assert info.value.field == "model.init" and "'he_normal'" in str(info.value)


def test_schedule_warmup_is_checked_against_the_epochs_it_spans() -> None:
    # IMP's original schedule is the dense parent's (20 epochs): a 5-epoch warm-up fits even
    # though IMP itself retrains for 2 epochs.
    cfg = load_config(
        None,
        [
            "method.name=imp",
            "method.parent_epochs=20",
            "budget.epochs=2",
            "budget.cycles=1",
            "schedule.warmup_epochs=5",
        ],
    )
    assert cfg.schedule.warmup_epochs == 5
    with pytest.raises(ConfigError) as info:
        load_config(None, ["method.name=dense", "budget.epochs=4", "schedule.warmup_epochs=5"])
    assert info.value.field.startswith("schedule.")


def test_a_parsed_config_shares_nothing_with_its_dict() -> None:
    data = {
        "schedule": {"name": "stepped", "milestones": [1.0, 2.0], "values": [0.1, 0.01]},
        "method": {"name": "bimp", "exclude": ["fc"]},
    }
    cfg = config_from_dict(data)
    data["schedule"]["milestones"].append(3.0)
    data["method"]["exclude"].clear()
    data["schedule"]["name"] = "linear"
    assert cfg.schedule.milestones == [1.0, 2.0] and cfg.schedule.name == "stepped"
    assert cfg.method.exclude == ["fc"]


@dataclass
class PluginParams:
    """Hyperparameters an outside method may declare: tables, anything."""

    weights: dict[str, float] = field(default_factory=dict)
    extra: Any = None


def test_a_value_of_an_unchecked_annotation_is_copied() -> None:
    data = {"weights": {"a": 1.0}, "extra": {"nested": [1, 2]}}
    params = dataclass_from_dict(PluginParams, data, "method")
    data["weights"]["a"] = 2.0
    data["extra"]["nested"].append(3)
    assert params.weights == {"a": 1.0} and params.extra == {"nested": [1, 2]}
