"""The paper's tables that no spec rebuilds, each with the reason, so that none is silently absent.

``benchmark/experiments/paper/`` holds every numeric table of the paper; each is either an
experiment id or listed here (a test checks that).
"""

from __future__ import annotations

NOT_REPRODUCIBLE: dict[str, str] = {
    "methods": "an overview of properties, not results: `prunebench methods` prints it from the "
    "registered methods (a test checks them against this table)",
    "problem_config": "the training configurations, inputs rather than results: every spec trains "
    "with them (benchmark/experiments/problems.py, checked against this table by a test), and "
    "their dense accuracies are the 'dense model' reference of the envelope figures",
}
