"""The architectures of the paper, registered by name (``MODELS``): classification (CIFAR ResNets,
ResNet-18/50, VGG-16, WRN-28-10, MaxViT-T), segmentation (DeepLabV3, PSPNet), translation
(T5) and causal language models (OPT, Llama). Importing the package registers every model.

May import: core, config.
"""

# Every architecture module registers its builders on import.
from benchmark.models import causal_lm, classification, segmentation, translation  # noqa: F401
from benchmark.models.registry import MODELS, build_model

__all__ = ["MODELS", "build_model"]
