"""WMT16 English-to-German translation pairs, tokenised with a local SentencePiece model.

Files under ``data.root`` (nothing is downloaded):

* the Hugging Face ``wmt16`` dataset's ``de-en`` files: ``de-en/{train,validation,test}-*.parquet``
  with a ``translation`` column of ``{"de": ..., "en": ...}`` records (pyarrow reads them), or
  the raw parallel text ``{train,validation,test}.{en,de}`` (one sentence per line);
* ``spiece.model``: the SentencePiece model (T5's own on a cluster).

Sources get T5's task prefix ("translate English to German: "); sources and targets end with
EOS and are cut to ``data.max_length`` tokens (default 128, as in the paper), which also bounds
generated translations. Batches are (source ids, target ids), int64, padded with 0 to the
longest sequence of the batch. The official validation split (newstest2015) is the harness's
validation split and the official test split (newstest2016) its test split; training batches are
shuffled by ``(seed, epoch)``. ``data.epoch_fraction`` makes one harness epoch a fixed part of a
pass over the data (the paper's budgets go down to 0.1 passes).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from benchmark.config.run import DataConfig
from benchmark.core.errors import DatasetError
from benchmark.data.base import DATASETS, Batch, DataSource, check_split
from benchmark.data.seeding import epoch_generator

MAX_LENGTH = 128
PREFIX = "translate English to German: "
SOURCE, TARGET = "en", "de"
HF_SPLITS = {"train": "train", "val": "validation", "test": "test"}
PAD_ID, EOS_ID = 0, 1
# T5 adds 100 sentinel tokens to its SentencePiece vocabulary and pads the total to a multiple
# of 128: 32,000 pieces give t5-small's 32,128 embeddings.
SENTINELS = 100


def model_vocab_size(pieces: int) -> int:
    """The embedding count T5 uses for a SentencePiece model of ``pieces`` pieces."""
    return math.ceil((pieces + SENTINELS) / 128) * 128


class Ragged:
    """Token-id sequences of different lengths in one flat int32 array plus offsets."""

    def __init__(self, sequences: Sequence[Sequence[int]]) -> None:
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        self.offsets = np.concatenate([[0], np.cumsum(lengths)])
        self.flat = np.fromiter(
            (t for s in sequences for t in s), dtype=np.int32, count=int(self.offsets[-1])
        )

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def batch(self, rows: Sequence[int]) -> Tensor:
        """The sequences ``rows`` as an int64 (len(rows), longest) tensor padded with 0."""
        parts = [self.flat[self.offsets[r] : self.offsets[r + 1]] for r in rows]
        out = torch.full((len(parts), max(len(p) for p in parts)), PAD_ID, dtype=torch.int64)
        for i, part in enumerate(parts):
            out[i, : len(part)] = torch.from_numpy(part.astype(np.int64))
        return out


def read_pairs(root: Path, split: str) -> tuple[list[str], list[str]]:
    """(English, German) sentences of one split: HF parquet files, else raw parallel text."""
    shards = sorted((root / "de-en").glob(f"{split}-*.parquet"))
    if shards:
        import pandas as pd

        try:
            records = pd.concat([pd.read_parquet(s, columns=["translation"]) for s in shards])
            pairs = records["translation"].tolist()
            return [p[SOURCE] for p in pairs], [p[TARGET] for p in pairs]
        except (ImportError, OSError, ValueError, KeyError, TypeError) as err:
            raise DatasetError(f"cannot read the WMT16 {split} parquet files: {err}") from err
    src, tgt = root / f"{split}.{SOURCE}", root / f"{split}.{TARGET}"
    if not src.is_file() or not tgt.is_file():
        raise DatasetError(
            f"WMT16 {split} files under {str(root)!r} are missing: need de-en/{split}-*.parquet "
            f"(Hugging Face wmt16) or {src.name} and {tgt.name} "
            "(`prunebench fake-data wmt16` writes a stand-in)"
        )
    en = src.read_text(encoding="utf-8").splitlines()
    de = tgt.read_text(encoding="utf-8").splitlines()
    if len(en) != len(de):
        raise DatasetError(f"{src.name} has {len(en)} lines but {tgt.name} has {len(de)}")
    return en, de


def load_tokenizer(root: Path):  # -> sentencepiece.SentencePieceProcessor
    """The SentencePiece model ``root/spiece.model``."""
    import sentencepiece as spm

    path = root / "spiece.model"
    if not path.is_file():
        raise DatasetError(f"the SentencePiece model {str(path)!r} is missing (T5's spiece.model)")
    try:
        return spm.SentencePieceProcessor(model_file=str(path))
    except (OSError, RuntimeError) as err:
        raise DatasetError(f"cannot read the SentencePiece model {str(path)!r}: {err}") from err


def encode(
    tokenizer, texts: Sequence[str], prefix: str = "", max_length: int = MAX_LENGTH
) -> list[list[int]]:
    """Token ids of ``texts`` (with ``prefix``), each cut to ``max_length`` and ending with EOS."""
    ids = tokenizer.encode([prefix + t for t in texts])
    return [seq[: max_length - 1] + [EOS_ID] for seq in ids]


class TranslationSource(DataSource):
    """Tokenised sentence pairs in memory; batches padded per batch and moved to the device."""

    task = "translation"

    def __init__(self, cfg: DataConfig, device: torch.device) -> None:
        root = Path(cfg.root)
        self.tokenizer = load_tokenizer(root)
        self.name = "wmt16"
        self.num_classes = model_vocab_size(self.tokenizer.get_piece_size())
        self.max_length = cfg.max_length
        self.input_shape = (1, 1, cfg.max_length)
        self.batch_size = cfg.batch_size
        self.eval_batch_size = cfg.eval_batch_size
        self.device = device
        self.epoch_fraction = cfg.epoch_fraction
        self.references: dict[str, list[str]] = {}
        self._pairs: dict[str, tuple[Ragged, Ragged]] = {}
        for split, hf in HF_SPLITS.items():
            en, de = read_pairs(root, hf)
            if not en:
                raise DatasetError(f"the WMT16 {hf} split under {str(root)!r} is empty")
            self.references[split] = de
            sources = encode(self.tokenizer, en, PREFIX, cfg.max_length)
            targets = encode(self.tokenizer, de, max_length=cfg.max_length)
            self._pairs[split] = (Ragged(sources), Ragged(targets))
        self.num_train = len(self._pairs["train"][0])
        self.num_val = len(self._pairs["val"][0])
        self.num_test = len(self._pairs["test"][0])
        self.train_indices = torch.arange(self.num_train)
        self.val_indices = torch.arange(self.num_val)
        self.chunks = round(1 / self.epoch_fraction)

    def iters_per_epoch(self) -> int:
        """Batches per harness epoch (``epoch_fraction`` of a pass; the last may be smaller)."""
        return math.ceil(math.ceil(self.num_train / self.chunks) / self.batch_size)

    def train_batches(self, epoch: int, seed: int) -> Iterator[Batch]:
        """Yield this epoch's part of a shuffled pass; the pass's order comes from (seed, pass)."""
        passes, part = divmod(epoch, self.chunks)
        order = torch.randperm(self.num_train, generator=epoch_generator(seed, passes))
        size = math.ceil(self.num_train / self.chunks)
        chunk = order[part * size : (part + 1) * size].tolist()
        yield from self._batches("train", chunk, self.batch_size)

    def eval_batches(self, split: str) -> Iterator[Batch]:
        """Yield ``split`` in its stored order (``references(split)`` has the same order)."""
        n = len(self._pairs[check_split(split)][0])
        yield from self._batches(split, list(range(n)), self.eval_batch_size)

    def _batches(self, split: str, rows: list[int], size: int) -> Iterator[Batch]:
        src, tgt = self._pairs[split]
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            yield src.batch(part).to(self.device), tgt.batch(part).to(self.device)

    def _example_inputs(self, n: int) -> Tensor:
        return self._pairs["test"][0].batch(range(min(n, self.num_test))).to(self.device)

    def example_pair(self) -> Batch:
        """The first ``batch_size`` test (source, target) pairs, on the device."""
        return next(self._batches("test", list(range(self.num_test)), self.batch_size))

    def decode(self, ids: Tensor) -> list[str]:
        """Sentences of a batch of token ids (everything from the first EOS on is dropped)."""
        out = []
        for row in ids.tolist():
            row = row[: row.index(EOS_ID)] if EOS_ID in row else row
            # Sentinel and padding embeddings beyond the SentencePiece vocabulary are no text.
            pieces = self.tokenizer.get_piece_size()
            out.append(self.tokenizer.decode([t for t in row if t != PAD_ID and t < pieces]))
        return out


@DATASETS.register("wmt16")
def build_wmt16(cfg: DataConfig, device: torch.device) -> DataSource:
    """WMT16 EN-DE from ``cfg.root`` (HF parquet files or raw text, plus ``spiece.model``)."""
    return TranslationSource(cfg, device)
