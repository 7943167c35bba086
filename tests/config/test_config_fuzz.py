"""Config fuzz: every bad value of every section exits 2, names its field and writes nothing.

Each case is a set of ``--set`` overrides on the default config and the field the error must
name. Nothing may train (the trainer's epoch raises) and the store folder must not appear.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli_run, no_training, stored_files  # noqa: F401 (no_training: a fixture)

HUGE = "18446744073709551616"  # 2**64: beyond int64
NEG_HUGE = "-18446744073709551616"

CASES: list[tuple[list[str], str]] = [
    # top level
    ([f"seed={HUGE}"], "seed"),
    (["seed=-1"], "seed"),
    (["seed=1.5"], "seed"),
    (["seed='zero'"], "seed"),
    (["seed=true"], "seed"),
    (["nosuch.key=1"], "nosuch"),
    (["data=3"], "data"),
    # data
    (["data.name='mnist'"], "data.name"),
    (["data.name=3"], "data.name"),
    (["data.batch_size=0"], "data.batch_size"),
    (["data.batch_size=-5"], "data.batch_size"),
    ([f"data.batch_size={HUGE}"], "data.batch_size"),
    (["data.batch_size=1.5"], "data.batch_size"),
    (["data.eval_batch_size=0"], "data.eval_batch_size"),
    (["data.eval_batch_size='x'"], "data.eval_batch_size"),
    (["data.val_fraction=1.5"], "data.val_fraction"),
    (["data.val_fraction=-0.1"], "data.val_fraction"),
    (["data.val_fraction=nan"], "data.val_fraction"),
    (["data.val_fraction=inf"], "data.val_fraction"),
    (["data.split_seed='a'"], "data.split_seed"),
    ([f"data.split_seed={HUGE}"], "data.split_seed"),
    (["data.workers=-1"], "data.workers"),
    ([f"data.workers={HUGE}"], "data.workers"),
    (["data.download='yes'"], "data.download"),
    (["data.check_integrity=1"], "data.check_integrity"),
    (["data.root=5"], "data.root"),
    (["data.colour=1"], "data.colour"),
    # model
    (["model.name='resnet1000'"], "model.name"),
    (["model.name=[1]"], "model.name"),
    (["model.name='maxvit_t'"], "model.name"),
    (["model.depth=3"], "model.depth"),
    (["model.batchnorm_processes=0"], "model.batchnorm_processes"),
    (["model.batchnorm_processes=2"], "model.batchnorm_processes"),  # one process trains it
    (["model.batchnorm_processes=2", "runtime.sync_bn=true"], "runtime.sync_bn"),
    # optim
    (["optim.momentum=1.0"], "optim.momentum"),
    (["optim.momentum=-0.5"], "optim.momentum"),
    (["optim.momentum=nan"], "optim.momentum"),
    (["optim.momentum='high'"], "optim.momentum"),
    (["optim.weight_decay=-1e-4"], "optim.weight_decay"),
    (["optim.weight_decay=inf"], "optim.weight_decay"),
    (["optim.weight_decay=nan"], "optim.weight_decay"),
    (["optim.weight_decay=[0.1]"], "optim.weight_decay"),
    (["optim.nesterov=true", "optim.momentum=0.0"], "optim.nesterov"),
    (["optim.nesterov='yes'"], "optim.nesterov"),
    (["optim.label_smoothing=1.0"], "optim.label_smoothing"),
    (["optim.label_smoothing=-0.1"], "optim.label_smoothing"),
    (["optim.grad_clip=-1.0"], "optim.grad_clip"),
    (["optim.grad_clip=inf"], "optim.grad_clip"),
    (["optim.bf16='no'"], "optim.bf16"),
    (["optim.adam=true"], "optim.adam"),
    # schedule
    (["schedule.name='exponential'"], "schedule.name"),
    (["schedule.lr=0"], "schedule.lr"),
    (["schedule.lr=-0.1"], "schedule.lr"),
    (["schedule.lr=inf"], "schedule.lr"),
    (["schedule.lr=nan"], "schedule.lr"),
    (["schedule.lr='fast'"], "schedule.lr"),
    (["schedule.warmup_epochs=-1"], "schedule.warmup_epochs"),
    (["schedule.warmup_epochs=inf"], "schedule.warmup_epochs"),
    (["method.name=dense", "budget.epochs=5", "schedule.warmup_epochs=5"], "schedule"),
    (["schedule.milestones=['a']"], "schedule.milestones"),
    (["schedule.milestones=0.5"], "schedule.milestones"),
    (["schedule.name='stepped'", "schedule.milestones=[0.5]", "schedule.values=[]"], "schedule"),
    (["schedule.values=[inf]"], "schedule.values"),
    (["schedule.gamma=0.1"], "schedule.gamma"),
    # budget
    (["budget.epochs=0"], "budget.epochs"),
    (["budget.epochs=-3"], "budget.epochs"),
    (["budget.epochs=99999999999999999999999"], "budget.epochs"),
    (["budget.epochs=1000000"], "budget.epochs"),
    (["budget.epochs=2.5"], "budget.epochs"),
    (["budget.epochs='ten'"], "budget.epochs"),
    (["budget.cycles=0"], "budget.cycles"),
    ([f"budget.cycles={HUGE}"], "budget.cycles"),
    (["budget.initial_epochs=-1"], "budget.initial_epochs"),
    (["method.name=bimp", "budget.epochs=5", "budget.initial_epochs=9"], "budget"),
    (
        ["method.name=bimp", "budget.epochs=4", "budget.initial_epochs=2", "budget.cycles=5"],
        "budget",
    ),
    (["budget.hours=3"], "budget.hours"),
    # method (common keys and each method's own)
    (["method.name='magic'"], "method.name"),
    (["method.name=7"], "method.name"),
    (["method.sparsity=1.0"], "method.sparsity"),
    (["method.sparsity=-0.1"], "method.sparsity"),
    (["method.sparsity=nan"], "method.sparsity"),
    (["method.sparsity=inf"], "method.sparsity"),
    (["method.sparsity='most'"], "method.sparsity"),
    (["method.name=gmp", "method.sparsity=0.999999"], "method.sparsity"),
    (["method.exclude='fc'"], "method.exclude"),
    (["method.exclude=[1]"], "method.exclude"),
    (["method.name=gmp", "method.exclude=['*']", "budget.epochs=2"], "method.exclude"),
    (["method.nosuch=1"], "method.nosuch"),
    (["method.name=bimp", "method.criterion='biggest'"], "method.criterion"),
    (["method.name=bimp", "method.schedule='SOMETIMES'"], "method.schedule"),
    (["method.name=bimp", "method.warmup_fraction=0.5"], "method.warmup_fraction"),
    (["method.name=bimp", "method.initial_lr=inf"], "method.initial_lr"),
    (
        ["method.name=bimp", "method.schedule='tuned-constant'", "method.initial_lr=0"],
        "method.initial_lr",
    ),
    (["method.name=imp", "method.parent_epochs=0"], "method.parent_epochs"),
    (["method.name=imp", "method.parent_weight_decay=-1.0"], "method.parent_weight_decay"),
    (["method.name=imp", "method.parent_weight_decay=nan"], "method.parent_weight_decay"),
    (["method.name=gmp", "method.steps=-1"], "method.steps"),
    (["method.name=gmp", "method.steps=1.5"], "method.steps"),
    (["method.name=gsm", "method.steps=3"], "method.steps"),
    (["method.name=dense", "method.criterion='global'"], "method.criterion"),
    # finetune
    (["finetune.epochs=-1"], "finetune.epochs"),
    (["finetune.epochs=1000000"], "finetune.epochs"),
    (["finetune.epochs=1.5"], "finetune.epochs"),
    (["finetune.lr=0.1"], "finetune.lr"),
    # eval
    (["eval.val_every=0"], "eval.val_every"),
    (["eval.val_every=-2"], "eval.val_every"),
    (["eval.val_every='often'"], "eval.val_every"),
    (["eval.test=true"], "eval.test"),
    # logging
    (["logging.wandb_mode='cloud'"], "logging.wandb_mode"),
    (["logging.wandb='yes'"], "logging.wandb"),
    (["logging.progress=2"], "logging.progress"),
    (["logging.wandb_project=5"], "logging.wandb_project"),
    (["logging.level='debug'"], "logging.level"),
    # output
    (["output.dir=''"], "output.dir"),
    (["output.dir='   '"], "output.dir"),
    (["output.dir=5"], "output.dir"),
    (["output.format='csv'"], "output.format"),
    # runtime
    (["runtime.device='tpu'"], "runtime.device"),
    (["runtime.device='cuda:abc'"], "runtime.device"),
    (["runtime.device='cuda:999'"], "runtime.device"),
    (["runtime.device=0"], "runtime.device"),
    (["runtime.threads=-1"], "runtime.threads"),
    ([f"runtime.threads={HUGE}"], "runtime.threads"),
    ([f"runtime.threads={NEG_HUGE}"], "runtime.threads"),
    (["runtime.threads=100000"], "runtime.threads"),
    (["runtime.deterministic='sure'"], "runtime.deterministic"),
    (["runtime.gpus=2"], "runtime.gpus"),
    # latency
    (["latency.measure='sure'"], "latency.measure"),
    (["latency.device='tpu'"], "latency.device"),
    (["latency.batches=[]"], "latency.batches"),
    (["latency.batches=[0, 64]"], "latency.batches"),
    (["latency.batches=7"], "latency.batches"),
    (["latency.warmup=-1"], "latency.warmup"),
    (["latency.repeats=0"], "latency.repeats"),
    ([f"latency.repeats={HUGE}"], "latency.repeats"),
    (["latency.every=2"], "latency.every"),
]


# The values the hardening issue listed as failing late (each must fail before compute).
LISTED_VALUES: list[tuple[list[str], str]] = [
    (["seed=18446744073709551616"], "seed"),
    (["runtime.threads=18446744073709551616"], "runtime.threads"),
    (["optim.weight_decay=inf"], "optim.weight_decay"),
    (["optim.nesterov=true", "optim.momentum=0.0"], "optim.nesterov"),
    (["budget.epochs=99999999999999999999999"], "budget.epochs"),
    (
        ["method.name=bimp", "method.schedule='tuned-constant'", "method.initial_lr=inf"],
        "method.initial_lr",
    ),
    (["runtime.device='cuda:999'"], "runtime.device"),
    (["runtime.device='cuda:abc'"], "runtime.device"),
    (["output.dir=''"], "output.dir"),
    (["budget.epochs=7", "schedule.warmup_epochs=6.9999", "method.name=dense"], "schedule"),
    (["method.name=gmp", "method.sparsity=0.999999"], "method.sparsity"),
]
# Found in review: accepted, then ignored or run out of memory after training.
CASES += [
    (["method.name=gsm", "method.from_pretrained=true", f"method.parent_epochs={HUGE}"],
     "method.parent_epochs"),
    (["method.name=gsm", "method.from_pretrained=true", "method.parent_epochs=1000000"],
     "method.parent_epochs"),
    (["method.filter_multiple=8"], "method.filter_multiple"),
    (["latency.batches=[100000000]"], "latency.batches"),
    (["latency.repeats=1000000000"], "latency.repeats"),
    (["latency.warmup=1000000000"], "latency.warmup"),
]  # fmt: skip
ALL_CASES = CASES + [case for case in LISTED_VALUES if case not in CASES]


def test_the_fuzz_covers_every_section_with_over_100_values() -> None:
    from benchmark.config.run import SECTIONS

    fields = {field.split(".")[0] for _, field in CASES}
    assert set(SECTIONS) | {"seed"} <= fields
    assert len(CASES) >= 100


@pytest.mark.parametrize(("overrides", "field"), ALL_CASES, ids=lambda v: str(v)[:60])
@pytest.mark.usefixtures("no_training")
def test_every_bad_value_exits_2_naming_its_field_and_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    overrides: list[str],
    field: str,
) -> None:
    store = tmp_path / "store"
    assert cli_run(store, *overrides) == 2
    err = capsys.readouterr().err
    assert "config error" in err and field in err
    assert stored_files(store) == []
