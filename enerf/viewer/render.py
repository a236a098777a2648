"""The viewer's one entry into the renderer: ``render_camera`` draws a trained run from any camera.

Everything the viewer shows goes through this function, and it goes through the whole-image
path ``enerf render`` and evaluation use (``enerf.render.images.render_rays_image`` with the
run's renderer and its trained occupancy grid), so a viewer frame and an offline render of the
same camera are the same pixels. Rays are made as for a video frame (``enerf.cameras.rays.make_rays``:
pixel centres, NDC for forward-facing scenes).

Rendering never changes the run it draws: it runs under ``torch.no_grad`` with no jitter
(``Renderer.render_image`` renders with ``train=False``, so it draws no random numbers), and
the networks' train / eval modes are put back as they were (the training viewer draws between
steps of a live run).
"""

from __future__ import annotations

import math
import numpy as np
import torch

from ..cameras.rays import make_rays
from ..export.depth_colors import colorize, depth_range, depth_values
from ..loaded_run import LoadedRun
from ..nn.modes import eval_mode
from ..render.images import render_rays_image
from .draft import draft_renderer

__all__ = ["OUTPUTS", "render_camera", "focal_from_fov", "fov_from_focal"]

OUTPUTS = ("rgb", "depth", "accumulation")


def focal_from_fov(fov_y: float, height: int) -> float:
    """Focal length (pixels) of a pinhole camera ``height`` pixels tall with vertical field of view ``fov_y`` (radians)."""
    return 0.5 * height / math.tan(0.5 * fov_y)


def fov_from_focal(focal: float, height: int) -> float:
    """Vertical field of view (radians) of a camera ``height`` pixels tall with focal length ``focal`` (pixels)."""
    return 2.0 * math.atan(0.5 * height / focal)


def render_camera(run: LoadedRun, c2w: np.ndarray, width: int, height: int, focal: float, output: str = "rgb",
                colormap: str = "turbo", draft: float = 1.0) -> np.ndarray:
    """Render ``run`` from the pinhole camera ``c2w`` (scene space, columns [right, up, back, t]).

    Args:
        run: a loaded run (``enerf.loaded_run.load_run`` with a data root: it needs ``run.scene`` for
            the near / far range, NDC and the content box), or the training run's pieces in a ``LoadedRun``.
        c2w: np.ndarray  # [3, 4] or [4, 4] camera-to-world in the scene's frame.
        width, height: image size in pixels; focal: focal length in pixels (principal point at the centre).
        output: ``rgb``; ``depth`` (depth for world rays, disparity for NDC rays, colour-mapped with
            ``colormap`` over the scene's fixed range, as ``enerf render``'s depth.mp4); or
            ``accumulation`` (opacity, grey).
        draft: in (0, 1]: a draft frame with this fraction of the renderer's samples per ray
            (``draft.draft_renderer``); 1: the exact frame (the pixels of ``enerf render``).

    Returns:
        np.ndarray  # [height, width, 3] float32 in [0, 1]
    """
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    scene = run.scene
    pose = torch.as_tensor(np.asarray(c2w, dtype=np.float32)[:3, :4], device=run.device)
    rays = make_rays(int(height), int(width), float(focal), pose, scene.near, scene.far, scene.use_ndc)
    renderer = draft_renderer(run, draft) or run.renderer
    with torch.no_grad(), eval_mode(run.fields.values()):
        out = render_rays_image(rays, run.fields, renderer.cfg if renderer is not None else run.cfg.render, run.device,
                                renderer=renderer, aabb=scene.aabb)
    if output == "rgb":
        return out["rgb"].clamp(0.0, 1.0).numpy().astype(np.float32)
    if output == "accumulation":
        return np.repeat(out["acc"].clamp(0.0, 1.0).numpy()[..., None], 3, axis=-1).astype(np.float32)
    lo, hi = depth_range(scene)
    return colorize(depth_values(out, scene.use_ndc), lo, hi, colormap).astype(np.float32) / 255.0
