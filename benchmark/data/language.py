"""Text for causal language models: WikiText-2 raw and a C4 shard from local files, and an
embedded default that ships with Python itself. Nothing is downloaded.

* ``wikitext2`` (files under ``data.root``): evaluation on WikiText-2 raw as the Hugging Face
  ``wikitext-2-raw-v1`` files hold it, either the raw release ``wikitext-2-raw/wiki.{train,
  valid,test}.raw`` or the Hub's ``wikitext-2-raw-v1/{validation,test}-*.parquet`` (a ``text``
  column); calibration and training on the C4 shard ``c4-train.00000-of-01024.json.gz`` (one
  JSON document per line with a ``text`` field, gzip), in ``data.root`` or ``data.root/en``.
* ``pydoc`` (embedded): the topics of CPython's own documentation (``pydoc_data.topics``,
  about 465k characters), split by topic into train (8 of 10), validation and test.

Evaluation text is joined as the reference code joins it (SparseGPT/Wanda/PERP: the dataset's
rows joined with ``"\\n\\n"``), tokenised once and cut into non-overlapping windows of
``data.max_length`` tokens (the tail shorter than a window is dropped). Training and calibration
windows are drawn as SparseGPT's ``get_c4`` draws them: a random document longer than a window,
then a random window of it, with a generator seeded by ``(seed, epoch)`` (calibration: the
run's seed alone). Batches are ``(ids, ids)``: the task shifts the targets itself. With
``data.train_windows = "documents"`` training goes as PERP's: each document's first window (its
tokens truncated, padded on the right), the documents in an order shuffled by ``(seed, epoch)``,
the targets ``-100`` where padded.

Tokens: bytes (256 ids, ``data.tokenizer = ""`` or ``"bytes"``) or a transformers tokenizer
folder (or ``hf:<repo>`` in the local Hub cache), loaded with ``local_files_only``
(:mod:`benchmark.data.lm_tokenizer`).
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import torch
from torch import Tensor

from benchmark.config.run import DataConfig
from benchmark.core.errors import DatasetError
from benchmark.data.base import DATASETS, Batch, DataSource, check_split
from benchmark.data.lm_tokenizer import Encode, load_tokenizer
from benchmark.data.seeding import epoch_generator

C4_SHARD = "c4-train.00000-of-01024.json.gz"
WIKITEXT_RAW = {"train": "wiki.train.raw", "val": "wiki.valid.raw", "test": "wiki.test.raw"}
WIKITEXT_PARQUET = {"train": "train", "val": "validation", "test": "test"}
# Evaluation splits of the pydoc default: topic i goes to test when i % 10 == 0, to val at 5.
PYDOC_TEST, PYDOC_VAL = 0, 5


def join_rows(rows: Sequence[str]) -> str:
    """The evaluation text as the reference code builds it: ``"\\n\\n".join(rows)``."""
    return "\n\n".join(rows)


def wikitext_rows(root: Path, split: str) -> list[str]:
    """The rows of a WikiText-2 raw split as the Hugging Face dataset holds them: one per line
    of the raw file, with its newline, blank lines as ''; or the Hub's parquet ``text`` column."""
    shards = sorted((root / "wikitext-2-raw-v1").glob(f"{WIKITEXT_PARQUET[split]}-*.parquet"))
    if shards:
        import pandas as pd

        try:
            return [t for s in shards for t in pd.read_parquet(s, columns=["text"])["text"]]
        except (ImportError, OSError, ValueError, KeyError) as err:
            raise DatasetError(f"cannot read the WikiText-2 parquet files {shards}: {err}") from err
    path = root / "wikitext-2-raw" / WIKITEXT_RAW[split]
    if not path.is_file():
        raise DatasetError(
            f"WikiText-2 {split} file {str(path)!r} is missing: need wikitext-2-raw/"
            f"{WIKITEXT_RAW[split]} (the raw release) or wikitext-2-raw-v1/"
            f"{WIKITEXT_PARQUET[split]}-*.parquet (Hugging Face) under {str(root)!r}"
        )
    with path.open(encoding="utf-8", newline="") as f:
        return [line if line.strip() else "" for line in f]


