"""``enerf mesh --method tsdf``: the surface the cameras saw, fused from rendered depth.

The training views (or ``--cameras``: the held-out views, a camera path) are rendered to z-depth,
accumulation and colour (``enerf.views``) and fused into a truncated signed distance field
on a ``resolution``^3 grid of voxel centres spanning the mesh's box (field coordinates, as
``--method density``; NDC for forward-facing scenes, the voxels mapped to scene space by
``field_to_scene``). For every view and voxel in front of it that projects into the image onto a
pixel with a surface (acc >= 0.001):

    sdf = z_observed(pixel) - z_voxel          (scene units, along the optical axis)
    kept when sdf > -mu,  tsdf = min(1, sdf / mu),  weight = acc(pixel)

with the truncation mu = ``TRUNCATION_VOXELS`` voxel sizes (the voxel's own size in scene units:
constant on a world grid, growing with depth on an NDC one). A voxel's TSDF and colour are the
weighted means over the views. Marching cubes (scikit-image) at 0 gives the surface, wound
outwards, less the faces that touch a voxel no view observed (the inside of a solid, behind the
truncation band); vertex colours are the weighted colours of the voxels around each vertex
(trilinear).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch
import trimesh
from scipy.ndimage import map_coordinates
from skimage import measure

from ..config import MeshConfig
from ..errors import EnerfError
from ..loaded_run import LoadedRun
from ..data.camera_paths import select_cameras
from ..views import ViewDepth, render_views
from .mesh_geometry import field_to_scene, keep_large_components, reverses_orientation

__all__ = ["TRUNCATION_VOXELS", "TsdfVolume", "tsdf_surface", "tsdf_mesh"]

TRUNCATION_VOXELS = 3.0
_CHUNK = 1 << 21  # voxels projected at a time


class TsdfVolume:
    """A TSDF on the voxel centres of a ``resolution``^3 grid over [lo, hi] (field coordinates).

    Args:
        to_scene: field coordinates [n, 3] -> scene space [n, 3] (identity, or inverse NDC).
    """

    def __init__(self, lo, hi, resolution: int, to_scene=None, truncation_voxels: float = TRUNCATION_VOXELS) -> None:
        self.lo, self.hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        if resolution < 2 or not np.all(self.hi > self.lo):
            raise EnerfError(f"TSDF grid: resolution {resolution} over the box {self.lo.tolist()} .. {self.hi.tolist()}")
        self.resolution = int(resolution)
        self.spacing = (self.hi - self.lo) / self.resolution
        axes = [self.lo[i] + (np.arange(resolution) + 0.5) * self.spacing[i] for i in range(3)]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)  # [R^3, 3] field coordinates
        if to_scene is None:
            self.points = torch.as_tensor(grid, dtype=torch.float32)
            self.mu = torch.full((len(grid),), float(truncation_voxels * self.spacing.max()))
        else:
            half = 0.5 * self.spacing
            size = np.linalg.norm(to_scene(grid + half) - to_scene(grid - half), axis=-1) / np.sqrt(3.0)
            self.points = torch.as_tensor(to_scene(grid), dtype=torch.float32)
            self.mu = torch.as_tensor(truncation_voxels * size, dtype=torch.float32)
        n = len(grid)
        self.tsdf = torch.zeros(n)  # weighted sum until ``finish``
        self.weight = torch.zeros(n)
        self.color = torch.zeros(n, 3)

    @torch.no_grad()
    def integrate(self, view: ViewDepth) -> None:
        """Fuse one rendered view (scene space) into the volume."""
        height, width = view.z_depth.shape
        rot = torch.as_tensor(view.c2w[:3, :3], dtype=torch.float32)
        rot = rot / rot.norm(dim=0, keepdim=True)
        centre = torch.as_tensor(view.c2w[:3, 3], dtype=torch.float32)
        depth = torch.as_tensor(np.where(view.hit, view.z_depth, 0.0).reshape(-1), dtype=torch.float32)
        acc = torch.as_tensor(np.where(view.hit, view.acc, 0.0).reshape(-1), dtype=torch.float32)
        rgb = torch.as_tensor(view.rgb.reshape(-1, 3))
        for lo in range(0, len(self.points), _CHUNK):
            cam = (self.points[lo : lo + _CHUNK] - centre) @ rot  # [n, 3] camera axes [right, up, back]
            z = -cam[:, 2]
            front = z > 1e-6
            zs = torch.where(front, z, torch.ones_like(z))
            col = torch.floor(view.focal * cam[:, 0] / zs + 0.5 * width)
            row = torch.floor(-view.focal * cam[:, 1] / zs + 0.5 * height)
            ok = front & (col >= 0) & (col < width) & (row >= 0) & (row < height)
            pix = torch.where(ok, row * width + col, torch.zeros_like(row)).long()
            observed, w = depth[pix], acc[pix]
            mu = self.mu[lo : lo + _CHUNK]
            sdf = observed - z
            ok &= (observed > 0) & (sdf > -mu)
            w = torch.where(ok, w, torch.zeros_like(w))
            self.tsdf[lo : lo + _CHUNK] += w * torch.clamp(sdf / mu, max=1.0)
            self.weight[lo : lo + _CHUNK] += w
            self.color[lo : lo + _CHUNK] += w[:, None] * rgb[pix]

    def surface(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Marching cubes of the fused TSDF at 0 over the observed voxels.

        Returns:
            vertices [V, 3] float64 field coordinates, faces [F, 3] int64 wound outwards (normals
            towards positive TSDF, free space), colors [V, 3] float32 in [0, 1].
        """
        r = self.resolution
        weight = self.weight.reshape(r, r, r).numpy()
        seen = weight > 0
        tsdf = np.where(seen, self.tsdf.reshape(r, r, r).numpy() / np.maximum(weight, 1e-12), 1.0)
        if not (seen.any() and tsdf[seen].min() < 0.0 < tsdf[seen].max()):
            raise EnerfError("the fused depth never crosses a surface inside the mesh's box; check --bbox")
        # scikit-image winds normals towards increasing values: march -tsdf and flip, as isosurface() does
        verts, faces, _, _ = measure.marching_cubes(-tsdf, level=0.0, spacing=tuple(self.spacing))
        # every vertex lies on an edge between two voxel centres: keep the faces whose edges join
        # observed voxels only (none between a surface's back and the unobserved inside of a solid)
        grid = verts / self.spacing
        below = np.clip(np.floor(grid + 1e-6), 0, r - 1).astype(np.int64)
        above = np.clip(np.ceil(grid - 1e-6), 0, r - 1).astype(np.int64)
        observed = seen[tuple(below.T)] & seen[tuple(above.T)]
        faces = faces[observed[faces].all(axis=1)]
        used = np.unique(faces)
        remap = np.full(len(verts), -1, np.int64)
        remap[used] = np.arange(len(used))
        verts, faces = verts[used], remap[faces]
        index = (verts / self.spacing).T  # voxel-index coordinates of the vertices (marching cubes' units)
        w = map_coordinates(weight, index, order=1, mode="nearest")
        color = self.color.reshape(r, r, r, 3).numpy()
        rgb = np.stack([map_coordinates(color[..., c], index, order=1, mode="nearest") for c in range(3)], -1)
        rgb = np.clip(rgb / np.maximum(w, 1e-12)[:, None], 0.0, 1.0).astype(np.float32)
        return verts + self.lo + 0.5 * self.spacing, np.ascontiguousarray(faces[:, ::-1]).astype(np.int64), rgb


