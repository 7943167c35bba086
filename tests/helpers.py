"""Test helpers shared by the method tests: tiny configs, interrupted runs, plugin installs."""

from __future__ import annotations

import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from benchmark.config.run import RunConfig
from benchmark.store.results import Store
from benchmark.training.contract import comparable, run_interrupted, tiny_config
from benchmark.training.runner import parent_weights
from benchmark.training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
__all__ = [
    "comparable",
    "install_plugin",
    "readme_plugin_source",
    "record_lrs",
    "run_interrupted",
    "run_uninterrupted",
    "tiny_config",
]


def run_uninterrupted(cfg: RunConfig) -> dict[str, Any]:
    """Train ``cfg`` in one go (no checkpoint file) and return its final metrics."""
    store = Store(cfg.output.dir)
    _, parent = parent_weights(cfg, store)
    metrics = Trainer(cfg, None, parent).fit()
    assert metrics is not None
    return metrics


def record_lrs(trainer: Trainer) -> list[float]:
    """Train ``trainer`` to the end and return the learning rate of every optimizer step."""
    lrs: list[float] = []
    original = trainer.set_lr

    # Recorded where the trainer sets it before every iteration (a replayed CUDA graph runs no
    # Python), as the optimizer holds it: a float, or a device tensor on the fast path.
    def set_lr(lr: float) -> None:
        original(lr)
        lrs.append(float(trainer.optimizer.param_groups[0]["lr"]))

    trainer.set_lr = set_lr  # type: ignore[method-assign]
    trainer.fit()
    return lrs


def install_plugin(site: Path, dist: str, module: str, source: str, methods: list[str]) -> None:
    """Install an outside plugin into ``site`` the way pip does: a module plus dist-info.

    Each of ``methods`` becomes a ``prunebench.methods`` entry point naming ``module``.
    """
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{m} = {module}\n" for m in methods)
    (info / "entry_points.txt").write_text(f"[prunebench.methods]\n{lines}")


