"""A set of cameras rendered to metric depth, accumulation, colour and normals: the one rendering
loop behind ``enerf export depth``, ``enerf export pointcloud`` and ``enerf mesh --method tsdf``.

Depth is the expected ray termination given a hit, ``t = sum_i w_i t_i / acc`` (acc = sum_i w_i),
turned into the surface point ``p`` in scene space: ``origins + t directions`` for world rays,
``ndc_to_world`` of the NDC point for forward-facing (NDC) scenes. Contracted captures march in
world coordinates (the contraction is inside the field), so their ``t`` is metric already. From
``p`` and the camera centre ``c``:

* ray depth ``|p - c|`` (distance along the ray),
* z-depth ``(p - c) . forward`` (along the optical axis, ``forward = -c2w[:3, 2]``); for a pixel
  whose ray makes the angle a with the optical axis, z = ray depth x cos a.

Pixels with ``acc < MIN_ACC`` hit nothing: their depths, points and normals are 0.

Normals come from the depth map (``depth_normals``): the cross product of the surface points'
differences to their neighbours along the image's rows and columns (central differences; at a
depth edge, the one-sided difference on the near side of it), turned towards the camera (the density's gradient follows the high-frequency noise of trained
grid fields).

The cameras come from ``enerf.data.camera_paths`` (``Cameras``, ``select_cameras``); the frame an
export is written in from ``enerf.data.output_frame``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import torch
from torch import Tensor

from .cameras.rays import ndc_to_world
from .data.camera_paths import Cameras, frame_rays
from .data.scene import Scene
from .loaded_run import LoadedRun
from .progress import progress_bar
from .render.images import render_rays_image

__all__ = ["MIN_ACC", "ViewDepth", "render_views", "depth_normals"]

MIN_ACC = 1e-3  # accumulated opacity below which a pixel hit nothing


@dataclass
class ViewDepth:
    """One camera rendered (scene space; see the module docstring). [H, W] arrays are float32."""

    name: str
    c2w: np.ndarray  # [3, 4] float64 camera-to-world, scene space
    focal: float  # pixels
    rgb: np.ndarray  # [H, W, 3] in [0, 1]
    acc: np.ndarray  # [H, W] accumulated opacity
    hit: np.ndarray  # [H, W] bool: acc >= MIN_ACC
    ray_depth: np.ndarray  # [H, W] |p - c| (0 where no hit)
    z_depth: np.ndarray  # [H, W] (p - c) . forward (0 where no hit)
    points: np.ndarray  # [H, W, 3] surface points p (0 where no hit)
    normals: np.ndarray | None  # [H, W, 3] unit normals (depth_normals; 0 where none); None when not asked for
    spread: np.ndarray | None = None  # [H, W] |expected - median termination| / median (0 where no hit): small on a
    # surface, large where the ray's weight is spread out (fog)


def _neighbour_difference(points: np.ndarray, hit: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel, the difference of ``points`` [H, W, 3] to the next pixel along ``axis`` (0: rows,
    1: columns): central where both neighbours hit and the two steps are within a factor 2 of
    each other, else the shorter of the one-sided ones that hit (not across a depth edge); [H, W]
    bool: one exists."""
    fwd = np.zeros_like(points)
    bwd = np.zeros_like(points)
    ok_f = np.zeros(hit.shape, bool)
    ok_b = np.zeros(hit.shape, bool)
    a, b = [slice(None)] * 2, [slice(None)] * 2
    a[axis], b[axis] = slice(0, -1), slice(1, None)
    a, b = tuple(a), tuple(b)
    diff = points[b] - points[a]
    both = hit[a] & hit[b]
    fwd[a], ok_f[a] = diff, both
    bwd[b], ok_b[b] = diff, both
    len_f, len_b = np.linalg.norm(fwd, axis=-1), np.linalg.norm(bwd, axis=-1)
    use_b = ok_b & (~ok_f | (len_b < len_f))
    out = np.where(use_b[..., None], bwd, fwd)
    central = ok_f & ok_b & (len_f <= 2.0 * len_b) & (len_b <= 2.0 * len_f)
    return np.where(central[..., None], 0.5 * (fwd + bwd), out), ok_f | ok_b


