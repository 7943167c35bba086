"""``python -m benchmark.bench.final_write``: how long a run's final write holds the store lock.

Every finished run of a store writes its result under the store's lock, so a job killed while it
holds that lock makes every other node's final write wait for the stale limit
(``PRUNEBENCH_LOCK_STALE_S``). The record and the weights are staged before the lock is taken;
under it only renames and links happen. This prints, for the final weights of ResNet-56 and
WRN-28-10 at 95% sparsity, the whole ``Store.write_result`` and the time the store lock was held
in it (median of ``--repeats``), for a first write and for a ``--force`` rerun (which also
archives the replaced result with its weights). ``--no-hard-links`` measures it as on a
filesystem that refuses hard links (SMB, FUSE object stores), where the weights' second names are
copies, made before the lock; ``--sparsity 0`` writes dense weights.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from benchmark.bench.weights import pruned_state
from benchmark.store.results import Store

MODELS = (("resnet56", 10), ("wrn28_10", 100))


class TimedStore(Store):
    """A store that records how long each hold of its ``store`` lock lasted."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.holds: list[float] = []

    @contextlib.contextmanager
    def lock(self, name: str, *, wait: bool = True) -> Iterator[Any]:
        """The store's lock, timed from taken to released."""
        with super().lock(name, wait=wait) as held:
            start = time.perf_counter()
            try:
                yield held
            finally:
                if name == "store":
                    self.holds.append(time.perf_counter() - start)


def measure(state: dict[str, torch.Tensor], repeats: int, force: bool) -> tuple[float, float]:
    """Median seconds of one write_result and of its store-lock hold."""
    totals: list[float] = []
    holds: list[float] = []
    for i in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            store = TimedStore(Path(folder))
            record = {"run_id": "r", "status": "finished", "started": 0.0, "finished": 1.0}
            if force:
                store.write_result(dict(record), state)
                store.holds.clear()
            record["started"] = float(i + 1)
            start = time.perf_counter()
            store.write_result(record, state, force=force)
            totals.append(time.perf_counter() - start)
            holds += store.holds
    return statistics.median(totals), statistics.median(holds)


@contextlib.contextmanager
def no_hard_links() -> Iterator[None]:
    """``os.link`` refused, as a filesystem without hard links refuses it."""
    real = os.link

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, "hard links are not supported here")

    os.link = refuse
    try:
        yield
    finally:
        os.link = real


def main(argv: list[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sparsity", type=float, default=0.95)
    parser.add_argument("--no-hard-links", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print("| model | write | whole write_result | store lock held |")
    print("| --- | --- | --- | --- |")
    for model, classes in MODELS:
        state = pruned_state(model, classes, args.sparsity)
        for force in (False, True):
            with no_hard_links() if args.no_hard_links else contextlib.nullcontext():
                total, hold = measure(state, args.repeats, force)
            kind = "--force rerun" if force else "first"
            print(f"| {model} | {kind} | {total * 1e3:.1f} ms | {hold * 1e3:.2f} ms |")


if __name__ == "__main__":
    main()
