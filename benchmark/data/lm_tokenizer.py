"""The tokenizers of language-model text: bytes, a transformers tokenizer folder, or the slow
tokenizer the reference code loads (``use_fast=False``), and the tokenizer an exported model
folder carries (:func:`save_tokenizer`).

* bytes (``data.tokenizer = ""`` or ``"bytes"``): the UTF-8 bytes as ids 0-255. An exported
  model gets the same mapping as a transformers tokenizer (byte-level BPE without merges), so
  that ``AutoTokenizer`` reads the folder like any other.
* a folder (or ``hf:<repo>`` in the local Hub cache): ``AutoTokenizer``, offline.
* ``data.slow_tokenizer = true``: SparseGPT's, Wanda's and PERP's ``use_fast=False``. Under
  transformers 4 that is the slow class itself; transformers 5 has no slow tokenizers (it ignores
  ``use_fast``), so a SentencePiece folder (``tokenizer.model``: Llama, Mistral, Gemma) is
  encoded with ``sentencepiece`` directly, as the slow class encodes text without special-token
  strings (BOS and EOS as ``tokenizer_config.json`` says, Llama's defaults: BOS only); any other
  folder is refused, naming the field.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmark.core.errors import ConfigError

Encode = Callable[[str], list[int]]
BYTE_VOCAB = 256
BYTES = ("", "bytes")
# Files a transformers tokenizer folder holds one of (fast, SentencePiece, BPE, WordPiece).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model")
SENTENCEPIECE = "tokenizer.model"


def byte_encode(text: str) -> list[int]:
    """UTF-8 bytes as token ids (0-255)."""
    return list(text.encode("utf-8"))


def tokenizer_folder(name: str) -> str:
    """The folder of a ``data.tokenizer``: itself, or for ``hf:<repo>`` the local Hub cache's
    snapshot of the repo (the name unchanged when it is not there)."""
    if not name.startswith("hf:"):
        return name
    from huggingface_hub import constants

    repo = name.removeprefix("hf:").replace("/", "--")
    snapshots = Path(constants.HF_HUB_CACHE) / f"models--{repo}" / "snapshots"
    found = sorted(snapshots.iterdir()) if snapshots.is_dir() else []
    return str(found[-1]) if found else name


def check_tokenizer_folder(name: str) -> str:
    """The folder of ``data.tokenizer`` ``name``, after checking that it exists and holds
    tokenizer files (ConfigError naming the field otherwise)."""
    folder = tokenizer_folder(name)
    if not Path(folder).is_dir():
        raise ConfigError(
            "data.tokenizer", name, "an existing tokenizer folder, 'hf:<repo>' or 'bytes'"
        )
    if not any((Path(folder) / f).is_file() for f in TOKENIZER_FILES):
        raise ConfigError(
            "data.tokenizer",
            name,
            f"a folder with tokenizer files (one of {', '.join(TOKENIZER_FILES)}; unset, it is "
            f"model.pretrained's folder), or 'bytes' for a model trained on bytes; {folder} has "
            "none",
        )
    return folder


def transformers_major() -> int:
    """The major version of the installed transformers."""
    import transformers

    return int(transformers.__version__.split(".")[0])


def load_tokenizer(name: str, slow: bool = False) -> tuple[Encode, int]:
    """(encode, vocabulary size): bytes for ``""`` or ``"bytes"``, else the tokenizer of folder
    ``name`` (offline; ``slow``: the references' slow tokenizer, see the module docstring). A
    missing folder, one without tokenizer files, or a slow tokenizer that cannot be had is an
    error naming the field."""
    if name in BYTES:
        return byte_encode, BYTE_VOCAB
    folder = check_tokenizer_folder(name)
    if slow and transformers_major() >= 5:
        return _sentencepiece(name, folder)
    from transformers import AutoTokenizer

    options: dict[str, Any] = {"use_fast": False} if slow else {}
    try:
        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True, **options)
    except (OSError, ValueError) as err:
        raise ConfigError("data.tokenizer", name, f"a transformers tokenizer ({err})") from None
    # The reference code tokenises with the tokenizer's defaults (BOS added where it adds one).
    return (lambda text: list(tok(text).input_ids)), len(tok)


def _sentencepiece(name: str, folder: str) -> tuple[Encode, int]:
    """The slow tokenizer of a SentencePiece folder under transformers 5: its model file with
    the BOS/EOS of its ``tokenizer_config.json`` (defaults: BOS, no EOS, as Llama's)."""
    path = Path(folder) / SENTENCEPIECE
    if not path.is_file():
        raise ConfigError(
            "data.slow_tokenizer",
            True,
            f"false for data.tokenizer = {name!r}: transformers {transformers_major()} has no "
            f"slow tokenizers (it ignores use_fast=False) and {folder} has no SentencePiece "
            f"{SENTENCEPIECE} to encode with directly (byte-level BPE folders, OPT's and "
            "GPT-2's, give the same ids fast and slow)",
        )
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(path))
    config = _tokenizer_config(Path(folder))
    head = [sp.bos_id()] if config.get("add_bos_token", True) and sp.bos_id() >= 0 else []
    tail = [sp.eos_id()] if config.get("add_eos_token", False) and sp.eos_id() >= 0 else []
    return (lambda text: [*head, *sp.encode(text), *tail]), sp.get_piece_size()


def _tokenizer_config(folder: Path) -> dict[str, Any]:
    """The folder's ``tokenizer_config.json`` ({} without one)."""
    try:
        return json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def byte_chars() -> list[str]:
    """The printable character byte-level BPE writes for each byte 0-255 (GPT-2's mapping:
    printable Latin-1 bytes stand for themselves, the others for 256 onwards)."""
    own = {*range(33, 127), *range(161, 173), *range(174, 256)}
    extra = iter(range(256, 512))
    return [chr(b) if b in own else chr(next(extra)) for b in range(256)]


def byte_tokenizer() -> Any:
    """A transformers tokenizer whose ids are the UTF-8 bytes (what ``data.tokenizer = "bytes"``
    computes): byte-level BPE over the 256 bytes without merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {c: b for b, c in enumerate(byte_chars())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def save_tokenizer(name: str, folder: Path) -> None:
    """Write the tokenizer of ``data.tokenizer`` ``name`` into ``folder`` with
    ``save_pretrained`` (bytes: :func:`byte_tokenizer`); a SentencePiece model file is copied
    too, so that a slow tokenizer can be built from the folder."""
    if name in BYTES:
        byte_tokenizer().save_pretrained(folder)
        return
    source = check_tokenizer_folder(name)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(source, local_files_only=True).save_pretrained(folder)
    if (Path(source) / SENTENCEPIECE).is_file() and not (folder / SENTENCEPIECE).exists():
        shutil.copyfile(Path(source) / SENTENCEPIECE, folder / SENTENCEPIECE)
