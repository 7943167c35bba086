"""Grid files: cartesian, zipped and per-method axes, presets, run ids, errors naming the axis."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from benchmark.cli import main
from benchmark.config.parse import config_from_dict, config_to_dict
from benchmark.core.errors import ConfigError
from benchmark.launch import grid_nodes, load_profile
from benchmark.launch.expansion import expand
from benchmark.launch.grid import grid_from_dict, load_grid
from benchmark.store.results import Store
from benchmark.training.validation import load_config

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "slurm" / "grids" / "smoke.toml"
EXAMPLE = ROOT / "slurm" / "grids" / "example.toml"

BASE = {"data": {"name": "digits"}, "budget": {"epochs": 4}}


def grid(**parts: Any) -> dict[str, Any]:
    """A grid dict named 'g' over the digits base config, plus ``parts``."""
    return {"name": "g", "base": BASE, **parts}


def test_cartesian_zip_seeds_and_method_axes() -> None:
    exp = expand(
        grid_from_dict(
            grid(
                seeds=2,
                axes={"optim.weight_decay": [1e-4, 5e-4]},
                methods={
                    "bimp": {
                        "axes": {"method.sparsity": [0.8, 0.9]},
                        "zip": [{"budget.initial_epochs": [2, 3], "budget.cycles": [2, 1]}],
                    },
                    "dense": {},
                },
            )
        )
    )
    assert exp.by_method() == {"bimp": 2 * 2 * 2 * 2, "dense": 2 * 2}
    bimp = [r.cfg for r in exp.runs if r.method == "bimp"]
    # Zipped values move together: 2 pairs, not the 4 combinations.
    assert {(c.budget.initial_epochs, c.budget.cycles) for c in bimp} == {(2, 2), (3, 1)}
    assert {c.method.sparsity for c in bimp} == {0.8, 0.9}
    assert {(c.seed, c.optim.weight_decay) for c in bimp} == {
        (s, wd) for s in (0, 1) for wd in (1e-4, 5e-4)
    }
    # The method's own axes apply only to its runs.
    dense = [r for r in exp.runs if r.method == "dense"]
    assert all("method.sparsity" not in r.values for r in dense)
    assert {r.cfg.method.sparsity for r in dense} == {0.9}
    assert len({r.run_id for r in exp.runs}) == len(exp.runs) == exp.cells


def test_bare_keys_of_a_method_table_are_its_hyperparameters() -> None:
    exp = expand(
        grid_from_dict(
            grid(
                methods={
                    "bimp": {
                        "axes": {"criterion": ["global", "uniform"]},
                        "set": {"schedule": "FT", "budget.initial_epochs": 2},
                    }
                }
            )
        )
    )
    assert {r.cfg.method.params.criterion for r in exp.runs} == {"global", "uniform"}
    assert {r.cfg.method.params.schedule for r in exp.runs} == {"FT"}


def test_same_cell_of_two_grids_is_the_same_run() -> None:
    a = expand(grid_from_dict(grid(axes={"optim.weight_decay": [1e-4, 5e-4]})))
    b = expand(grid_from_dict({**grid(axes={"seed": [0, 3]}), "name": "other"} | {"base": BASE}))
    shared = {r.run_id for r in a.runs} & {r.run_id for r in b.runs}
    single = load_config(None, ["data.name='digits'", "budget.epochs=4", "method.name='dense'"])
    single.optim.weight_decay = 5e-4
    assert shared == {single.run_id}


def test_cells_that_reach_the_same_run_are_one_run() -> None:
    # IMP does not read budget.initial_epochs: both cells are one run.
    exp = expand(grid_from_dict(grid(methods={"imp": {"axes": {"budget.initial_epochs": [0, 2]}}})))
    assert exp.cells == 2 and len(exp.runs) == 1 and exp.duplicates == 1


def test_method_name_axis_zipped_with_a_hyperparameter() -> None:
    exp = expand(
        grid_from_dict(
            grid(
                zip=[{"method.name": ["dense", "bimp"], "budget.initial_epochs": [0, 3]}],
                methods={"bimp": {"axes": {"method.sparsity": [0.5, 0.7]}}},
            )
        )
    )
    assert exp.by_method() == {"bimp": 2, "dense": 1}
    assert {r.cfg.budget.initial_epochs for r in exp.runs if r.method == "bimp"} == {3}


def test_preset_is_the_methods_grid_and_explicit_axes_override_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from methods import get_method

    preset = {"criterion": ["global", "uniform"], "optim.weight_decay": [1e-4, 5e-4]}
    monkeypatch.setattr(get_method("bimp"), "presets", {"digits": preset})
    table = {"preset": True, "set": {"budget.initial_epochs": 2}}
    exp = expand(grid_from_dict(grid(methods={"bimp": table})))
    got = {(r.cfg.method.params.criterion, r.cfg.optim.weight_decay) for r in exp.runs}
    assert got == {(c, wd) for c in preset["criterion"] for wd in preset["optim.weight_decay"]}
    narrowed = {**table, "preset": "digits", "axes": {"optim.weight_decay": [1e-3]}}
    exp = expand(grid_from_dict(grid(methods={"bimp": narrowed})))
    assert len(exp.runs) == 2 and {r.cfg.optim.weight_decay for r in exp.runs} == {1e-3}
    with pytest.raises(ConfigError, match=r"methods\.bimp\.preset = 'cifar10'.*'digits'"):
        grid_from_dict(grid(methods={"bimp": {"preset": "cifar10"}}))


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ({"axes": {"method.sparsity": [0.5, 1.5]}}, r"^axes\.method\.sparsity = 1\.5 .*\[0, 1\)"),
        ({"axes": {"optim.weight_decay": 1e-4}}, r"^axes\.optim\.weight_decay = .*non-empty list"),
        (
            {"zip": [{"budget.initial_epochs": [1, 2], "budget.cycles": [1]}]},
            r"^zip\[0\]\.budget\.cycles = \[1\] .*2 values",
        ),
        (
            {"methods": {"bimp": {"zip": [{"budget.initial_epochs": [2, 5]}]}}},
            r"^methods\.bimp\.zip\[0\]\.budget\.initial_epochs = 5 .*T0 < T",
        ),
        ({"methods": {"nope": {}}}, r"^methods\.nope = 'nope' .*'bimp'"),
        ({"methods": {"bimp": {"stepz": 1}}}, r"^the key methods\.bimp\.stepz is unknown .*axes"),
        (
            {"methods": {"bimp": {"axes": {"stepz": [1]}}}},
            r"^the key methods\.bimp\.axes\.stepz is unknown \(value 1\)",
        ),
        (
            {
                "axes": {"optim.momentum": [0.9]},
                "methods": {"dense": {"axes": {"optim.momentum": [0.5]}}},
            },
            r"^methods\.dense\.axes\.optim\.momentum = \[0\.5\] .*axes\.optim\.momentum",
        ),
        ({"axes": {"sparsity": [0.1]}}, r"^axes\.sparsity = .*dotted config key"),
        ({"axes": {"runtime.threads": [1, 2]}}, r"^axes\.runtime\.threads = .*never change"),
        ({"seeds": [0, 0]}, r"^seeds = \[0, 0\]"),
        ({"bogus": 1}, r"^the key bogus is unknown \(value 1\); allowed: a grid key"),
        ({"name": "a b"}, r"^name = 'a b'"),
        ({"base": {"optim": {"momentum": 2.0}}}, r"^base\.optim\.momentum = 2\.0 "),
        (
            {"axes": {"method.name": ["dense"]}, "methods": {"bimp": {}}},
            r"^methods\.bimp = 'bimp' .*axes\.method\.name",
        ),
    ],
)
def test_invalid_grids_name_the_axis_or_value(parts: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        expand(grid_from_dict(grid(**parts)))
    assert re.search(message, str(info.value)), str(info.value)


def test_base_may_name_a_run_config_file(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text('[data]\nname = "digits"\n[budget]\nepochs = 3\n')
    (tmp_path / "g.toml").write_text('name = "g"\nbase = "run.toml"\nseeds = [4]\n')
    (run,) = expand(load_grid(tmp_path / "g.toml")).runs
    assert run.cfg.budget.epochs == 3 and run.cfg.seed == 4


def test_settings_change_where_runs_go_but_never_their_ids(tmp_path: Path) -> None:
    g = load_grid(SMOKE)
    plain = expand(g)
    placed = expand(g, {"output.dir": str(tmp_path), "runtime.threads": 2})
    assert [r.run_id for r in plain.runs] == [r.run_id for r in placed.runs]
    assert {r.cfg.output.dir for r in placed.runs} == {str(tmp_path)}
    with pytest.raises(ValueError, match="non-identity"):
        expand(g, {"optim.momentum": 0.5})


def test_smoke_grid_trains_its_imp_parent_as_its_dense_run() -> None:
    exp = expand(load_grid(SMOKE))
    assert exp.by_method() == {"dense": 1, "bimp": 4, "imp": 2}
    nodes = grid_nodes(exp)
    dense = next(r.run_id for r in exp.runs if r.method == "dense")
    assert all(n.in_grid for n in nodes)  # the parent is the grid's own dense run
    assert {n.parent for n in nodes if n.cfg.method.name == "imp"} == {dense}


def test_example_grid_is_paper_scale_and_parses_like_single_runs() -> None:
    exp = expand(load_grid(EXAMPLE))
    counts = exp.by_method()
    assert counts["bimp"] == 3 * 3 * 4 * 4 * 4  # sparsities x seeds x wd x lr x (T0, J)
    assert counts["gmp"] == 3 * 3 * 2 * 4 * 4  # sparsities x seeds x the cifar10 preset
    pairs = {
        (r.cfg.budget.initial_epochs, r.cfg.budget.cycles) for r in exp.runs if r.method == "bimp"
    }
    assert pairs == {(180, 1), (160, 2), (140, 2), (100, 3)}
    assert {r.cfg.model.name for r in exp.runs} == {"resnet56"}
    # Cached section parsing gives exactly what parsing each whole config gives.
    for run in exp.runs[::97]:
        assert config_from_dict(config_to_dict(run.cfg)) == run.cfg


def _slurm_page() -> str:
    """The reference page of grids on SLURM (the README links to it)."""
    return (ROOT / "slurm" / "README.md").read_text()


def test_the_slurm_page_shows_the_example_grid_and_a_valid_profile(tmp_path: Path) -> None:
    section = _slurm_page()
    blocks = re.findall(r"```toml\n(.*?)```", section, flags=re.S)
    assert EXAMPLE.read_text() in blocks
    (profile,) = [b for b in blocks if "cpus_per_task" in b]
    (tmp_path / "site.toml").write_text(profile)
    loaded = load_profile(tmp_path / "site.toml")
    assert loaded.gpus_per_task >= 1 and loaded.time_min * 60 > loaded.signal_delay_s
    assert "bash slurm/dev-cluster.sh start" in section
    assert "## Try the SLURM path on one machine" in section
    assert "SLURM_DEV_ROOT" in section  # where the dev cluster keeps its state


def test_grid_show_counts_runs_and_finished_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs"
    exp = expand(load_grid(SMOKE))
    Store(store).write({"run_id": exp.runs[1].run_id, "status": "finished"})
    assert main(["grid", "show", str(SMOKE), "--store", str(store), "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "7 runs" in out and "1 finished, 0 failed, 6 not run yet" in out
    assert "methods: dense 1, bimp 4, imp 2" in out
    assert "first 3 of 7 runs" in out and exp.runs[0].run_id in out


def test_invalid_grid_is_rejected_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tomllib.loads(SMOKE.read_text())
    data["methods"]["bimp"]["axes"]["method.sparsity"] = [0.9, 1.2]
    bad = tmp_path / "bad.toml"
    bad.write_text(tomli_w.dumps(data))
    store = tmp_path / "runs"
    code = main(["submit", str(bad), "--executor", "local", "--store", str(store)])
    assert code == 2
    err = capsys.readouterr().err
    assert "methods.bimp.axes.method.sparsity = 1.2 is invalid" in err
    assert not store.exists()  # rejected before anything was submitted or written