def fuse(views: Iterable[ViewDepth], volume: TsdfVolume) -> TsdfVolume:
    """Integrate every view into ``volume``; returns it."""
    for view in views:
        volume.integrate(view)
    return volume


def tsdf_surface(run: LoadedRun, lo, hi, cfg: MeshConfig, progress: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fuse the rendered depth of ``cfg.cameras`` (the training views by default; module docstring)
    over the box [lo, hi] (field coordinates).

    Returns:
        vertices [V, 3] float64 in scene space, faces [F, 3] int64 wound outwards, colors [V, 3]
        float32 in [0, 1].
    """

    scene = run.scene
    to_scene = field_to_scene(scene) if scene.use_ndc else None
    volume = TsdfVolume(lo, hi, cfg.resolution, to_scene)
    cams = select_cameras(scene, cfg.cameras, cfg.frames, cfg.downscale, run.cfg.data.spherify)
    fuse(render_views(run, cams, normals=False, progress=progress, desc=f"tsdf: render {cfg.cameras} views"), volume)
    verts, faces, rgb = volume.surface()
    index, faces = keep_large_components(verts, faces, cfg.min_component)
    if len(faces) == 0:
        raise EnerfError(f"no connected component has {cfg.min_component} faces or more; lower --min_component")
    verts, rgb = verts[index], rgb[index]
    if to_scene is not None:
        if reverses_orientation(to_scene, verts[0]):
            faces = np.ascontiguousarray(faces[:, ::-1])
        verts = to_scene(verts)
    return verts, faces, rgb


def tsdf_mesh(run: LoadedRun, lo, hi, cfg: MeshConfig, to_output=None, progress: bool = False) -> trimesh.Trimesh:
    """``tsdf_surface`` as a mesh with RGBA vertex colours, mapped by ``to_output`` (scene space ->
    the coordinates written; orientation kept)."""

    verts, faces, rgb = tsdf_surface(run, lo, hi, cfg, progress)
    if to_output is not None:
        if reverses_orientation(to_output, verts[0]):
            faces = np.ascontiguousarray(faces[:, ::-1])
        verts = to_output(verts)
    colors = (np.concatenate([rgb, np.ones((len(rgb), 1), np.float32)], 1) * 255.0 + 0.5).astype(np.uint8)
    return trimesh.Trimesh(verts, faces, vertex_colors=colors, process=False)
