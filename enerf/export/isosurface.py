"""Isosurfaces of a scalar field on a regular grid: chunked queries + scikit-image marching cubes.

Shared by NeRF mesh extraction (density) and the shape networks (occupancy / SDF).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch
import trimesh
from skimage import measure
from torch import Tensor

from ..atomic import atomic_write_bytes
from ..errors import EnerfError
from ..progress import progress_bar

__all__ = ["grid_points", "query_grid", "isosurface", "save_mesh"]

ScalarFn = Callable[[Tensor], Tensor]  # points [n, 3] -> values [n]


def grid_points(bbox_min, bbox_max, resolution: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three axes of a ``resolution``³ grid of cell corners spanning the box (inclusive)."""
    lo, hi = np.asarray(bbox_min, np.float64), np.asarray(bbox_max, np.float64)
    if resolution < 2:
        raise EnerfError(f"grid resolution must be at least 2, got {resolution}")
    if not np.all(hi > lo):
        raise EnerfError(f"empty bounding box: min {lo.tolist()} max {hi.tolist()}")
    return tuple(np.linspace(lo[i], hi[i], resolution) for i in range(3))


@torch.no_grad()
def query_grid(
    fn: ScalarFn, bbox_min, bbox_max, resolution: int, chunk: int = 65536, device: torch.device | str = "cpu",
    progress: bool = False, desc: str = "grid",
) -> np.ndarray:
    """Evaluate ``fn`` on the grid, ``chunk`` points at a time; ``progress``: a bar counting the
    points (``enerf.progress``; on a terminal), named ``desc``.

    Returns:
        values: np.ndarray  # [R, R, R] float32, indexed [ix, iy, iz]
    """
    xs, ys, zs = grid_points(bbox_min, bbox_max, resolution)
    out = np.empty((resolution,) * 3, dtype=np.float32)
    plane = np.stack(np.meshgrid(ys, zs, indexing="ij"), axis=-1).reshape(-1, 2)  # [R*R, 2]
    slab_len = max(1, chunk // plane.shape[0])
    with progress_bar(resolution**3, desc, progress, unit="pt") as bar:
        for start in range(0, resolution, slab_len):
            x = xs[start : start + slab_len]
            pts = np.concatenate(
                [np.repeat(x, plane.shape[0])[:, None], np.tile(plane, (len(x), 1))], axis=1
            )  # [len(x) * R*R, 3]
            values = []
            for lo in range(0, pts.shape[0], chunk):
                p = torch.as_tensor(pts[lo : lo + chunk], dtype=torch.float32, device=device)
                values.append(fn(p).reshape(-1).float().cpu().numpy())
                bar.update(len(p))
            out[start : start + len(x)] = np.concatenate(values).reshape(len(x), resolution, resolution)
    return out


def isosurface(
    values: np.ndarray, bbox_min, bbox_max, level: float, inside: str = "above"
) -> tuple[np.ndarray, np.ndarray]:
    """Marching cubes (scikit-image) on a grid from ``query_grid``, in world coordinates.

    Args:
        values: [R, R, R] field values on the grid spanning the box.
        level: iso-value.
        inside: ``above`` if the solid is where values > level (density, occupancy),
            ``below`` if it is where values < level (signed distance, inside negative).

    Returns:
        vertices [V, 3] float64 world coordinates, faces [F, 3] int64, wound so that face
        normals point out of the solid.
    """
    if inside not in ("above", "below"):
        raise ValueError(f"inside must be 'above' or 'below', got {inside!r}")
    if not (values.min() < level < values.max()):
        raise EnerfError(
            f"the field never crosses level {level} on the grid (range {values.min():.4g} .. {values.max():.4g}); "
            "choose another --threshold"
        )
    lo, hi = np.asarray(bbox_min, np.float64), np.asarray(bbox_max, np.float64)
    spacing = (hi - lo) / (np.asarray(values.shape) - 1)
    # scikit-image winds faces so that their right-hand normals point towards increasing
    # values; the solid lies where (signed) values are above the level, so flip the winding.
    field = values if inside == "above" else -values
    verts, faces, _, _ = measure.marching_cubes(
        field, level=level if inside == "above" else -level, spacing=tuple(spacing))
    return verts + lo, np.ascontiguousarray(faces[:, ::-1]).astype(np.int64)


def save_mesh(path: Path, mesh: trimesh.Trimesh) -> None:
    """Write ``mesh`` atomically in the format its suffix names (trimesh's exporters)."""
    path = Path(path)
    data = mesh.export(file_type=path.suffix.lower().lstrip("."))
    atomic_write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)  # obj / off are text
