"""Named pretrained weights (``model.pretrained``), found on the local disk and never downloaded.

``model.pretrained`` is either a path (a torch state-dict file or a transformers
``save_pretrained`` folder) or a *name*, which keeps the run id the same on every machine:

* ``torchvision:<Enum>.<Value>``, e.g. ``torchvision:ResNet50_Weights.IMAGENET1K_V1``: the file
  torchvision's weights API downloads, ``<torch hub dir>/checkpoints/<file name of its URL>``
  (``$TORCH_HOME/hub/checkpoints``, by default ``~/.cache/torch/hub/checkpoints``). The
  ``-<hex>`` of the file name is the start of the file's SHA-256; it is checked when the file is
  loaded, so a run id that names the weights always means the same weights.
* ``hf:<repo id>``, e.g. ``hf:t5-small``: a Hugging Face Hub model in the local Hub cache
  (``$HF_HOME/hub``, by default ``~/.cache/huggingface/hub``), loaded with
  ``local_files_only``.

Planning checks only that a name is well formed and known (:func:`validate_named`); the files
must exist when a run that loads them starts (:func:`require_available`), which says which file
is missing and how to provide it on a machine without network.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from benchmark.core.errors import ConfigError

FIELD = "model.pretrained"
TORCHVISION = "torchvision:"
HF = "hf:"
# Weight names beyond torchvision's (name -> download URL); e.g. stand-in files in tests.
EXTRA_WEIGHTS: dict[str, str] = {}
_HASH = re.compile(r"-([0-9a-f]{6,64})\.[A-Za-z0-9]+$")
_HF_REPO = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
ALLOWED = (
    "a local checkpoint path, a named weight 'torchvision:<Enum>.<Value>' "
    "(e.g. 'torchvision:ResNet50_Weights.IMAGENET1K_V1'), 'hf:<repo id>' (e.g. 'hf:t5-small'), "
    "or '' for random initialisation"
)


def is_named(value: str) -> bool:
    """Whether ``model.pretrained`` names weights (``torchvision:``/``hf:``) instead of a path."""
    return value.startswith((TORCHVISION, HF)) or value in EXTRA_WEIGHTS


@dataclass(frozen=True)
class NamedFile:
    """A named weight file: its name, download URL and where the torch hub keeps it."""

    name: str
    url: str

    @property
    def file_name(self) -> str:
        """The file name torch hub stores the download under (the URL's last part)."""
        return Path(urlparse(self.url).path).name

    @property
    def path(self) -> Path:
        """``<torch hub dir>/checkpoints/<file name>`` (read at call time: TORCH_HOME may move)."""
        import torch

        return Path(torch.hub.get_dir()) / "checkpoints" / self.file_name

    @property
    def hash_prefix(self) -> str | None:
        """The SHA-256 prefix in the file name (``resnet50-0676ba61.pth``), if it has one."""
        match = _HASH.search(self.file_name)
        return match.group(1) if match else None


def named_file(value: str) -> NamedFile:
    """The file a ``torchvision:`` (or extra) name stands for; ConfigError if unknown."""
    if value in EXTRA_WEIGHTS:
        return NamedFile(value, EXTRA_WEIGHTS[value])
    if not value.startswith(TORCHVISION):
        raise ConfigError(FIELD, value, ALLOWED)
    from torchvision.models import get_weight

    try:
        weights = get_weight(value.removeprefix(TORCHVISION))
    except (ValueError, KeyError, AttributeError, TypeError):
        raise ConfigError(
            FIELD, value, f"{ALLOWED}; torchvision has no weights of that name"
        ) from None
    return NamedFile(value, weights.url)


def hf_repo(value: str) -> str:
    """The Hub repo id of an ``hf:`` name; ConfigError unless it is well formed."""
    repo = value.removeprefix(HF)
    if not value.startswith(HF) or not _HF_REPO.match(repo):
        raise ConfigError(FIELD, value, ALLOWED)
    return repo


def validate_named(value: str) -> None:
    """Planning-time check of a named weight: well formed and known (no file is read)."""
    if value.startswith(HF):
        hf_repo(value)
    else:
        named_file(value)


def hf_cache() -> Path:
    """The Hugging Face Hub cache folder (read at call time: HF_HOME may move)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def require_available(value: str) -> None:
    """Raise ConfigError naming the missing file (and how to provide it) unless the weights a
    name stands for are on this machine; nothing for paths or ''."""
    if not value or not is_named(value):
        return
    if value.startswith(HF):
        repo = hf_repo(value)
        folder = hf_cache() / f"models--{repo.replace('/', '--')}"
        if not (folder / "snapshots").is_dir():
            raise ConfigError(
                FIELD,
                value,
                f"the Hugging Face model {repo!r} in the local Hub cache: {folder} is missing. "
                f'On a machine with network run `python -c "from transformers import '
                f"AutoModel; AutoModel.from_pretrained('{repo}')\"` and copy {folder} there "
                "(or point HF_HOME at a cache that holds it); nothing is downloaded here",
            )
        return
    weights = named_file(value)
    path = weights.path
    if not path.is_file():
        enum = value.removeprefix(TORCHVISION)
        raise ConfigError(
            FIELD,
            value,
            f"the weights file {weights.file_name} in {path.parent} (missing). On a machine with "
            f'network run `python -c "import torchvision; torchvision.models.get_weight('
            f"'{enum}').get_state_dict()\"` (or download {weights.url}) and copy the file to "
            f"{path} (or point TORCH_HOME at a folder whose hub/checkpoints holds it); nothing "
            "is downloaded here",
        )


def verified_path(value: str) -> Path:
    """The local file of a ``torchvision:`` (or extra) name, after checking that it is there
    and that its SHA-256 starts with the hash in its file name (ConfigError otherwise)."""
    require_available(value)
    weights = named_file(value)
    path = weights.path
    expected = weights.hash_prefix
    if expected is not None:
        digest = _sha256(path)
        if not digest.startswith(expected):
            raise ConfigError(
                FIELD,
                value,
                f"the weights file {path} whose SHA-256 starts with {expected} (this file's is "
                f"{digest[: len(expected)]}: a partial or different download; replace it)",
            )
    return path


def _sha256(path: Path) -> str:
    """The hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
