"""Where an image comes from: one camera in, ``{rgb, depth, acc}`` out (an ``ImageSource``), so the
loops that render many cameras (``enerf eval``'s held-out views, ``enerf render``'s path) are written
once and render from a field (``field_source``: ``render_rays_image``, the run's renderer) or from
baked splats (``enerf.splats.source.splat_source``: the rasterizer) alike.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor, nn

from ..cameras.pinhole import Pinhole
from ..config import RenderConfig
from ..data.scene import Scene
from .images import render_rays_image
from .renderer import Renderer

__all__ = ["ImageSource", "field_source"]


class ImageSource(Protocol):
    """Renders one view. ``bar``: a progress bar (``enerf.progress``) advanced by the view's pixels as
    they are done. Returns CPU tensors: rgb [h, w, 3], depth [h, w] (the expected ray parameter, not
    divided by acc: z-depth for world rays, the NDC parameter for NDC rays), acc [h, w]."""

    def __call__(self, view: Pinhole, bar=None) -> dict[str, Tensor]: ...


def field_source(scene: Scene, fields: dict[str, nn.Module], cfg: RenderConfig, device: torch.device,
                 renderer: Renderer | None = None, chunk: int | None = None) -> ImageSource:
    """The views of ``scene`` rendered by ``fields`` with ``renderer`` (``render_rays_image``, ``chunk``
    rays at a time; None: ``cfg.chunk``)."""

    def render(view: Pinhole, bar=None) -> dict[str, Tensor]:
        rays = view.rays(scene.near, scene.far, scene.use_ndc, device)
        return render_rays_image(rays, fields, cfg, device, chunk, renderer=renderer, aabb=scene.aabb, bar=bar)

    return render
