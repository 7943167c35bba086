"""Checks that the captured-step fast path trains as the eager loop does, on a real GPU.

    python -m benchmark.bench.check_fast_path                 # every method, on CUDA

For every method (and the options whose per-iteration hooks differ) on digits: a 2-epoch run
with the fast path against the eager loop (the first epoch's train loss within 1e-3 relative, or
twice what the fused, tensor-lr optimizer step alone changes; later epochs are reported: an
epoch-end prune can turn last-bit noise into another mask; and the run really captured); with
``runtime.deterministic`` the captured steps against the same steps uncaptured (bit for bit), the
fast path twice (same result) and interrupted then resumed (equal to uninterrupted). Prints one line
per check and exits 1 if any fails. On the CPU there is nothing to capture: the tests cover the same
control flow there with a replaying backend (tests/training/test_fast_step.py).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmark.config.run import RunConfig
from benchmark.core.errors import ConfigError
from benchmark.training.contract import comparable, tiny_config
from benchmark.training.fast_step import GraphBackend, RerunBackend
from benchmark.training.trainer import Trainer

# One short run per method, covering every kind of per-iteration hook: masks after the step
# (bimp, gmp soft), gradient surgery (gsm, lc, dnw), refreshes between iterations (dpf), capture
# keys (lc's mu), device scalars (cs's temperature, lc's geometric decay), reparametrizations.
CASES: dict[str, list[str]] = {
    "dense": [],
    "bimp": ["budget.initial_epochs=1", "budget.cycles=2"],
    "gmp": ["method.variant='soft'", "method.steps=2", "optim.weight_decay=0.05"],
    "gsm": [],
    "lc": ["method.variant='lc'", "method.c_step_every=4"],
    "lc-geometric": ["method.wd_schedule='geometric'"],
    "dpf": ["method.refresh_every=3"],
    "dnw": [],
    "cs": [],
    "str": [],
    "dst": [],
}
RTOL = 1e-3


def case_config(store: Path, case: str, *extra: str) -> RunConfig:
    """A 3-epoch digits run (plus 1 epoch of FT) of ``case`` with ``extra`` overrides.

    ``case`` is a key of :data:`CASES` or any registered method's name (a plugin's, say).
    """
    if case in CASES:
        name, options = case.split("-")[0], CASES[case]
    else:
        name, options = case, []
    return tiny_config(
        store, f"method.name='{name}'", "budget.epochs=3", "finetune.epochs=1", *options, *extra
    )


def _fit(cfg: RunConfig, backend: GraphBackend | None = None) -> tuple[Trainer, dict]:
    trainer = Trainer(cfg, graph_backend=backend)
    metrics = trainer.fit()
    assert metrics is not None
    return trainer, metrics


def _losses(trainer: Trainer) -> list[float]:
    return [h["train_loss"] for h in trainer.state.history]


def _max_rel(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b, strict=True))


def check_case(store: Path, case: str, extra: Sequence[str]) -> list[tuple[bool, str]]:
    """The checks of one case; (passed, line) pairs."""
    out: list[tuple[bool, str]] = []
    short = ["budget.epochs=2", "finetune.epochs=0", "runtime.deterministic=false", *extra]
    if case == "bimp":
        short[0] = "budget.epochs=3"  # BIMP needs initial epochs < epochs
    fast, fm = _fit(case_config(store / "f", case, *short))
    eager, _ = _fit(case_config(store / "e", case, *short, "runtime.cuda_graphs='off'"))
    rerun, _ = _fit(case_config(store / "u", case, *short), RerunBackend())
    # The first epoch, before any epoch-boundary decision: autotuned kernels differ in their
    # last bits between any two runs, and a prune at an epoch's end can turn that into a
    # different mask (then the losses part by far more than float noise, also between two eager
    # runs). Later epochs are held bit for bit by the deterministic checks below.
    worst = _max_rel(_losses(fast)[:1], _losses(eager)[:1])
    whole = _max_rel(_losses(fast), _losses(eager))
    # What the fused, tensor-lr optimizer step alone changes (no capture): the noise floor.
    floor = _max_rel(_losses(rerun)[:1], _losses(eager)[:1])
    step = fm["step"]
    captured = step["mode"] == "cuda_graphs" and step["replays"] > 0
    out.append(
        (
            captured and worst <= max(RTOL, 2 * floor),
            f"{case:13s} fast vs eager, epoch 1: rel. train-loss difference {worst:.2e} "
            f"(bound {RTOL:g}; the optimizer step alone, uncaptured: {floor:.2e}; whole run "
            f"{whole:.2e}); {step['mode']}, {step['captures']} captures, {step['replays']} "
            f"replays, {step['eager_iterations']} eager {step['why_eager']}",
        )
    )
    det = ["runtime.deterministic=true", *extra]
    one, m1 = _fit(case_config(store / "d1", case, *det))
    uncaptured, m0 = _fit(case_config(store / "d0", case, *det), RerunBackend())
    faithful = comparable(m0) == comparable(m1) and all(
        torch.equal(x, y)
        for x, y in zip(
            one.model.state_dict().values(), uncaptured.model.state_dict().values(), strict=True
        )
    )
    out.append(
        (
            faithful,
            f"{case:13s} captured = uncaptured steps, bit for bit (deterministic): {faithful}",
        )
    )
    two, m2 = _fit(case_config(store / "d2", case, *det))
    same = comparable(m1) == comparable(m2) and all(
        torch.equal(x, y)
        for x, y in zip(
            one.model.state_dict().values(), two.model.state_dict().values(), strict=True
        )
    )
    out.append((same, f"{case:13s} deterministic fast path twice: same result = {same}"))
    cfg = case_config(store / "r", case, *det)
    ckpt = store / f"{case}.pt"
    assert Trainer(cfg, ckpt).fit(stop_after=2) is None
    resumed = Trainer(cfg, ckpt)
    resumed.try_resume()
    rm = resumed.fit()
    equal = rm is not None and comparable(rm) == comparable(m1)
    out.append((equal, f"{case:13s} deterministic resume equals uninterrupted = {equal}"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checks; 0 when all pass."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help="comma-separated: the shipped cases, or any method's name (a plugin's too)",
    )
    parser.add_argument("--set", action="append", default=[], help="extra overrides, e.g. bf16")
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:  # every case's config is checked before anything trains
            try:
                case_config(Path(tmp), case, *args.set)
            except ConfigError as err:
                parser.error(f"--cases {case}: {err}")
    if not torch.cuda.is_available():
        print("no CUDA device: nothing is captured on the CPU (tests/training/test_fast_step.py)")
        return 1
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            try:
                results = check_case(Path(tmp) / case, case, args.set)
            except Exception as err:  # noqa: BLE001 - report and go on with the next case
                results = [(False, f"{case:13s} raised {type(err).__name__}: {err}")]
            for ok, line in results:
                print(("PASS " if ok else "FAIL ") + line, flush=True)
                failed += not ok
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
