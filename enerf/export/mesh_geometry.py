"""Geometry the mesh exports share (``enerf mesh`` by marching cubes and by TSDF fusion): field
coordinates to and from the loader's scene space, small components dropped, orientation of a map."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ..cameras.rays import ndc_to_world, world_to_ndc
from ..data.scene import Scene

__all__ = ["PointMap", "field_to_scene", "scene_to_field", "keep_large_components", "reverses_orientation"]

PointMap = Callable[[np.ndarray], np.ndarray]  # [n, 3] -> [n, 3]


def field_to_scene(scene: Scene) -> PointMap:
    """Map field coordinates to the loader's scene space (inverse NDC for NDC scenes)."""
    if not scene.use_ndc:
        return lambda p: p
    return lambda p: ndc_to_world(p, scene.height, scene.width, scene.focal, 1.0)


def scene_to_field(scene: Scene) -> PointMap:
    """Map the loader's scene space to field coordinates (``world_to_ndc``: the NDC warp of ``ndc_rays``, near 1;
    numpy [n, 3] in and out, its dtype kept)."""
    if not scene.use_ndc:
        return lambda p: p
    return lambda p: world_to_ndc(torch.from_numpy(np.array(p)), scene.height, scene.width, scene.focal, 1.0).numpy()


def keep_large_components(vertices: np.ndarray, faces: np.ndarray, min_faces: int) -> tuple[np.ndarray, np.ndarray]:
    """Drop the connected components (sharing vertices) with fewer than ``min_faces`` faces.

    Returns:
        vertex_index [V'] int64 (kept vertices, in their old order), faces [F', 3] re-indexed.
    """
    n = len(vertices)
    if min_faces <= 1 or len(faces) == 0:
        return np.arange(n), faces
    rows = np.concatenate([faces[:, 0], faces[:, 1], faces[:, 2]])
    cols = np.concatenate([faces[:, 1], faces[:, 2], faces[:, 0]])
    graph = coo_matrix((np.ones(len(rows), np.int8), (rows, cols)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    face_label = labels[faces[:, 0]]
    sizes = np.bincount(face_label, minlength=labels.max() + 1)
    keep_faces = faces[sizes[face_label] >= min_faces]
    used = np.unique(keep_faces)
    remap = np.full(n, -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return used, remap[keep_faces]


def reverses_orientation(fn: PointMap, point: np.ndarray, eps: float = 1e-4) -> bool:
    """Whether the map ``fn`` flips orientation at ``point`` [3] (negative Jacobian determinant).

    The inverse NDC warp does (dz/dz' < 0 while dx/dx', dy/dy' > 0), so faces mapped through it
    are rewound to keep their normals pointing out of the solid.
    """
    point = np.asarray(point, np.float64)
    jac = np.stack([(fn(point + eps * e) - fn(point - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1)
    return bool(np.linalg.det(jac) < 0)
