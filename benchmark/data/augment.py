"""Batched augmentations on tensors (crop, flip, rotation) and normalisation, drawn from seeded
parameters so that every epoch's batches are reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class AugmentParams:
    """Per-sample augmentation draws: crop offsets (n, 2), flips (n,), angles in degrees (n,)."""

    offsets: Tensor
    flips: Tensor
    angles: Tensor

    def take(self, start: int, stop: int, device: torch.device) -> AugmentParams:
        """Return the draws for positions ``start:stop`` on ``device``."""
        return AugmentParams(
            self.offsets[start:stop].to(device),
            self.flips[start:stop].to(device),
            self.angles[start:stop].to(device),
        )


def random_crop(x: Tensor, offsets: Tensor, pad: int) -> Tensor:
    """Crop each image of ``x`` (B, C, H, W) at its own (row, col) offset in a zero-padded copy."""
    b, _, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad))
    rows = offsets[:, :1] + torch.arange(h, device=x.device)  # (B, H)
    cols = offsets[:, 1:] + torch.arange(w, device=x.device)  # (B, W)
    batch = torch.arange(b, device=x.device)[:, None, None]
    # Advanced indices split by the channel slice put the broadcast (B, H, W) dims first.
    out = padded[batch, :, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()


def horizontal_flip(x: Tensor, flips: Tensor) -> Tensor:
    """Mirror the images of ``x`` whose entry in the boolean ``flips`` is set."""
    return torch.where(flips[:, None, None, None], x.flip(-1), x)


def rotate(x: Tensor, degrees: Tensor) -> Tensor:
    """Rotate each image of ``x`` about its centre by its angle, nearest sampling, zero fill."""
    rad = torch.deg2rad(degrees.to(x.dtype))
    cos, sin, zero = rad.cos(), rad.sin(), torch.zeros_like(rad)
    theta = torch.stack(
        [torch.stack([cos, -sin, zero], dim=1), torch.stack([sin, cos, zero], dim=1)], dim=1
    )
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    # Nearest sampling matches torchvision's RandomRotation default and keeps values exact.
    return F.grid_sample(x, grid, mode="nearest", padding_mode="zeros", align_corners=False)


@dataclass(frozen=True)
class CropFlipAugment:
    """Random crop with zero padding, horizontal flip and optional random rotation, batched."""

    pad: int = 4
    max_degrees: float = 0.0

    def sample(self, n: int, g: torch.Generator) -> AugmentParams:
        """Draw the parameters for ``n`` samples from ``g`` (always the same number of draws)."""
        offsets = torch.randint(0, 2 * self.pad + 1, (n, 2), generator=g)
        flips = torch.rand(n, generator=g) < 0.5
        angles = (torch.rand(n, generator=g) * 2 - 1) * self.max_degrees
        return AugmentParams(offsets, flips, angles)

    def apply(self, x: Tensor, params: AugmentParams) -> Tensor:
        """Augment a float batch in [0, 1] (before normalisation, so padding is black)."""
        x = horizontal_flip(random_crop(x, params.offsets, self.pad), params.flips)
        if self.max_degrees > 0:
            x = rotate(x, params.angles)
        return x


@dataclass
class Normalizer:
    """Maps stored values to normalised float inputs: ``(x * scale - mean) / std`` per channel."""

    scale: float
    mean: Tensor  # (C,)
    std: Tensor  # (C,)

    def to_unit(self, x: Tensor) -> Tensor:
        """Convert stored values to floats (torch's default dtype) in the [0, 1] image range."""
        # The default dtype, not float32: tests of data-parallel equality run in float64.
        return x.to(torch.get_default_dtype()) * self.scale

    def normalize(self, x: Tensor) -> Tensor:
        """Standardise a [0, 1] batch per channel."""
        return (x - self.mean[:, None, None]) / self.std[:, None, None]
