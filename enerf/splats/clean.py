"""Splats cropped and cleaned before they are written (``enerf export splats --crop``, ``--min_contribution``).

* **Crop**: keep the Gaussians whose centre lies in a region, given by its numbers (``CROPS``): six,
  an axis-aligned box ``x0 y0 z0 x1 y1 z1``; four, a sphere ``cx cy cz r`` (bounds included).
* **Floaters**: a Gaussian's contribution to a view is the sum over the view's pixels of its
  blending weight ``w_i = a_i prod_{j<i} (1 - a_j)`` (``enerf.splats.rasterize``), i.e. how many
  pixels' worth of colour it gives that view; those whose largest contribution over the training
  views is below a threshold are dropped (RadSplat's pruning takes the largest weight over rays;
  the sum over a view's pixels is what one backward pass of ``rasterize`` gives: with every
  Gaussian's colour ``c_i`` a constant 0.5 made from band 0 of its SH, ``d(sum rgb) / d c_i`` is
  its summed weight). A Gaussian no training camera sees (behind a wall, outside every view, or
  hidden by those in front) contributes 0.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from .gaussians import SH_C0, Splats
from ..cameras.pinhole import Pinhole
from .rasterize import rasterize

__all__ = ["CROPS", "crop_mask", "contributions", "drop_floaters"]


def _in_box(means: Tensor, box: Tensor) -> Tensor:
    return ((means >= box[:3]) & (means <= box[3:])).all(1)


def _in_sphere(means: Tensor, sphere: Tensor) -> Tensor:
    return ((means - sphere[:3]) ** 2).sum(1) <= sphere[3] ** 2


CROPS: dict[int, tuple[str, Callable[[Tensor, Tensor], Tensor]]] = {6: ("box", _in_box), 4: ("sphere", _in_sphere)}


def crop_mask(means: Tensor, crop: tuple[float, ...]) -> Tensor:
    """[N] bool: the centres ``means`` [N, 3] inside ``crop`` (6 numbers: a box, 4: a sphere; ``CROPS``)."""
    _, inside = CROPS[len(crop)]
    return inside(means, torch.as_tensor(crop, dtype=means.dtype, device=means.device))


def contributions(splats: Splats, cameras: list[Pinhole]) -> Tensor:
    """[N] each Gaussian's largest contribution (module docstring: its blending weight summed over
    a view's pixels) over ``cameras`` (in the splats' frame); 0 for one no camera draws."""
    best = torch.zeros(len(splats), device=splats.means.device)
    base = splats.map(lambda t: t.detach())
    for camera in cameras:
        dc = torch.zeros(len(splats), 1, 3, device=splats.means.device, requires_grad=True)  # colour 0.5
        shaded = Splats(base.means, base.log_scales, base.quats, base.opacity_logits, dc, base.antialiased)
        rasterize(shaded, camera)["rgb"][..., 0].sum().backward()
        if dc.grad is not None:
            best = torch.maximum(best, dc.grad[:, 0, 0] / SH_C0)
    return best


def drop_floaters(splats: Splats, cameras: list[Pinhole], threshold: float) -> tuple[Splats, int]:
    """(the Gaussians whose largest contribution over ``cameras`` is at least ``threshold``, how many were dropped)."""
    keep = contributions(splats, cameras) >= threshold
    return splats.select(keep), int((~keep).sum())
