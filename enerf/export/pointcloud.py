"""``enerf export pointcloud``: points back-projected from the rendered depth of a set of cameras.

Every pixel of every camera (``--cameras``, the training views by default) whose accumulated
opacity is at least ``min_acc`` becomes its surface point (``enerf.views``: expected
depth along its ray, metric, NDC mapped back), kept when it lies inside the box (field
coordinates, as ``enerf mesh --bbox``; default ``default_bbox``: the cube around the point the
cameras look at for contracted captures, the content box of Blender scenes, the NDC frustum of
forward-facing ones). Each point has the pixel's rendered colour and the normal of the depth map
there. When more than ``points`` are kept, an even subsample of them (every k-th, in view and
pixel order) is written: a binary PLY (trimesh) with x y z, nx ny nz, red green blue alpha, in the
frame ``--frame``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh
from trimesh.exchange.ply import export_ply

from ..atomic import atomic_write_bytes
from ..config import PointCloudConfig
from ..errors import EnerfError
from ..loaded_run import LoadedRun
from .nerf_mesh import default_bbox
from ..cameras.rays import world_to_ndc
from ..data.camera_paths import select_cameras
from ..data.output_frame import OutputFrame
from ..views import render_views

__all__ = ["even_subsample", "pointcloud_box", "collect_points", "export_pointcloud"]


def even_subsample(n: int, target: int) -> np.ndarray:
    """Indices of ``min(n, target)`` items spread evenly over ``range(n)`` (all when n <= target)."""
    if n <= target:
        return np.arange(n)
    return np.floor(np.arange(target) * (n / target)).astype(np.int64)


def pointcloud_box(run: LoadedRun, bbox: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) [3] in field coordinates: ``bbox``, else ``default_bbox`` of the run's scene."""
    if bbox:
        return np.asarray(bbox[:3], np.float64), np.asarray(bbox[3:], np.float64)
    return default_bbox(run.scene, run.cfg.field.contraction != "none")


def _inside(run: LoadedRun, points: np.ndarray, lo: np.ndarray, hi: np.ndarray, ndc) -> np.ndarray:
    """[n] bool: scene-space ``points`` [n, 3] whose field coordinates lie in [lo, hi]."""
    import torch

    q = world_to_ndc(torch.as_tensor(points), *ndc).numpy() if ndc is not None else points
    return np.all((q >= lo) & (q <= hi), axis=-1)


def collect_points(run: LoadedRun, cfg: PointCloudConfig, progress: bool = True) -> dict[str, np.ndarray]:
    """Render the cameras and keep the points of the module docstring (scene space).

    Returns:
        dict: points [n, 3] float32, normals [n, 3] float32, colors [n, 3] float32 in [0, 1],
        candidates (int: the pixels kept before the subsample).
    """
    scene = run.scene
    cams = select_cameras(scene, cfg.cameras, cfg.frames, cfg.downscale, run.cfg.data.spherify)
    lo, hi = pointcloud_box(run, cfg.bbox)
    ndc = (cams.height, cams.width, cams.focal) if scene.use_ndc else None
    parts: dict[str, list[np.ndarray]] = {"points": [], "normals": [], "colors": []}
    for view in render_views(run, cams, normals=True, chunk=cfg.chunk, progress=progress, desc="export pointcloud"):
        keep = view.hit & (view.acc >= cfg.min_acc)
        points = view.points[keep]
        inside = _inside(run, points, lo, hi, ndc)
        parts["points"].append(points[inside].astype(np.float32))  # PLY stores float32
        parts["normals"].append(view.normals[keep][inside])
        parts["colors"].append(view.rgb[keep][inside])
    out = {k: np.concatenate(v) for k, v in parts.items()}
    n = len(out["points"])
    if n == 0:
        raise EnerfError(f"no pixel has accumulated opacity {cfg.min_acc} or more inside the box "
                         f"{lo.tolist()} .. {hi.tolist()}; lower --min_acc or give --bbox")
    index = even_subsample(n, cfg.points)
    return {**{k: v[index] for k, v in out.items()}, "candidates": n}


def export_pointcloud(run: LoadedRun, out: str | Path, cfg: PointCloudConfig, progress: bool = True) -> dict:
    """Collect the points (``collect_points``) and write them as a binary PLY at ``out`` (atomically).

    Returns:
        dict: points (written), candidates, out.
    """
    cloud = collect_points(run, cfg, progress)
    frame = OutputFrame(run.scene, cfg.frame)
    rgba = np.concatenate([cloud["colors"], np.ones((len(cloud["colors"]), 1), np.float32)], 1)
    mesh = trimesh.Trimesh(vertices=frame.points(cloud["points"]), faces=np.zeros((0, 3), np.int64),
                           vertex_normals=frame.directions(cloud["normals"]),
                           vertex_colors=(rgba * 255.0 + 0.5).astype(np.uint8), process=False)
    atomic_write_bytes(Path(out), export_ply(mesh, encoding="binary", vertex_normal=True))
    return {"points": len(cloud["points"]), "candidates": cloud["candidates"], "out": str(out)}
