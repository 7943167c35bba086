"""The catalog the command line reads instead of the specs stays true to them."""

from __future__ import annotations

import json

import pytest

from benchmark.core.errors import ConfigError
from benchmark.experiments.catalog import CATALOG_FILE, build, check_id, load


@pytest.mark.slow
def test_the_catalog_file_matches_the_specs() -> None:
    # Any change to a spec, a default or the run identity moves run ids: regenerate with
    # `python -m benchmark.experiments.catalog --write`.
    fresh = json.dumps(build(), indent=1, sort_keys=True) + "\n"
    assert CATALOG_FILE.read_text() == fresh, "catalog.json is out of date (see the comment)"


def test_every_paper_table_and_figure_id_is_in_the_catalog() -> None:
    from benchmark.experiments import EXPERIMENTS

    assert sorted(load()) == sorted(EXPERIMENTS.names())


def test_an_id_check_names_the_allowed_ids_and_the_reason_for_unreproducible_ones() -> None:
    with pytest.raises(ConfigError, match="experiment id = 'nope'.*prunebench list shows them"):
        check_id("nope")
    with pytest.raises(ConfigError, match=r"did you mean cifar10-envelope\b"):
        check_id("cifar10-envelop")
    with pytest.raises(ConfigError, match="not reproducible|reproducible id"):
        check_id("methods")
    figure = next(e for e in load().values() if e.figure and not e.table)
    with pytest.raises(ConfigError, match=f"{figure.id} is a figure only: prunebench plot"):
        check_id(figure.id, "table")
    assert check_id(figure.id, "figure") is load()[figure.id]
