"""Whole images from a NeRF's fields: held-out views (evaluation) and video frames, one code path."""

from __future__ import annotations

import numpy as np
import torch

from ..config import RenderConfig
from ..data.rays import Rays, flatten_rays, index_rays
from ..data.scene import Scene
from ..fields.nerf import NeRFField
from ..render import Renderer, build_renderer
from ..run import field_fns

__all__ = ["render_rays_image", "render_view", "image_chunks"]


def image_chunks(n_rays: int, chunk: int) -> list[slice]:
    """The ``chunk``-ray slices an image of ``n_rays`` rays is rendered in (the last one shorter)."""
    return [slice(start, min(start + chunk, n_rays)) for start in range(0, n_rays, chunk)]


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
        renderer: the run's renderer with its trained estimator (``enerf.run.load_run``,
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
    fns = field_fns(fields)
    if renderer is None:
        renderer = build_renderer(cfg, device, rays=rays, aabb=aabb, read_off=fns)
    # The chunks the renderer would cut, one call each, so that the bar moves between them.
    shape, flat, chunk = rays.origins.shape[:-1], flatten_rays(rays), int(chunk or cfg.chunk)
    parts: dict[str, list[torch.Tensor]] = {}
    for piece in image_chunks(flat.origins.shape[0], chunk):
        for key, value in renderer.render_image(index_rays(flat, piece), fns, chunk).items():
            parts.setdefault(key, []).append(value)
        if bar is not None:
            bar.update(piece.stop - piece.start)
    return {key: torch.cat(values).reshape(*shape, *values[0].shape[1:]) for key, values in parts.items()}


def render_view(
    scene: Scene,
    index: int,
    fields: dict[str, NeRFField],
    cfg: RenderConfig,
    device: torch.device,
    renderer: Renderer | None = None,
    bar=None,
) -> np.ndarray:
    """Render view ``index`` of ``scene`` (see ``render_rays_image``); returns rgb [H, W, 3] float32 in [0, 1]."""
    out = render_rays_image(scene.rays(index, device=device), fields, cfg, device, renderer=renderer, aabb=scene.aabb,
                            bar=bar)
    return out["rgb"].clamp(0.0, 1.0).cpu().numpy()
