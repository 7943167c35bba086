"""The contract every registered method passes (built-ins and plugins alike), on digits.

It ships with the package, so a plugin author runs it against an installed plugin with
``prunebench check-method NAME`` (the test suite runs the same checks on every built-in):

- the run finishes within its epoch budget;
- a method with specifiable sparsity ends at exactly the goal sparsity over P (within the
  runner's tolerance when it counts as the paper's code did, ``method.counting = "reference"``);
- the stored sparsity and speedup agree with the stored weights;
- two runs with the same seed give the same result;
- stopping mid-way and resuming from the checkpoint gives the same final metrics;
- while a hard mask is active, pruned weights stay zero after every optimizer step, and the final
  weights are exact zeros where the final mask is zero.

Each check reports the method, the check and the numbers behind a failure.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.config.run import RunConfig
from benchmark.core.files import load_checkpoint
from benchmark.training.validation import load_config
from methods import get_method

GOAL = 0.8
# How far (a fraction of N, at least one weight) a method counting as the paper's code did
# (``method.counting = "reference"``) may end from round(s N): the runner's goal tolerance.
REFERENCE_COUNT_SLACK = 1e-3
BUDGET = 4

# Overrides that keep each built-in method's run to about a second (its dense parent included).
SMALL = {
    "imp": ["method.parent_epochs=2"],
    "renda": ["method.parent_epochs=1", "method.sparsity=0.5"],
}


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one contract check of one method."""

    method: str
    check: str
    passed: bool
    detail: str
    count: int = 0  # e.g. how many masked optimizer steps were checked
    skipped: bool = False  # nothing to check for this method (passed, with the reason)

    def line(self) -> str:
        """One readable line: PASS/FAIL/SKIP, method, check and the numbers (or why skipped)."""
        word = "SKIP" if self.skipped else "PASS" if self.passed else "FAIL"
        return f"{word}  {self.method}: {self.check}: {self.detail}"


class ContractViolation(AssertionError):
    """A check failed; the message names the method, the check and the numbers."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class NothingToCheck(Exception):
    """A check found nothing to check for this method (it reports SKIP with ``why``)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def tiny_config(store: Path, *overrides: str) -> RunConfig:
    """A fast digits config (batch 128, one thread, no progress bar) with ``overrides``.

    Deterministic kernels, so that equality checks also hold on a GPU.
    """
    base = [
        f"output.dir={str(store)!r}",
        "logging.progress=false",
        "data.batch_size=128",
        "runtime.threads=1",
        "runtime.deterministic=true",
    ]
    return load_config(None, [*base, *overrides])


def contract_config(store: Path, name: str, overrides: Sequence[str] = ()) -> RunConfig:
    """A 4-epoch digits run of method ``name`` at 80% goal sparsity (plus ``overrides``); a
    method that trains other tasks only names its own tiny problem (``contract_settings``)."""
    return tiny_config(
        store,
        f"method.name={name}",
        f"method.sparsity={GOAL}",
        f"budget.epochs={BUDGET}",
        "budget.initial_epochs=2",
        "budget.cycles=2",
        *SMALL.get(name, []),
        *get_method(name).contract_settings,
        *overrides,
    )


# Metrics that depend on the machine and the process, not on the training (timings, and how
# many CUDA graphs this process captured).
PROCESS_METRICS = (
    "images_per_s",
    "wall_seconds",
    "compile_seconds",
    "warmup_seconds",
    "epoch_seconds",
    "epoch_phases",
    "step",
    "peak_memory_bytes",  # the allocator's high-water mark: it moves with autotuning choices
    "peak_host_memory_bytes",
    "setup_seconds",
    "tokens_per_s",
    "offloaded",  # runtime.offload = "auto" decides from the device's free memory
)


def comparable(metrics: dict[str, Any]) -> dict[str, Any]:
    """The deterministic part of a run's metrics (no timings)."""
    return {k: v for k, v in metrics.items() if k not in PROCESS_METRICS}