def c4_documents(root: Path) -> list[str]:
    """The ``text`` of every document of the local C4 shard (``root`` or ``root/en``)."""
    path = next((p for p in (root / C4_SHARD, root / "en" / C4_SHARD) if p.is_file()), None)
    if path is None:
        raise DatasetError(
            f"the C4 shard {C4_SHARD} is missing under {str(root)!r} (or its en/ folder): it "
            "holds the calibration and training documents"
        )
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(line)["text"] for line in f if line.strip()]
    except (OSError, EOFError, ValueError, KeyError, TypeError) as err:
        raise DatasetError(f"cannot read the C4 shard {str(path)!r}: {err}") from err


def pydoc_topics() -> dict[str, list[str]]:
    """CPython's documentation topics split into train/val/test lists of documents."""
    from pydoc_data.topics import topics

    out: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    for i, key in enumerate(sorted(topics)):
        split = {PYDOC_TEST: "test", PYDOC_VAL: "val"}.get(i % 10, "train")
        out[split].append(topics[key])
    return out


def windows(ids: Sequence[int], length: int) -> Tensor:
    """Non-overlapping windows of ``length`` tokens, (n, length) int64; the tail is dropped."""
    n = len(ids) // length
    return torch.tensor(ids[: n * length], dtype=torch.int64).view(n, length)


def draw_windows(
    documents: Sequence[str], encode: Encode, n: int, length: int, rng: random.Random
) -> Tensor:
    """``n`` windows as SparseGPT's ``get_c4`` draws them: a random document whose tokens are
    longer than ``length``, then a random window of it; (n, length) int64."""
    out = torch.empty((n, length), dtype=torch.int64)
    longest = 0
    for row in range(n):
        for _ in range(100_000):
            ids = encode(documents[rng.randint(0, len(documents) - 1)])
            longest = max(longest, len(ids))
            if len(ids) > length:
                break
        else:
            raise DatasetError(
                f"no training document has more than data.max_length = {length} tokens "
                f"(the longest has {longest})"
            )
        start = rng.randint(0, len(ids) - length - 1)
        out[row] = torch.tensor(ids[start : start + length])
    return out


# The target of a padded position (left out of the loss, as Hugging Face's label padding).
IGNORE = -100


def document_batches(
    documents: Iterable[str], encode: Encode, batch_size: int, length: int
) -> Iterator[tuple[Tensor, Tensor]]:
    """PERP's training examples: each document's first ``length`` tokens (its tokenizer's
    truncation), in the order given, ``batch_size`` to a batch, padded on the right; the
    targets hold :data:`IGNORE` where padded (causal attention: a padded position never
    changes an earlier one). Documents of fewer than 2 tokens predict nothing and are skipped;
    the documents are gone through once (a :class:`DatasetError` if they run out)."""
    ids = torch.zeros((batch_size, length), dtype=torch.int64)
    targets = torch.full((batch_size, length), IGNORE, dtype=torch.int64)
    row = 0
    for text in documents:
        tokens = encode(text)[:length]
        if len(tokens) < 2:
            continue
        ids[row, : len(tokens)] = torch.tensor(tokens)
        targets[row, : len(tokens)] = ids[row, : len(tokens)]
        row += 1
        if row == batch_size:
            yield ids, targets
            ids, targets = torch.zeros_like(ids), torch.full_like(targets, IGNORE)
            row = 0
    raise DatasetError(
        "the training documents ran out: data.epoch_iters * data.batch_size is more than the "
        'documents of at least 2 tokens (data.train_windows = "documents" takes each once per '
        "epoch)"
    )


