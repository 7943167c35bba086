"""Two changes of what ``optim.grad_clip > 0`` computes for language models (PERP's adapters
clipped with the model; a dense parent trained here unclipped) move exactly the ids of the configs
an earlier version ran differently, and no other id."""

from __future__ import annotations

import hashlib
import json

import pytest

from benchmark.config.run import RunConfig, run_id, run_identity
from benchmark.experiments.registry import get_experiment
from benchmark.training.validation import load_config
from methods._llm import OneShotLM

LM = [*OneShotLM.contract_settings, "method.name=oneshot_magnitude"]
PERP = [*LM, "method.adapter=masklora", "optim.grad_clip=1.0"]
PARENT = [*LM, "method.retrain=full", "method.parent_epochs=1", "optim.grad_clip=1.0"]
# The ids main gave these configs before the marks (the code that clipped the parent with its
# child and left PERP's adapters unclipped ran them under these ids too).
UNMARKED_IDS = {
    tuple(PERP): "oneshot_magnitude-7a0d80f9e72d",
    tuple(PARENT): "oneshot_magnitude-09a7f3c831ee",
}


def _unmarked_id(cfg: RunConfig) -> str:
    """The id without the marks (how main computed every id before them)."""
    identity = {k: v for k, v in run_identity(cfg).items() if k != "changed"}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return f"{cfg.method.name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@pytest.mark.parametrize(
    ("overrides", "marks"),
    [
        (PERP, {"adapters_clipped": True}),
        (PARENT, {"parent_unclipped": True}),
        ([*PERP, "method.parent_epochs=1"], {"adapters_clipped": True, "parent_unclipped": True}),
    ],
)
def test_affected_configs_get_a_new_id(overrides: list[str], marks: dict[str, bool]) -> None:
    cfg = load_config(None, overrides)
    assert run_identity(cfg)["changed"] == marks
    assert run_id(cfg) != _unmarked_id(cfg)
    if tuple(overrides) in UNMARKED_IDS:
        assert _unmarked_id(cfg) == UNMARKED_IDS[tuple(overrides)]


@pytest.mark.parametrize(
    "overrides",
    [
        LM,  # no clipping
        [*PERP[:-1]],  # PERP's adapters, no clipping
        [*PERP[:-2], "method.adapter=none", "optim.grad_clip=1.0"],  # no adapters, no parent
        [*PERP, "method.head=lora"],  # method.head is newer than the change: no old id
        [*PARENT, "data.train_windows=documents"],  # likewise
        [*PARENT[:-1]],  # a parent, no clipping
    ],
)
def test_unaffected_configs_keep_their_id(overrides: list[str]) -> None:
    cfg = load_config(None, overrides)
    assert "changed" not in run_identity(cfg)
    assert run_id(cfg) == _unmarked_id(cfg)


@pytest.mark.parametrize(
    "spec_id",
    ["llm-oneshot-wikitext2", "llm-owl", "llm-retraining-perp", "llm-ria", "llm-zero-shot"],
)
def test_shipped_specs_are_marked_only_where_an_earlier_version_ran_them_differently(
    spec_id: str, tmp_path
) -> None:
    # Every spec keeps its ids but the smoke "Full" row of llm-retraining-perp: full retraining
    # clipped at 1.0 from a parent trained here, which the code before clipped too.
    marked = {
        (scale, r.row, r.cfg.run_id)
        for scale in ("smoke", "paper")
        for r in get_experiment(spec_id).runs(scale, tmp_path)
        if "changed" in run_identity(r.cfg)
    }
    if spec_id != "llm-retraining-perp":
        assert not marked
        return
    assert {(scale, row) for scale, row, _ in marked} == {("smoke", "Full")}
    assert len({rid for *_, rid in marked}) == 4  # two schedules, two seeds