def run_interrupted(cfg: RunConfig, stop_after: int, tmp: Path) -> dict[str, Any]:
    """Train ``stop_after`` epochs, drop the trainer, resume a fresh one from the checkpoint."""
    from benchmark.store.results import Store
    from benchmark.training.runner import parent_weights
    from benchmark.training.trainer import Trainer

    _, parent = parent_weights(cfg, Store(cfg.output.dir))
    ckpt = tmp / f"{cfg.run_id}.pt"
    stopped = Trainer(cfg, ckpt, parent).fit(stop_after=stop_after)
    _require(stopped is None, f"fit(stop_after={stop_after}) finished instead of stopping")
    resumed = Trainer(cfg, ckpt, parent)
    _require(resumed.try_resume(), f"no checkpoint to resume from after {stop_after} epochs")
    epoch = resumed.state.epoch
    _require(epoch == stop_after, f"resumed at epoch {epoch}, expected {stop_after}")
    metrics = resumed.fit()
    _require(metrics is not None, "the resumed run did not finish")
    return metrics


def _require(ok: bool, detail: str) -> None:
    if not ok:
        raise ContractViolation(detail)


def _differences(got: dict[str, Any], want: dict[str, Any], limit: int = 3) -> str:
    keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
    parts = [f"{k}: {_short(got.get(k))} != {_short(want.get(k))}" for k in keys[:limit]]
    more = f" (and {len(keys) - limit} more)" if len(keys) > limit else ""
    return "; ".join(parts) + more


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


# --------------------------------------------------------------------------- the checks


