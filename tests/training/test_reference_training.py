"""The paper's runs train as its code did: Nesterov momentum whenever weight decay > 0."""

from __future__ import annotations

import pytest

from benchmark.config.parse import config_from_dict
from benchmark.experiments import EXPERIMENTS, get_experiment, problems
from benchmark.experiments.base import Problem

PROBLEMS = [v for v in vars(problems).values() if isinstance(v, Problem)]


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_every_problem_trains_with_nesterov_at_each_of_its_weight_decays(problem, tmp_path):
    for wd in problem.weight_decays:
        data = problem.base(tmp_path) | {"optim": {"weight_decay": wd}}
        cfg = config_from_dict(data)
        assert wd > 0 and cfg.optim.momentum == 0.9
        assert cfg.optim.use_nesterov()


def _check_nesterov(name: str, scale: str, store) -> int:
    runs = get_experiment(name).runs(scale, store)
    for run in runs:
        o = run.cfg.optim
        assert o.use_nesterov() is (o.weight_decay > 0), (name, run.cfg.run_id)
    return len(runs)


def test_every_smoke_run_uses_nesterov_exactly_when_weight_decay_is_positive(tmp_path):
    assert sum(_check_nesterov(name, "smoke", tmp_path) for name in EXPERIMENTS.names()) > 100


@pytest.mark.slow
@pytest.mark.parametrize("name", EXPERIMENTS.names())
def test_every_paper_run_uses_nesterov_exactly_when_weight_decay_is_positive(name, tmp_path):
    _check_nesterov(name, "paper", tmp_path)
