"""Datasets as deterministic, seeded batch sources (:class:`~benchmark.data.base.DataSource`),
registered by name: digits (embedded), CIFAR-10/100, ImageNet folders (PIL or GPU decoding),
COCO, CityScapes, WMT16, and text for language models (WikiText-2 with a C4 shard; CPython's
documentation, embedded), and the stand-in writers (``prunebench fake-data``). Importing the
package registers every dataset.

May import: core, config.
"""

# Every dataset module registers its builders on import.
from benchmark.data import classification, imagenet, language, segmentation, translation  # noqa: F401
from benchmark.data.base import DATASETS, DataSource, build_dataset

__all__ = ["DATASETS", "DataSource", "build_dataset"]