class _RunChecks:
    """The checks of one finished run (shared by them, so the method trains once)."""

    def __init__(self, name: str, workdir: Path, overrides: Sequence[str]) -> None:
        from benchmark.training.runner import execute
        from methods import get_method

        self.workdir = workdir
        self.cfg = contract_config(workdir / "store", name, overrides)
        self.method_cls = get_method(name)
        self.error: Exception | None = None
        try:
            self.record = execute(self.cfg)
        except Exception as err:  # e.g. the runner refuses a run that misses its goal
            self.record, self.error = {}, err
        self.metrics = self.record.get("metrics") or {}

    def finished(self) -> str:
        if self.error is not None:
            err = self.error
            raise ContractViolation(f"the run raised {type(err).__name__}: {err}")
        status = self.record.get("status")
        _require(status == "finished", f"status {status!r}: {self.record.get('error', '')}")
        return f"finished in {len(self.record['history'])} epochs"

    def train_here(self) -> None:
        """Train the run without the store (whose runner refused it) for the sparsity check."""
        from benchmark.store.results import Store
        from benchmark.training.runner import parent_weights
        from benchmark.training.trainer import Trainer

        _, parent = parent_weights(self.cfg, Store(self.cfg.output.dir))
        self.metrics = Trainer(self.cfg, None, parent).fit() or {}

    def budget(self) -> str:
        epochs, budget = len(self.record["history"]), self.cfg.budget.epochs
        if not self.method_cls.budget_fields:
            raise NothingToCheck(f"the method declares no budget fields (trained {epochs} epochs)")
        _require(epochs <= budget, f"trained {epochs} epochs, budget.epochs = {budget}")
        return f"{epochs} <= {budget} epochs"

    def goal_sparsity(self) -> str:
        m, goal = self.metrics, self.cfg.method.sparsity
        if not self.method_cls.info.sparsity_specifiable:
            raise NothingToCheck(f"the sparsity is not specifiable; reached {m['sparsity']:.4f}")
        n = m["num_prunable"]
        pruned, want = n - m["nonzero_prunable"], round(goal * n)
        if getattr(self.cfg.method.params, "counting", "exact") == "reference":
            # Counted as the paper's code counted (DNW int(s N) plus ties, hard GMP round(q n)
            # of the alive weights per step): within the runner's goal tolerance of round(s N).
            slack = max(1, int(REFERENCE_COUNT_SLACK * n))
            _require(
                abs(pruned - want) <= slack,
                f"pruned {pruned} of {n} prunable weights (sparsity {pruned / n:.4f}), "
                f"expected round({goal} * {n}) = {want} +- {slack} (method.counting = reference)",
            )
            return f"{pruned} of {n} pruned, round({goal} * {n}) = {want} +- {slack} (reference)"
        _require(
            pruned == want,
            f"pruned {pruned} of {n} prunable weights (sparsity {pruned / n:.4f}), "
            f"expected round({goal} * {n}) = {want}",
        )
        return f"{pruned} of {n} pruned = round({goal} * {n})"

    def stored_metrics(self) -> str:
        from benchmark.measure.metrics import sparsity_stats
        from benchmark.store.results import Store
        from benchmark.training.trainer import Trainer

        trainer = Trainer(self.cfg)
        weights = Store(self.cfg.output.dir).weights_path(self.cfg.run_id)
        trainer.model.load_state_dict(load_checkpoint(weights))
        stats = sparsity_stats(trainer.model, trainer.ctx.prunable)
        speed = trainer.task.speedup(trainer.model, trainer.data)
        m = self.metrics
        _require(
            stats["nonzero_prunable"] == m["nonzero_prunable"],
            f"the stored weights have {stats['nonzero_prunable']} nonzero prunable weights, "
            f"the result says {m['nonzero_prunable']}",
        )
        _require(
            abs(stats["sparsity"] - m["sparsity"]) <= 1e-9,
            f"weights' sparsity {stats['sparsity']:.6f}, stored {m['sparsity']:.6f}",
        )
        _require(
            abs(speed["speedup"] - m["speedup"]) <= 1e-6 * max(1.0, abs(m["speedup"])),
            f"weights' speedup {speed['speedup']:.6f}, stored {m['speedup']:.6f}",
        )
        return f"sparsity {m['sparsity']:.4f}, speedup {m['speedup']:.2f}x match the weights"

    def deterministic(self) -> str:
        from benchmark.store.results import Store
        from benchmark.training.runner import parent_weights
        from benchmark.training.trainer import Trainer

        _, parent = parent_weights(self.cfg, Store(self.cfg.output.dir))
        again = comparable(Trainer(self.cfg, None, parent).fit())
        want = comparable(self.metrics)
        _require(again == want, f"a second run differs: {_differences(again, want)}")
        return "a second run with the same seed is identical"

    def resume(self) -> str:
        stop = max(1, self.cfg.budget.epochs // 2)
        got = comparable(run_interrupted(self.cfg, stop, self.workdir / "ckpt"))
        want = comparable(self.metrics)
        _require(got == want, f"stopped after {stop} epochs and resumed: {_differences(got, want)}")
        return f"stopped after {stop} epochs and resumed: identical"


def masks_hold(name: str, workdir: Path, overrides: Sequence[str] = ()) -> tuple[str, int]:
    """Train ``name`` checking that pruned weights are zero after every masked step.

    Returns the detail and how many masked steps were checked.
    """
    from benchmark.store.results import Store
    from benchmark.training.runner import parent_weights
    from benchmark.training.trainer import Trainer

    cfg = contract_config(workdir / "store", name, overrides)
    _, parent = parent_weights(cfg, Store(cfg.output.dir))
    trainer = Trainer(cfg, None, parent)
    method = trainer.method
    original = method.after_step
    checked, bad = 0, []

    def after_step(step: int) -> None:
        nonlocal checked
        original(step)
        if method.masks_active:
            masks = trainer.ctx.masks
            for pname, p, mask in zip(masks.names, masks.params, masks.masks, strict=True):
                alive = int((p.detach()[mask == 0] != 0).sum())
                if alive and len(bad) < 3:
                    bad.append(f"step {step}: {alive} masked weights of {pname} are nonzero")
            checked += 1

    method.after_step = after_step  # type: ignore[method-assign]
    trainer.fit()
    _require(not bad, "; ".join(bad))
    masks = trainer.ctx.masks
    for pname, p, mask in zip(masks.names, masks.params, masks.masks, strict=True):
        alive = int((p.detach()[mask == 0] != 0).sum())
        _require(alive == 0, f"after training, {alive} masked weights of {pname} are nonzero")
    if not checked:
        raise NothingToCheck(
            "no optimizer step ran with a hard mask active (the method prunes at the end, or "
            "never holds a hard mask), so no step could be checked; the final weights are "
            "exact zeros where the final mask is zero"
        )
    return f"pruned weights stayed zero after {checked} masked steps", checked


RUN_CHECKS = (
    "finishes",
    "within the epoch budget",
    "exact goal sparsity",
    "stored metrics match the weights",
    "deterministic",
    "exact resume",
)
MASK_CHECK = "hard masks hold after every step"
CHECKS = (*RUN_CHECKS, MASK_CHECK)


def _outcome(name: str, check: str, fn: Callable[[], str | tuple[str, int]]) -> CheckResult:
    try:
        out = fn()
    except ContractViolation as err:
        return CheckResult(name, check, False, err.detail)
    except NothingToCheck as err:
        return CheckResult(name, check, True, err.why, skipped=True)
    except Exception as err:
        where = traceback.extract_tb(err.__traceback__)[-1]
        detail = f"raised {type(err).__name__}: {err} ({where.filename}:{where.lineno})"
        return CheckResult(name, check, False, detail)
    detail, count = out if isinstance(out, tuple) else (out, 0)
    return CheckResult(name, check, True, detail, count)


def check_run(name: str, workdir: Path, overrides: Sequence[str] = ()) -> list[CheckResult]:
    """The contract's checks of one trained run of ``name`` (all but the mask check)."""
    runs: list[_RunChecks] = []

    def finishes() -> str:
        runs.append(_RunChecks(name, workdir, overrides))
        return runs[0].finished()

    first = _outcome(name, RUN_CHECKS[0], finishes)
    skipped = "not run: the run did not finish"
    if not first.passed:
        if not runs or runs[0].error is None:
            return [first, *(CheckResult(name, c, False, skipped) for c in RUN_CHECKS[1:])]
        # The method trains but the runner refused the result: still say what it reached.
        run = runs[0]

        def sparsity_here() -> str:
            run.train_here()
            return run.goal_sparsity()

        sparsity = _outcome(name, RUN_CHECKS[2], sparsity_here)
        rest = [CheckResult(name, c, False, skipped) for c in RUN_CHECKS[1:]]
        return [first, rest[0], sparsity, *rest[2:]]
    run = runs[0]
    steps = (run.budget, run.goal_sparsity, run.stored_metrics, run.deterministic, run.resume)
    return [first] + [_outcome(name, c, f) for c, f in zip(RUN_CHECKS[1:], steps, strict=True)]


def check_masks(name: str, workdir: Path, overrides: Sequence[str] = ()) -> CheckResult:
    """The contract's mask check of ``name`` (a separate, instrumented training run)."""
    return _outcome(name, MASK_CHECK, lambda: masks_hold(name, workdir, overrides))


def check_method(name: str, workdir: Path, overrides: Sequence[str] = ()) -> list[CheckResult]:
    """Every contract check of method ``name``, trained under ``workdir``."""
    return [*check_run(name, workdir, overrides), check_masks(name, workdir / "masks", overrides)]


def report(results: Sequence[CheckResult]) -> str:
    """The results as lines, failures first, for an assertion message or the terminal."""
    ordered = sorted(results, key=lambda r: r.passed)
    return "\n".join(r.line() for r in ordered)
