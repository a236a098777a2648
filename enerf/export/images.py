"""Whole images from a NeRF's fields: held-out views (evaluation) and video frames, one code path."""

from __future__ import annotations

import numpy as np
import torch

from ..config import RenderConfig
from ..cameras.rays import Rays
from ..data.scene import Scene
from ..fields.nerf import NeRFField
from ..render import Renderer, build_renderer

__all__ = ["render_rays_image", "render_view"]


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

    The one code path behind ``render_view`` (evaluation) and ``enerf render`` (videos).

    Args:
        renderer: the run's renderer with its trained estimator (``enerf.loaded_run.load_run``,
            or the trainer's). None: ``cfg.renderer``; for the grid renderers the grid is
            then read off the field (one density pass over all cells), which renders the
            same scene but costs that pass on every call.
        aabb: the scene's content box (``Scene.aabb``) for a grid read off the field; None:
            the box of ``rays``.
        bar: a progress bar (``enerf.progress.progress_bar``) advanced by the rays of every
            chunk rendered; None: none.

    Returns:
        dict of CPU tensors: rgb [H, W, 3], depth [H, W], acc [H, W] (see ``render_image``).
    """
    for field in fields.values():
        field.eval()
    rays = Rays(*(t.to(device) for t in rays))
    if renderer is None:
        renderer = build_renderer(cfg, device, rays=rays, aabb=aabb, read_off=fields["coarse"])
    return renderer.render_image(rays, fields, chunk, progress=bar.update if bar is not None else None)


def render_view(
    scene: Scene,
    index: int,
    fields: dict[str, NeRFField],
    cfg: RenderConfig,
    device: torch.device,
    renderer: Renderer | None = None,
    bar=None,
    stride: int = 1,
) -> np.ndarray:
    """Render view ``index`` of ``scene`` (see ``render_rays_image``); returns rgb [H, W, 3] float32 in
    [0, 1], or with ``stride`` s > 1 every s-th row and column of it (``Scene.rays``)."""
    out = render_rays_image(scene.rays(index, device=device, stride=stride), fields, cfg, device, renderer=renderer,
                            aabb=scene.aabb, bar=bar)
    return out["rgb"].clamp(0.0, 1.0).cpu().numpy()
