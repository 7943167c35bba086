"""Signals held back for the few milliseconds in which a result takes its place.

A Ctrl-C (SIGINT), a ``kill`` (SIGTERM) or submitit's time-limit/preemption signal (SIGUSR2 by
default, whose handler requeues the job and exits through ``SystemExit``) that arrives while a
result's weights and record are renamed into place would stop the write between two steps. Each
step leaves a valid state (:meth:`benchmark.store.results.Store.write_result`), but the result
would then wait for the run's next start; held back, the signal takes effect right after the
result is complete. SIGKILL cannot be held back, which is why every step is safe on its own.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

# The signals whose Python handlers stop a process (SIGUSR1/2: submitit's requeue signal).
HELD = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Run the block with :data:`HELD` signals held back; those that came are then delivered
    to their own handlers. Only the main thread can do this; elsewhere nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    before: dict[int, Any] = {}
    try:
        for signum in HELD:
            before[signum] = signal.signal(signum, lambda n, _frame: came.append(n))
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)
