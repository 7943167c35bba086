"""Every lock file this process holds is removed before a signal ends the process.

A signal whose action is the default one (``kill`` and ``scancel`` send SIGTERM; a closed
terminal SIGHUP; SIGUSR1/2 where no handler is set) ends a Python process at once, without its
``finally`` blocks, and used to leave its lock files behind: on this host they are recovered at
once (their process is gone), but a job on another node waited out ``PRUNEBENCH_LOCK_STALE_S``.
While this process holds a lock, each such signal gets a handler that removes every lock file the
process holds (those that still name it) and then lets the signal end the process as it would
have (the same exit status). Signals that have a handler of their own keep it: Ctrl-C's
KeyboardInterrupt and submitit's SystemExit unwind through the locks' own release (and a lock
still held when the interpreter exits, an interruption having landed where no ``finally`` covers
it, is removed at exit). SIGKILL (and SIGQUIT, the way out that is left alone) cannot be
answered: such a lock is recovered as before.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

# Signals whose default action ends the process (SIGQUIT, whose default dumps core, is left as
# the way to end a process that nothing else ends).
ENDING = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGINT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)

# What to remove before the process ends: key -> (the process that registered it, the call).
_HELD: dict[int, tuple[int, Callable[[], None]]] = {}
# The signals this module answers now (installed over their default action).
_ANSWERED: set[int] = set()
_GUARD = threading.Lock()


def remove_at_exit(key: int, remove: Callable[[], None]) -> None:
    """Call ``remove()`` if a signal ends this process before :func:`forget` (``key``)."""
    with _GUARD:
        _HELD[key] = (os.getpid(), remove)
    _answer()


def forget(key: int) -> None:
    """Do not call what :func:`remove_at_exit` registered under ``key``; once nothing is left,
    the signals get their default action back."""
    with _GUARD:
        _HELD.pop(key, None)
        empty = not _HELD
    if empty:
        _unanswer()


def remove_all() -> None:
    """Call every registered removal of this process (not of a parent it was forked from)."""
    with _GUARD:
        held = [remove for pid, remove in _HELD.values() if pid == os.getpid()]
        _HELD.clear()
    for remove in held:
        try:
            remove()
        except Exception:  # noqa: BLE001 (the process ends now: the others must go too)
            pass


def _end(signum: int, frame: Any) -> None:
    """The handler: remove every lock file, then end the process by the signal itself."""
    remove_all()
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


def _answer() -> None:
    """Answer the ending signals whose action is the default one (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in ENDING:
        # _end itself: restored by a window that held signals after it forgot the signal.
        if signum not in _ANSWERED and signal.getsignal(signum) in (signal.SIG_DFL, _end):
            signal.signal(signum, _end)
            _ANSWERED.add(signum)


def _unanswer() -> None:
    """Give the signals this module answers their default action back (where it still
    answers them: a handler set since is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in list(_ANSWERED):
        if signal.getsignal(signum) is _end:
            signal.signal(signum, signal.SIG_DFL)
        _ANSWERED.discard(signum)


atexit.register(remove_all)
