"""Meshes for shape fitting: load, normalise, label points, sample training sets, cache them.

Conventions
-----------
* **Normalisation** (Occupancy Networks): the mesh is translated so that its bounding box is
  centred at the origin and scaled so that its longest side is 1, i.e. the shape fits the unit
  cube [-0.5, 0.5]^3. The *volume box* in which points are sampled and meshes are extracted
  is that cube grown by ``padding`` (0.1): [-0.55, 0.55]^3.
* **Signed distance**: negative inside, positive outside, zero on the surface; magnitude is
  the exact Euclidean distance to the nearest triangle (``enerf.mesh_distance.closest_points``).
* **Occupancy**: 1 inside, 0 outside. For a watertight mesh both the occupancy and the sign
  come from ``trimesh``'s ``contains`` (ray tests through Embree via ``embreex`` when
  installed, rtree otherwise). An open mesh is refused (its inside is undefined) unless
  ``allow_open``: then the sign is that of (p - q) · n(q), with q the closest surface point
  and n the normal of its face (SDF from unsigned distance), and occupancy is ``sdf < 0``.

Training samples (DeepSDF / ONet mix): ``n_uniform`` points uniform in the volume box plus,
for each sigma in ``near_sigmas``, ``n_near`` surface points moved by N(0, sigma^2 I). They are
cached in ``<cache_dir>/<mesh hash>_<settings hash>.npz``.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh

from ..atomic import atomic_write_bytes
from ..errors import DataError
from ..mesh_distance import closest_points

__all__ = [
    "MESH_SUFFIXES",
    "MeshSamples",
    "load_mesh_file",
    "normalize_mesh",
    "volume_box",
    "mesh_hash",
    "label_points",
    "sample_training_points",
    "sample_eval_points",
    "cached_samples",
]

MESH_SUFFIXES = (".obj", ".ply", ".off", ".stl", ".glb", ".gltf")


def load_mesh_file(path: str | Path) -> trimesh.Trimesh:
    """Read a triangle mesh (obj / ply / off / stl / glb); a multi-object file is merged.

    Raises:
        DataError: missing file, unknown format, unreadable, or no triangles.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: mesh file not found")
    if path.suffix.lower() not in MESH_SUFFIXES:
        raise DataError(f"{path}: unsupported mesh format {path.suffix!r}; use one of {', '.join(MESH_SUFFIXES)}")
    try:
        mesh = trimesh.load(path, force="mesh", process=True)
    except Exception as exc:  # trimesh raises many types for malformed files
        raise DataError(f"{path}: not a readable mesh ({type(exc).__name__}: {exc})".splitlines()[0]) from None
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise DataError(f"{path}: the file holds no triangles")
    return mesh