def depth_normals(points: np.ndarray, hit: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Unit normals of a depth map's surface points (module docstring).

    Args:
        points: np.ndarray  # [H, W, 3] surface points (scene space)
        hit: np.ndarray  # [H, W] bool: the pixel has a surface
        centre: np.ndarray  # [3] the camera centre (normals face it)
    Returns:
        np.ndarray  # [H, W, 3] float32 (0 where no hit or no neighbour hit along a row or column)
    """
    du, ok_u = _neighbour_difference(points, hit, 1)
    dv, ok_v = _neighbour_difference(points, hit, 0)
    n = np.cross(du, dv)
    n = np.where((np.sum(n * (centre - points), -1) < 0)[..., None], -n, n)
    norm = np.linalg.norm(n, axis=-1, keepdims=True)
    good = (hit & ok_u & ok_v)[..., None] & (norm > 0)
    return np.where(good, n / np.where(good, norm, 1.0), 0.0).astype(np.float32)


def _surface(scene: Scene, rays, t: Tensor, cams: Cameras) -> np.ndarray:
    """Scene-space points at ray parameter ``t`` [H, W] of ``rays`` (NDC rays mapped back)."""
    p = (rays.origins + t[..., None] * rays.directions).detach().cpu().double().numpy()
    if not scene.use_ndc:
        return p
    with np.errstate(divide="ignore", invalid="ignore"):  # z' = 1 is infinitely far
        return ndc_to_world(np.minimum(p, [np.inf, np.inf, 1.0 - 1e-7]), cams.height, cams.width, cams.focal, 1.0)


@torch.no_grad()
def render_views(run: LoadedRun, cams: Cameras, normals: bool = True, chunk: int = 0, progress: bool = True,
                 desc: str = "render", depth: str = "mean") -> Iterator[ViewDepth]:
    """Render every camera of ``cams`` with the run's renderer (``render_rays_image``, the path of
    evaluation and videos), one ``ViewDepth`` at a time; a bar over all their rays with the time left.

    Args:
        normals: compute the normals (``depth_normals``).
        chunk: rays per forward pass (0: the checkpoint's).
        depth: ``mean`` (the module docstring's expected termination) or ``median`` (where the ray's
            cumulative weight reaches half its opacity: fog in front of a surface does not pull it).
    """
    scene = run.scene
    chunk = chunk or run.cfg.render.chunk
    with progress_bar(len(cams.poses) * cams.width * cams.height, desc, progress, unit="ray") as bar:
        for k, (name, c2w) in enumerate(zip(cams.names, cams.poses)):
            bar.set_postfix_str(f"view {k + 1}/{len(cams.poses)}", refresh=False)
            rays = frame_rays(scene, c2w, cams.downscale, run.device, cams.size)
            out = render_rays_image(rays, run.fields, run.cfg.render, run.device, chunk, renderer=run.renderer,
                                    aabb=scene.aabb, bar=bar)
            acc = out["acc"].float()
            hit = (acc >= MIN_ACC).numpy()
            t_mean, t_median = out["depth"].float() / acc.clamp_min(MIN_ACC), out["depth_median"].float()
            t = t_median if depth == "median" else t_mean
            spread = ((t_mean - t_median).abs() / t_median.clamp_min(1e-9)).numpy()
            points = _surface(scene, rays, t.to(rays.origins.device), cams)
            hit &= np.isfinite(points).all(-1)
            points = np.where(hit[..., None], points, 0.0)
            pose = np.asarray(c2w, np.float64)
            forward = -pose[:3, 2] / np.linalg.norm(pose[:3, 2])
            offset = points - pose[:3, 3]
            ray_depth = np.where(hit, np.linalg.norm(offset, axis=-1), 0.0).astype(np.float32)
            z_depth = np.where(hit, offset @ forward, 0.0).astype(np.float32)
            view_normals = depth_normals(points, hit, pose[:3, 3]) if normals else None
            yield ViewDepth(name, pose, cams.focal, out["rgb"].clamp(0.0, 1.0).numpy().astype(np.float32),
                            acc.numpy().astype(np.float32), hit, ray_depth, z_depth, points, view_normals,
                            np.where(hit, spread, 0.0).astype(np.float32))
