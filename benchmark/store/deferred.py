"""Signals held back for the few milliseconds in which a result takes its place, for a bounded
time, and delivered only once the write's locks are released.

A Ctrl-C (SIGINT), a ``kill`` (SIGTERM) or submitit's time-limit/preemption signal (SIGUSR2 by
default, whose handler requeues the job and exits through ``SystemExit``) that arrives while a
result's weights and record are renamed into place would stop the write between two steps. Each
step leaves a valid state (:meth:`benchmark.store.results.Store.write_result`), but the result
would then wait for the run's next start; held back, the signal takes effect right after the
result is complete and the store lock is released (the caller delivers the held signals after
the lock's release, so a signal that ends the process finds no lock of the write held).

The hold is bounded: a signal acts at the latest :data:`HOLD_ENV` seconds (10 by default) after
the window opened, even if the write has not finished by then (a filesystem call that hangs): it
interrupts the call and the write stops between two steps, leaving the old result or the new one,
as a kill would. A call the kernel does not let any signal interrupt (a process in uninterruptible
sleep, e.g. on an NFS ``hard`` mount whose server is gone) cannot be cut short by this or any
other signal but SIGKILL. SIGKILL cannot be held back, which is why every step is safe on its own.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

# The signals whose Python handlers stop a process (SIGUSR1/2: submitit's requeue signal).
HELD = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
HOLD_ENV = "PRUNEBENCH_SIGNAL_HOLD_S"
DEFAULT_HOLD_S = 10.0


def hold_limit() -> float:
    """Seconds for which a signal may be held back at most (``PRUNEBENCH_SIGNAL_HOLD_S``)."""
    try:
        return max(0.0, float(os.environ.get(HOLD_ENV, DEFAULT_HOLD_S)))
    except ValueError:
        return DEFAULT_HOLD_S


class HeldSignals:
    """Signals of :data:`HELD` held back between :meth:`hold` and :meth:`deliver`, for at most
    ``limit_s`` seconds from :meth:`hold` (see the module doc). Only the main thread can hold
    signals; elsewhere nothing is held."""

    def __init__(self, limit_s: float | None = None) -> None:
        self.limit_s = hold_limit() if limit_s is None else limit_s
        self.came: list[int] = []
        self._before: dict[int, Any] = {}
        self._deadline = 0.0
        self._timer: threading.Timer | None = None
        # Re-entrant: the handler may run in the main thread while it holds the guard.
        self._guard = threading.RLock()
        self._active = False

    def hold(self) -> None:
        """Start holding the signals back."""
        if threading.current_thread() is not threading.main_thread() or self._active:
            return
        self._deadline = time.monotonic() + self.limit_s
        self._active = True
        for signum in HELD:
            self._before[signum] = signal.signal(signum, self._collect)

    def deliver(self) -> None:
        """Stop holding: restore the handlers, then deliver each signal that came, once."""
        with self._guard:
            if not self._active:
                return
            self._active = False
            if self._timer is not None:
                self._timer.cancel()
        for signum, handler in self._before.items():
            signal.signal(signum, handler)
        self._before.clear()
        came, self.came = list(dict.fromkeys(self.came)), []
        for signum in came:
            signal.raise_signal(signum)

    def _collect(self, signum: int, _frame: Any) -> None:
        """The handler while held: remember the signal; past the deadline, deliver at once."""
        if signum not in self.came:
            self.came.append(signum)
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            self.deliver()  # the write is abandoned between two steps
            return
        with self._guard:
            if self._active and self._timer is None:
                # Woken at the deadline by the same signal, sent to this (the main) thread: it
                # interrupts a call that hangs, and this handler then sees the deadline passed.
                main = threading.main_thread().ident
                self._timer = threading.Timer(remaining, self._wake, (main, signum))
                self._timer.daemon = True
                self._timer.start()

    def _wake(self, main: int, signum: int) -> None:
        with self._guard:
            if self._active:
                signal.pthread_kill(main, signum)


@contextlib.contextmanager
def signals_held(limit_s: float | None = None) -> Iterator[HeldSignals]:
    """Run the block with :data:`HELD` signals held back (at most ``limit_s`` seconds); those
    that came are then delivered to their own handlers."""
    held = HeldSignals(limit_s)
    held.hold()
    try:
        yield held
    finally:
        held.deliver()