def normalize_mesh(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    """A copy centred on its bounding box and scaled so that its longest side is 1."""
    lo, hi = mesh.bounds
    extent = float(np.max(hi - lo))
    if not extent > 0:
        raise DataError("the mesh is degenerate (zero extent)")
    out = mesh.copy()
    out.apply_translation(-(lo + hi) / 2.0)
    out.apply_scale(1.0 / extent)
    return out


def volume_box(padding: float) -> tuple[np.ndarray, np.ndarray]:
    """(bbox_min, bbox_max) of the sampling / extraction box: the unit cube grown by ``padding``."""
    half = 0.5 * (1.0 + padding)
    return np.full(3, -half), np.full(3, half)


def mesh_hash(mesh: trimesh.Trimesh) -> str:
    """SHA-256 (16 hex digits) of the vertex and face arrays."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(mesh.vertices, dtype=np.float64).tobytes())
    h.update(np.ascontiguousarray(mesh.faces, dtype=np.int64).tobytes())
    return h.hexdigest()[:16]


def _check_closed(mesh: trimesh.Trimesh, allow_open: bool, name: str) -> None:
    if allow_open or mesh.is_watertight:
        return
    edges = trimesh.grouping.group_rows(mesh.edges_sorted, require_count=1)
    raise DataError(
        f"{name}: the mesh is not watertight ({len(edges)} boundary edges), so inside/outside labels would be "
        "wrong; repair it (e.g. pymeshfix.clean_from_arrays) or pass --allow_open to take the sign of the "
        "signed distance from the closest face's normal"
    )


def label_points(
    mesh: trimesh.Trimesh, points: np.ndarray, allow_open: bool = False, name: str = "mesh"
) -> tuple[np.ndarray, np.ndarray]:
    """Occupancy and signed distance of ``points`` [n, 3] w.r.t. ``mesh``.

    Returns:
        occupancy: np.ndarray  # [n] bool, True inside
        sdf: np.ndarray        # [n] float32, negative inside
    """
    _check_closed(mesh, allow_open, name)
    points = np.asarray(points, dtype=np.float64)
    closest, dist, face = closest_points(mesh, points)
    if mesh.is_watertight:
        inside = np.asarray(mesh.contains(points), dtype=bool)
    else:  # allow_open: the side of the closest face
        normals = np.asarray(mesh.face_normals)[face]
        inside = np.einsum("ij,ij->i", points - closest, normals) < 0
    sdf = np.where(inside, -dist, dist).astype(np.float32)
    return inside, sdf


@dataclass(frozen=True)
class MeshSamples:
    """Labelled points (read-only arrays).

    points: [n, 3] float32 in the volume box; occupancy: [n] float32 in {0, 1};
    sdf: [n] float32, negative inside.
    """

    points: np.ndarray
    occupancy: np.ndarray
    sdf: np.ndarray

    def __post_init__(self) -> None:
        for a in (self.points, self.occupancy, self.sdf):
            a.setflags(write=False)


def sample_training_points(
    mesh: trimesh.Trimesh,
    n_uniform: int,
    n_near: int,
    near_sigmas: tuple[float, ...],
    padding: float,
    seed: int,
    allow_open: bool = False,
    name: str = "mesh",
) -> MeshSamples:
    """ONet / DeepSDF training mix: uniform in the box plus Gaussian offsets of surface points
    (``n_near`` per sigma), labelled by ``label_points``."""
    _check_closed(mesh, allow_open, name)
    rng = np.random.default_rng(seed)
    lo, hi = volume_box(padding)
    parts = [rng.uniform(lo, hi, size=(n_uniform, 3))]
    for sigma in near_sigmas:
        surface, _ = trimesh.sample.sample_surface(mesh, n_near, seed=rng)
        parts.append(surface + rng.normal(scale=sigma, size=surface.shape))
    points = np.clip(np.concatenate(parts), lo, hi)
    inside, sdf = label_points(mesh, points, allow_open, name)
    return MeshSamples(points.astype(np.float32), inside.astype(np.float32), sdf)


def sample_eval_points(
    mesh: trimesh.Trimesh, n_points: int, padding: float, seed: int, allow_open: bool = False, name: str = "mesh"
) -> MeshSamples:
    """``n_points`` uniform points in the volume box with labels (for volumetric IoU)."""
    return sample_training_points(mesh, n_points, 0, (), padding, seed, allow_open, name)


def cached_samples(cache_dir: str | Path, mesh: trimesh.Trimesh, settings: dict, make) -> MeshSamples:
    """``make()`` once per (mesh, settings); later calls read ``<cache_dir>/<key>.npz``.

    The key joins ``mesh_hash(mesh)`` and a hash of ``settings`` (JSON); the file is written
    atomically. A corrupt cache file is rebuilt.
    """
    settings_key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    path = Path(cache_dir) / f"{mesh_hash(mesh)}_{settings_key}.npz"
    if path.is_file():
        try:
            with np.load(path) as data:
                return MeshSamples(data["points"].copy(), data["occupancy"].copy(), data["sdf"].copy())
        except Exception:  # unreadable: rebuild below
            pass
    samples = make()
    buf = io.BytesIO()
    np.savez(buf, points=samples.points, occupancy=samples.occupancy, sdf=samples.sdf,
             settings=json.dumps(settings, sort_keys=True))
    atomic_write_bytes(path, buf.getvalue())
    return samples
