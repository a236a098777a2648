"""Surfaces of the shape networks: marching cubes of the occupancy / SDF field on a grid."""

from __future__ import annotations

import time
from pathlib import Path

import torch
import trimesh

from ..errors import EnerfError
from ..export.isosurface import isosurface, query_grid, save_mesh
from ..loaded_run import load_run
from ..nn.modes import eval_mode
from ..runfolder import check_output_file
from ..fields.shape import ISO_LEVEL, ShapeField
from .mesh import volume_box

__all__ = ["SHAPE_MESH_FORMATS", "extract_mesh", "mesh_from_checkpoint"]

SHAPE_MESH_FORMATS = (".ply", ".obj", ".off", ".stl", ".glb")


def extract_mesh(
    field: ShapeField, bbox_min, bbox_max, resolution: int, device: torch.device, chunk: int = 65536,
    progress: bool = False,
) -> trimesh.Trimesh:
    """Marching cubes of the field's surface (level 0.5 of the occupancy probability, or 0 of
    the SDF) on a ``resolution``^3 grid over the box; faces wound with outward normals.
    ``progress``: a bar over the grid's points (``enerf.progress``; on a terminal). The field
    is queried in eval mode and keeps its own mode after."""
    level, inside = ISO_LEVEL[field.kind]
    with eval_mode([field]):
        values = query_grid(field.surface_value, bbox_min, bbox_max, resolution, chunk=chunk, device=device,
                            progress=progress, desc=f"{field.kind} {resolution}^3")
    vertices, faces = isosurface(values, bbox_min, bbox_max, level, inside=inside)
    return trimesh.Trimesh(vertices, faces, process=False)


def mesh_from_checkpoint(
    ckpt: str | Path, resolution: int, out: str | Path | None = None, device_name: str | None = None,
    progress: bool = True,
) -> tuple[Path, trimesh.Trimesh, float]:
    """``enerf shape mesh``: extract the surface at ``resolution``^3 and write it (default
    ``<run>/mesh_<R>.ply``).

    Returns (path, mesh, seconds spent on grid queries + marching cubes).
    """
    run = load_run(ckpt, device_name=device_name, task="shape")
    path = Path(out) if out else run.folder / f"mesh_{resolution}.ply"
    if path.suffix.lower() not in SHAPE_MESH_FORMATS:
        raise EnerfError(f"--out {path}: choose a .ply, .obj, .off, .stl or .glb file name")
    check_output_file(path, "--out")
    lo, hi = volume_box(run.cfg.data.padding)
    tic = time.perf_counter()
    mesh = extract_mesh(run.fields["field"], lo, hi, resolution, run.device, run.cfg.train.chunk, progress)
    seconds = time.perf_counter() - tic
    save_mesh(path, mesh)
    return path, mesh, seconds
