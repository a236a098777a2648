"""Whole images from a NeRF's fields, the one code path of every image enerf renders: held-out views
(evaluation), video frames, exported depth and the viewer's frames."""

from __future__ import annotations

import torch

from ..config import RenderConfig
from ..cameras.rays import Rays
from ..fields.nerf import NeRFField
from ..nn.modes import eval_mode
from .build import build_renderer
from .renderer import Renderer

__all__ = ["render_rays_image"]


def render_rays_image(
    rays: Rays,
    fields: dict[str, NeRFField],
    cfg: RenderConfig,
    device: torch.device,
    chunk: int | None = None,
    renderer: Renderer | None = None,
    aabb: tuple[float, ...] | None = None,
    bar=None,
) -> dict[str, torch.Tensor]:
    """Render whole-image rays (leading shape [H, W]) with the run's renderer, ``chunk`` rays at a time.

    The networks are in eval mode while they render and get their own modes back after.

    Args:
        renderer: the run's renderer with its trained estimator (``enerf.loaded_run.load_run``,
            or the trainer's). None: ``cfg.sampler``; for the grid renderers the grid is
            then read off the field (one density pass over all cells), which renders the
            same scene but costs that pass on every call.
        aabb: the scene's content box (``Scene.aabb``) for a grid read off the field; None:
            the box of ``rays``.
        bar: a progress bar (``enerf.progress.progress_bar``) advanced by the rays of every
            chunk rendered; None: none.

    Returns:
        dict of CPU tensors: rgb [H, W, 3], depth [H, W], acc [H, W] (see ``render_image``).
    """
    rays = Rays(*(t.to(device) for t in rays))
    with eval_mode(fields.values()):
        if renderer is None:
            renderer = build_renderer(cfg, device, rays=rays, aabb=aabb, read_off=fields["coarse"])
        return renderer.render_image(rays, fields, chunk, progress=bar.update if bar is not None else None)
