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

Normals come from the density's gradient: ``n = -grad sigma / |grad sigma|`` at ``p`` (the
field's ``fine`` network, else ``coarse``), differentiated with respect to scene-space points
(through the NDC warp for NDC scenes), so they point from the solid into free space.

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

from ..data.rays import ndc_to_world
from ..data.scene import Scene
from ..errors import ConfigError
from ..loaded_run import LoadedRun
from ..progress import progress_bar
from .images import render_rays_image
from .video import camera_path, frame_rays, frame_size

__all__ = ["MIN_ACC", "Cameras", "select_cameras", "ViewDepth", "render_views", "OutputFrame", "world_to_ndc",
           "density_normals"]

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
    normals: np.ndarray | None  # [H, W, 3] unit normals (0 where no hit); None when not asked for


def world_to_ndc(points: Tensor, height: int, width: int, focal: float, near: float = 1.0) -> Tensor:
    """The NDC warp of points (``enerf.data.rays.ndc_rays``): scene [..., 3], z < 0 -> NDC [..., 3]
    (the inverse of ``ndc_to_world``)."""
    x, y, z = points.unbind(-1)
    return torch.stack([-2.0 * focal / width * x / z, -2.0 * focal / height * y / z, 1.0 + 2.0 * near / z], -1)


def density_normals(field, points: np.ndarray, chunk: int, device, ndc: tuple[int, int, float] | None = None) -> np.ndarray:
    """``-grad sigma / |grad sigma|`` of ``field.density`` at scene-space ``points`` [n, 3]; with
    ``ndc`` (height, width, focal of the NDC warp) the field reads NDC coordinates.

    Returns:
        np.ndarray  # [n, 3] float32 unit normals (0 where the gradient vanishes)
    """
    out = np.zeros((len(points), 3), np.float32)
    with torch.enable_grad():
        for lo in range(0, len(points), chunk):
            p = torch.as_tensor(points[lo : lo + chunk], dtype=torch.float32, device=device).requires_grad_(True)
            q = world_to_ndc(p, *ndc) if ndc is not None else p
            sigma = field.density(q)[0].reshape(-1)
            (grad,) = torch.autograd.grad(sigma.sum(), p)
            norm = grad.norm(dim=-1, keepdim=True)
            out[lo : lo + chunk] = torch.where(norm > 0, -grad / norm.clamp_min(1e-12), 0.0).detach().cpu().numpy()
    return out


def _surface(scene: Scene, rays, t: Tensor, cams: Cameras) -> np.ndarray:
    """Scene-space points at ray parameter ``t`` [H, W] of ``rays`` (NDC rays mapped back)."""
    p = (rays.origins + t[..., None] * rays.directions).detach().cpu().double().numpy()
    if not scene.use_ndc:
        return p
    with np.errstate(divide="ignore", invalid="ignore"):  # z' = 1 is infinitely far
        return ndc_to_world(np.minimum(p, [np.inf, np.inf, 1.0 - 1e-7]), cams.height, cams.width, cams.focal, 1.0)


@torch.no_grad()
def render_views(run: LoadedRun, cams: Cameras, normals: bool = True, chunk: int = 0, progress: bool = True,
                 desc: str = "render") -> Iterator[ViewDepth]:
    """Render every camera of ``cams`` with the run's renderer (``render_rays_image``, the path of
    evaluation and videos), one ``ViewDepth`` at a time; a bar over all their rays with the time left.

    Args:
        normals: compute density-gradient normals at the hit points (one more density pass each).
        chunk: rays per forward pass (0: the checkpoint's).
    """
    scene = run.scene
    chunk = chunk or run.cfg.render.chunk
    field = run.models.get("fine") or run.models["coarse"]
    ndc = (cams.height, cams.width, cams.focal) if scene.use_ndc else None
    with progress_bar(len(cams.poses) * cams.width * cams.height, desc, progress, unit="ray") as bar:
        for k, (name, c2w) in enumerate(zip(cams.names, cams.poses)):
            bar.set_postfix_str(f"view {k + 1}/{len(cams.poses)}", refresh=False)
            rays = frame_rays(scene, c2w, cams.downscale, run.device, cams.size)
            out = render_rays_image(rays, run.models, run.cfg.render, run.device, chunk, renderer=run.renderer,
                                    aabb=scene.aabb, bar=bar)
            acc = out["acc"].float()
            hit = (acc >= MIN_ACC).numpy()
            t = out["depth"].float() / acc.clamp_min(MIN_ACC)
            points = _surface(scene, rays, t.to(rays.origins.device), cams)
            hit &= np.isfinite(points).all(-1)
            points = np.where(hit[..., None], points, 0.0)
            pose = np.asarray(c2w, np.float64)
            forward = -pose[:3, 2] / np.linalg.norm(pose[:3, 2])
            offset = points - pose[:3, 3]
            ray_depth = np.where(hit, np.linalg.norm(offset, axis=-1), 0.0).astype(np.float32)
            z_depth = np.where(hit, offset @ forward, 0.0).astype(np.float32)
            view_normals = None
            if normals:
                view_normals = np.zeros(points.shape, np.float32)
                view_normals[hit] = density_normals(field, points[hit], chunk, run.device, ndc)
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