def readme_plugin_source() -> tuple[str, str]:
    """The README's example plugin: its Python source and the method name it registers."""
    readme = (ROOT / "README.md").read_text()
    (source,) = [
        b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if "register_method" in b
    ]
    (name,) = re.findall(r'^\s+name = "([^"]+)"', source, re.M)
    return source, name


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any training epoch starts (import it into a test module to use it)."""

    def boom(self: Trainer, epoch: int) -> dict[str, Any]:
        raise AssertionError("training started")

    monkeypatch.setattr(Trainer, "train_epoch", boom)


def cli_run(store: Path, *overrides: str) -> int:
    """``prunebench run`` on the default config with a fast setup, ``overrides`` and ``store``."""
    from benchmark.cli import main

    base = ["logging.progress=false", "data.batch_size=128", "runtime.threads=1"]
    args = ["run", "--set", f"output.dir={str(store)!r}"]
    for item in [*base, "runtime.deterministic=true", *overrides]:
        args += ["--set", item]
    return main(args)


def stored_files(store: Path) -> list[Path]:
    """Every file under ``store``: results, checkpoints, weights, archives and lock files (a
    configuration error writes none of them, wherever it is found)."""
    if not store.exists():
        return []
    return [p for p in store.rglob("*") if p.is_file()]


# --------------------------------------------------------------------------- data-parallel ranks
# Functions that every rank of a test's process group runs (module level, so spawn finds them).


def execute_float64(configs: list[RunConfig]) -> None:
    """Execute ``configs`` in float64 (a rank's job; see test_contract's equality test)."""
    import torch

    from benchmark.training.runner import execute_all

    torch.set_default_dtype(torch.float64)
    execute_all(configs, {})


def execute_then_die(done: RunConfig, killed: RunConfig, epochs: int, code: int) -> None:
    """Execute ``done``, then train ``killed`` and exit abruptly (``os._exit``) on every rank
    right after its epoch-``epochs`` checkpoint, as a preempted job would."""
    import os

    from benchmark.training.runner import execute

    execute(done)
    original = Trainer.write_checkpoint

    def save_then_die(self: Trainer) -> None:
        original(self)
        if self.state.epoch == epochs:
            os._exit(code)

    Trainer.write_checkpoint = save_then_die  # type: ignore[method-assign]
    execute(killed)


def execute_failing_on_rank(cfg: RunConfig, bad_rank: int, epoch: int) -> None:
    """Execute ``cfg``; rank ``bad_rank`` raises a ValueError at the start of ``epoch``."""
    from benchmark.training.distributed import rank
    from benchmark.training.loop import EpochLoop
    from benchmark.training.runner import execute

    original = EpochLoop.epoch_steps

    def epoch_steps(trainer: Trainer, e: int) -> Generator[None, None, dict[str, Any]]:
        if e == epoch and rank() == bad_rank:
            raise ValueError(f"disk full on rank {bad_rank}")
        return (yield from original(trainer, e))

    EpochLoop.epoch_steps = epoch_steps  # type: ignore[method-assign]
    execute(cfg)


def execute_diverging_masks(cfg: RunConfig, bad_rank: int) -> None:
    """Execute ``cfg`` while rank ``bad_rank`` flips one entry of every new hard mask."""
    from benchmark.pruning import MaskStore
    from benchmark.training.distributed import rank
    from benchmark.training.runner import execute

    original = MaskStore.update

    def update(self: MaskStore, masks: list[Any], *args: Any, **kwargs: Any) -> None:
        if rank() == bad_rank:
            masks = [m.clone() for m in masks]
            flat = masks[0].reshape(-1)
            flat[0] = flat[0] == 0
        original(self, masks, *args, **kwargs)

    MaskStore.update = update  # type: ignore[method-assign]
    execute(cfg)


# Runs ``prunebench ARGS`` in a fresh interpreter and prints the top-level packages it imported.
IMPORTS_PROBE = """
import sys
from benchmark.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("IMPORTED " + " ".join(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


def env_with_path(*first: Path | str) -> dict[str, str]:
    """This process's environment with ``first`` put ahead on PYTHONPATH. What was on it stays
    behind them: a machine may hold the project's dependencies there (a GPU machine's carried
    wheels), and a child process needs them too."""
    import os

    paths = [str(p) for p in first]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def imported_packages(args: list[str], cwd: Path) -> set[str]:
    """The top-level packages ``prunebench ARGS`` (run in ``cwd``) imports."""
    import subprocess
    import sys

    # PYTHONPATH: this checkout's code, even where another checkout is installed editable.
    env = env_with_path(ROOT)
    command = [sys.executable, "-c", IMPORTS_PROBE, *args]
    out = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("IMPORTED "), out.stderr[-2000:]
    return set(last.split()[1:])


def loads_torch(args: list[str], cwd: Path) -> bool:
    """Whether ``prunebench ARGS`` (run in ``cwd``) imports torch."""
    return "torch" in imported_packages(args, cwd)


def check_plain_and_exact(cfg: RunConfig, record: dict[str, Any]) -> None:
    """The stored weights of a reparametrizing method's run (STR, CS, DST) are a plain model's,
    and the sparsity is their count of exact zeros, as the thresholds implied after the last
    epoch."""
    from benchmark.core.files import load_checkpoint
    from benchmark.models.registry import build_model

    metrics = record["metrics"]
    weights = load_checkpoint(Store(cfg.output.dir).weights_path(cfg.run_id))
    fresh = build_model(cfg.model.name, 10, (1, 8, 8)).state_dict()
    assert set(weights) == set(fresh)
    prunable = [w for w in weights.values() if w.dim() >= 2]
    n = sum(w.numel() for w in prunable)
    zeros = sum(int((w == 0).sum()) for w in prunable)
    assert n == metrics["num_prunable"]
    assert zeros == n - metrics["nonzero_prunable"] and zeros > 0
    assert metrics["emergent_sparsity"][-1] == pytest.approx(zeros / n, abs=1e-12)
