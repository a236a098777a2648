"""Render Gaussians into one pinhole camera: the 3DGS image formation in pure torch (any device,
differentiable), or gsplat's CUDA rasterizer where it is installed and the tensors are on CUDA.

(Stub: the implementation lands next.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .gaussians import Splats

__all__ = ["SplatCamera", "rasterize"]


@dataclass(frozen=True)
class SplatCamera:
    """A pinhole camera in the splats' frame, principal point at the image centre (as ``enerf.cameras.rays``)."""

    c2w: Tensor  # [3, 4] camera-to-world, columns [right, up, back, t] (OpenGL axes)
    width: int
    height: int
    focal: float  # pixels


def rasterize(splats: Splats, camera: SplatCamera, background: Tensor | None = None) -> dict[str, Tensor]:
    """Render ``splats`` into ``camera`` (front-to-back alpha compositing of the projected Gaussians).

    Args:
        background: Tensor  # [3] colour behind the splats (None: black)
    Returns:
        dict: rgb [H, W, 3], acc [H, W] (accumulated opacity), depth [H, W] (expected camera z-depth
        of the splats, weighted, not divided by acc)
    """
    raise NotImplementedError
