"""Baked splats as an image source (``enerf.render.sources.ImageSource``): ``enerf render --splats`` and
``enerf eval --splats`` render the run's cameras from a splat file (.ply, .spz, .splat) with ``rasterize``
instead of the field.

The file is read in the frame it declares (``comment enerf frame NAME``; a file without one, from
another tool, is taken to be in ``world``, the capture's own frame) and brought into the run's
scene frame, where its cameras live (``enerf.splats.files.read_splats_into_scene``). The background is
the run's (white with ``white_bkgd``, else black). Depth follows the field's convention: the expected
camera z-depth (not divided by acc) for world rays; for a forward-facing run trained in NDC, the NDC
ray parameter of each pixel's mean depth point (``t = 1 + 1 / z`` at scene z, times acc), so depth
maps read as the field's do.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cameras.pinhole import Pinhole
from ..cameras.rays import pixel_rays
from ..config import RenderConfig
from ..data.scene import Scene
from ..render.sources import ImageSource
from .gaussians import Splats

__all__ = ["run_background", "splat_source"]


def run_background(cfg: RenderConfig) -> Tensor:
    """[3] the colour a run composites onto: white with ``white_bkgd``, else black."""
    return torch.full((3,), 1.0 if cfg.white_bkgd else 0.0)


def _ndc_depth(depth: Tensor, acc: Tensor, view: Pinhole) -> Tensor:
    """[h, w] camera z-depth (weighted, not divided by acc) -> the NDC ray parameter of the mean depth
    point, times acc (near plane 1: scene z -> t = 1 + 1 / z)."""
    c2w = torch.as_tensor(view.c2w, dtype=torch.float32)[:3, :4]
    origins, directions = pixel_rays(view.height, view.width, view.focal, c2w)  # camera z component -1
    s = view.stride
    mean = depth / acc.clamp_min(1e-6)
    z = origins[::s, ::s, 2] + mean * directions[::s, ::s, 2]
    t = (1.0 + 1.0 / z.clamp_max(-1e-6)).clamp(0.0, 1.0)
    return torch.where(acc > 1e-6, acc * t, torch.zeros_like(acc))


def splat_source(splats: Splats, scene: Scene, background: Tensor | None = None) -> ImageSource:
    """The views of ``scene`` rendered from ``splats`` (in its scene frame) with ``rasterize``; a
    strided view is rendered whole and subsampled (rasterizing is cheap beside the field)."""
    from .rasterize import rasterize

    device = splats.means.device
    bkgd = background.to(device) if background is not None else None

    def render(view: Pinhole, bar=None) -> dict[str, Tensor]:
        camera = Pinhole(view.pose(device=device), int(view.width), int(view.height), float(view.focal))
        with torch.no_grad():
            out = rasterize(splats, camera, bkgd)  # the whole view: its stride is taken below
        s = view.stride
        rgb, acc, depth = (out[k][::s, ::s].float().cpu() for k in ("rgb", "acc", "depth"))
        if scene.use_ndc:
            depth = _ndc_depth(depth, acc, view)
        if bar is not None:
            bar.update(int(rgb.shape[0] * rgb.shape[1]))
        return {"rgb": rgb, "depth": depth, "acc": acc}

    return render
