"""The smoke zero-shot task ``pydoc_cloze``: which of four spans of CPython's documentation
continues a passage. It ships as an lm-eval task YAML with its local data
(``zero_shot_tasks/pydoc_cloze.{yaml,jsonl}``), written by :func:`write_pydoc_cloze` from the
test topics of the embedded ``pydoc`` data (never trained on): a passage of ``CONTEXT``
characters, its true next ``SPAN`` characters and three spans of the same length from elsewhere
in the test topics, in a seeded random order. Chance is 25%.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

CONTEXT, SPAN, CHOICES, ITEMS, SEED = 96, 24, 4, 120, 0


def _clean(text: str) -> bool:
    """Printable ASCII and newlines only (one byte per character for the byte tokenizer)."""
    return text.isascii() and text.replace("\n", " ").isprintable()


def pydoc_cloze_items(docs: list[str]) -> list[dict[str, object]]:
    """The task's items from the documents ``docs``: context, choices and the label."""
    rng = random.Random(SEED)
    spans = [(d, p) for d, doc in enumerate(docs) for p in range(CONTEXT, len(doc) - SPAN, SPAN)]
    items: list[dict[str, object]] = []
    for d, p in rng.sample(spans, len(spans)):  # each passage once, in a random order
        context, truth = docs[d][p - CONTEXT : p], docs[d][p : p + SPAN]
        if not (_clean(context) and _clean(truth)):
            continue
        others: list[str] = []
        while len(others) < CHOICES - 1:
            od, op = spans[rng.randrange(len(spans))]
            other = docs[od][op : op + SPAN]
            if od != d and _clean(other) and other not in (truth, *others):
                others.append(other)
        label = rng.randrange(CHOICES)
        choices = [*others[:label], truth, *others[label:]]
        items.append({"context": context, "choices": choices, "label": label})
        if len(items) == ITEMS:
            break
    return items


def write_pydoc_cloze(path: Path) -> None:
    """Write the task's data (JSON lines) from the test topics of the ``pydoc`` data."""
    from benchmark.data.language import pydoc_topics

    lines = [json.dumps(item) for item in pydoc_cloze_items(pydoc_topics()["test"])]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
