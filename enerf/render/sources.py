"""Where an image comes from: one camera in, ``{rgb, depth, acc}`` out (an ``ImageSource``), so the
loops that render many cameras (``enerf eval``'s held-out views, ``enerf render``'s path) are written
once and render from a field (``field_source``: ``render_rays_image``, the run's renderer) or from
baked splats (``enerf.splats.source.splat_source``: the rasterizer) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import Tensor, nn

from ..cameras.rays import Rays, make_rays
from ..config import RenderConfig
from ..data.scene import Scene
from .images import render_rays_image
from .renderer import Renderer

__all__ = ["PinholeView", "ImageSource", "field_source"]


@dataclass(frozen=True)
class PinholeView:
    """One image to render: a pinhole camera in scene space, principal point at the image centre
    (``enerf.cameras.rays``: pixel centres at k + 0.5), and every ``stride``-th row and column of it."""

    c2w: np.ndarray  # [3, 4] camera-to-world, columns [right, up, back, t] (OpenGL axes)
    width: int
    height: int
    focal: float  # pixels
    stride: int = 1  # s > 1: the pixels of rows and columns 0, s, 2s, ...: [ceil(H / s), ceil(W / s)]

    @classmethod
    def of_scene(cls, scene: Scene, index: int, stride: int = 1) -> "PinholeView":
        """View ``index`` of ``scene`` (the pixels of ``Scene.image(index, stride)``)."""
        return cls(np.asarray(scene.poses[index], np.float32), scene.width, scene.height, scene.focal, stride)

    def rays(self, scene: Scene, device: torch.device | str | None = None) -> Rays:
        """Its rays with ``scene``'s near / far / NDC: Rays with leading shape [ceil(H / s), ceil(W / s)]
        (bit-identical to ``Scene.rays`` for a scene view)."""
        c2w = torch.tensor(np.asarray(self.c2w, np.float32)[:3, :4], dtype=torch.float32, device=device)
        rays = make_rays(self.height, self.width, self.focal, c2w, scene.near, scene.far, scene.use_ndc)
        return rays if self.stride == 1 else Rays(*(t[::self.stride, ::self.stride] for t in rays))


class ImageSource(Protocol):
    """Renders one view. ``bar``: a progress bar (``enerf.progress``) advanced by the view's pixels as
    they are done. Returns CPU tensors: rgb [h, w, 3], depth [h, w] (the expected ray parameter, not
    divided by acc: z-depth for world rays, the NDC parameter for NDC rays), acc [h, w]."""

    def __call__(self, view: PinholeView, bar=None) -> dict[str, Tensor]: ...


def field_source(scene: Scene, fields: dict[str, nn.Module], cfg: RenderConfig, device: torch.device,
                 renderer: Renderer | None = None, chunk: int | None = None) -> ImageSource:
    """The views of ``scene`` rendered by ``fields`` with ``renderer`` (``render_rays_image``, ``chunk``
    rays at a time; None: ``cfg.chunk``)."""

    def render(view: PinholeView, bar=None) -> dict[str, Tensor]:
        return render_rays_image(view.rays(scene, device), fields, cfg, device, chunk, renderer=renderer,
                                 aabb=scene.aabb, bar=bar)

    return render