class LanguageSource(DataSource):
    """Training documents, evaluation token windows and seeded calibration draws."""

    task = "causal_lm"

    def __init__(
        self,
        name: str,
        cfg: DataConfig,
        device: torch.device,
        train_docs: Sequence[str],
        eval_texts: dict[str, str],
    ) -> None:
        self.name = name
        self.encode, self.num_classes = load_tokenizer(cfg.tokenizer, cfg.slow_tokenizer)
        self.train_windows = cfg.train_windows
        self.max_length = cfg.max_length
        self.input_shape = (1, 1, cfg.max_length)
        self.batch_size = cfg.batch_size
        self.eval_batch_size = cfg.eval_batch_size
        self.device = device
        self.documents = list(train_docs)
        if not self.documents:
            raise DatasetError(f"{name}: no training documents")
        self._windows = {s: windows(self.encode(t), cfg.max_length) for s, t in eval_texts.items()}
        for split, w in self._windows.items():
            if len(w) == 0:
                raise DatasetError(
                    f"{name}: the {split} text is shorter than one window of data.max_length = "
                    f"{cfg.max_length} tokens"
                )
        # The training split is the evaluation windows of the training text (for "train" metrics).
        self.num_train = len(self._windows["train"])
        self.num_val = len(self._windows["val"])
        self.num_test = len(self._windows["test"])
        self.train_indices = torch.arange(self.num_train)
        self.val_indices = torch.arange(self.num_val)
        self.epoch_iters = cfg.epoch_iters

    def iters_per_epoch(self) -> int:
        """``data.epoch_iters``, or one pass over the training windows when 0."""
        return self.epoch_iters or math.ceil(self.num_train / self.batch_size)

    def train_batches(self, epoch: int, seed: int) -> Iterator[Batch]:
        """Random windows of random training documents, drawn from ``(seed, epoch)``; with
        ``data.train_windows = "documents"``, the documents' first windows instead
        (:func:`document_batches`)."""
        if self.train_windows == "documents":
            order = torch.randperm(len(self.documents), generator=epoch_generator(seed, epoch))
            batches = document_batches(
                (self.documents[i] for i in order.tolist()),
                self.encode,
                self.batch_size,
                self.max_length,
            )
            for _, (ids, targets) in zip(range(self.iters_per_epoch()), batches, strict=False):
                yield ids.to(self.device), targets.to(self.device)
            return
        rng = random.Random(int(epoch_generator(seed, epoch).initial_seed()))
        for _ in range(self.iters_per_epoch()):
            ids = draw_windows(self.documents, self.encode, self.batch_size, self.max_length, rng)
            ids = ids.to(self.device)
            yield ids, ids

    def calibration(self, n: int, seed: int) -> Tensor:
        """``n`` calibration windows drawn with the run's ``seed`` (on the device)."""
        return draw_windows(
            self.documents, self.encode, n, self.max_length, random.Random(seed)
        ).to(self.device)

    def eval_batches(self, split: str) -> Iterator[Batch]:
        """The non-overlapping windows of ``split``'s text, in order."""
        w = self._windows[check_split(split)]
        for start in range(0, len(w), self.eval_batch_size):
            ids = w[start : start + self.eval_batch_size].to(self.device)
            yield ids, ids

    def _example_inputs(self, n: int) -> Tensor:
        return self._windows["test"][:n].to(self.device)


@DATASETS.register("wikitext2")
def build_wikitext2(cfg: DataConfig, device: torch.device) -> DataSource:
    """WikiText-2 raw (evaluation) and the C4 shard (calibration, training) under ``cfg.root``."""
    texts = split_texts(cfg)  # the WikiText-2 files first: a missing one is named first
    return LanguageSource("wikitext2", cfg, device, c4_documents(Path(cfg.root)), texts)


@DATASETS.register("pydoc")
def build_pydoc(cfg: DataConfig, device: torch.device) -> DataSource:
    """CPython's documentation topics (embedded; ``cfg.root`` is not read)."""
    return LanguageSource("pydoc", cfg, device, pydoc_topics()["train"], split_texts(cfg))


def split_texts(cfg: DataConfig) -> dict[str, str]:
    """The joined text of each evaluation split ("train", "val", "test") of ``cfg``'s data set
    (WikiText-2: read from the files under ``cfg.root``; pydoc: embedded)."""
    if cfg.name == "pydoc":
        return {split: join_rows(docs) for split, docs in pydoc_topics().items()}
    root = Path(cfg.root)
    return {split: join_rows(wikitext_rows(root, split)) for split in ("train", "val", "test")}
