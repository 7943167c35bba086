"""Python's cyclic garbage collector around the commands that train nothing.

Importing torch and pandas creates a few hundred thousand long-lived objects, and each full
pass of the collector walks all of them: the passes that the imports themselves trigger, those
a paper-scale plan's thousands of configs trigger, and the last ones at interpreter exit were
about 1 s of CPU time of a 2-3 s ``table`` or ``reproduce --dry-run`` on a 2-core VM. These
commands (tables, figures, listings, dry runs) run for seconds and leave little cyclic garbage,
so they run with the collector paused; commands that train keep it as it is.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
from collections.abc import Iterator

# Commands that read the store and the specs and write at most a table, figure or export.
TRAIN_NOTHING = frozenset(
    {"table", "plot", "list", "methods", "show", "status", "grid", "export", "cost", "schedule"}
)


def trains_nothing(args: argparse.Namespace) -> bool:
    """Whether the parsed command trains nothing: one of :data:`TRAIN_NOTHING` or a dry run."""
    return args.command in TRAIN_NOTHING or bool(getattr(args, "dry_run", False))


@contextlib.contextmanager
def paused_collector(pause: bool) -> Iterator[None]:
    """Run the block with the cyclic garbage collector paused (``pause``), and let interpreter
    exit skip the full passes over what is alive then (``gc.freeze``, registered once; in a
    process that goes on, e.g. tests calling ``main``, the collector runs again afterwards)."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        # What the block created is all in the youngest generation now, and the first young
        # pass after gc.enable() would walk it all: freeze and unfreeze put it into the oldest
        # generation at once (the documented effect of gc.unfreeze), where a full pass
        # collects its garbage later in a process that goes on.
        gc.freeze()
        gc.unfreeze()
        gc.enable()
        atexit.unregister(gc.freeze)
        atexit.register(gc.freeze)
