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

``OutputFrame`` takes scene-space values to the frame written (``--frame``): ``scene`` is the
loader's normalised frame, ``world`` the capture's own (``Scene.scene_to_world``, a similarity:
lengths scale by its factor, directions rotate).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from torch import Tensor

from ..cameras.rays import ndc_to_world
from ..data.scene import Scene
from ..errors import ConfigError
from ..loaded_run import LoadedRun
from ..progress import progress_bar
from ..render.images import render_rays_image
from .video import camera_path, frame_rays, frame_size

__all__ = ["MIN_ACC", "Cameras", "select_cameras", "ViewDepth", "render_views", "OutputFrame", "world_to_ndc",
           "depth_normals"]

MIN_ACC = 1e-3  # accumulated opacity below which a pixel hit nothing


@dataclass(frozen=True)
class Cameras:
    """Pinhole cameras to render, in scene space (principal point at the image centre)."""

    poses: np.ndarray  # [M, 3, 4] camera-to-world, columns [right, up, back, t]
    names: list[str]  # one per pose: "test_003" (view 3), "train_010", "spiral_0005" (frame 5)
    size: tuple[int, int, float]  # (width, height, focal in pixels) before ``downscale``
    downscale: int

    @property
    def width(self) -> int:
        return self.size[0] // self.downscale

    @property
    def height(self) -> int:
        return self.size[1] // self.downscale

    @property
    def focal(self) -> float:
        return self.size[2] / self.downscale


def select_cameras(scene: Scene, which: str, frames: int, downscale: int = 1, spherify: bool = False) -> Cameras:
    """``test`` (held-out views), ``train``, or a camera path of ``enerf render --path`` (spiral,
    orbit, interp, ellipse, a .json file) of ``frames`` frames, rendered at 1 / ``downscale``.

    Raises:
        ConfigError: an unknown path, no held-out views, or no pixels left after ``downscale``.
    """
    poses = camera_path(scene, which, frames, spherify)
    size = frame_size(scene, which)
    if size[0] // downscale < 1 or size[1] // downscale < 1:
        raise ConfigError(f"downscale {downscale} leaves no pixels of the {size[0]}x{size[1]} images", ("downscale",))
    if which in ("test", "train"):
        views = scene.i_test if which == "test" else scene.i_train
        names = [f"{which}_{int(v):03d}" for v in views]
    else:
        stem = Path(which).stem if which.lower().endswith(".json") else which
        names = [f"{stem}_{k:04d}" for k in range(len(poses))]
    return Cameras(np.asarray(poses, np.float32), names, (int(size[0]), int(size[1]), float(size[2])), int(downscale))


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


def world_to_ndc(points: Tensor, height: int, width: int, focal: float, near: float = 1.0) -> Tensor:
    """The NDC warp of points (``enerf.cameras.rays.ndc_rays``): scene [..., 3], z < 0 -> NDC [..., 3]
    (the inverse of ``ndc_to_world``)."""
    x, y, z = points.unbind(-1)
    return torch.stack([-2.0 * focal / width * x / z, -2.0 * focal / height * y / z, 1.0 + 2.0 * near / z], -1)


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
            t = out["depth_median"].float() if depth == "median" else out["depth"].float() / acc.clamp_min(MIN_ACC)
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
                            acc.numpy().astype(np.float32), hit, ray_depth, z_depth, points, view_normals)


class OutputFrame:
    """Scene space -> the frame written: ``scene`` (identity) or ``world`` (``scene_to_world``)."""

    def __init__(self, scene: Scene, frame: str) -> None:
        if frame not in ("scene", "world"):
            raise ConfigError(f"frame must be scene or world, got {frame!r}", ("frame",))
        matrix = np.asarray(scene.scene_to_world, np.float64) if frame == "world" else np.eye(4)
        self.name = frame
        self.scale = float(np.cbrt(np.linalg.det(matrix[:3, :3])))
        self.rotation = matrix[:3, :3] / self.scale  # [3, 3] orthonormal
        self.translation = matrix[:3, 3]

    def points(self, p: np.ndarray) -> np.ndarray:
        """[..., 3] scene-space points -> [..., 3] in the frame."""
        return p @ (self.scale * self.rotation).T + self.translation

    def directions(self, d: np.ndarray) -> np.ndarray:
        """[..., 3] directions (normals) rotated into the frame."""
        return d @ self.rotation.T

    def pose(self, c2w: np.ndarray) -> np.ndarray:
        """[3, 4] camera-to-world -> [4, 4] in the frame, its rotation columns unit length."""
        out = np.eye(4)
        rot = self.rotation @ np.asarray(c2w, np.float64)[:3, :3]
        out[:3, :3] = rot / np.linalg.norm(rot, axis=0, keepdims=True)
        out[:3, 3] = self.points(np.asarray(c2w, np.float64)[:3, 3])
        return out
