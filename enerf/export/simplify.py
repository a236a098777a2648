"""Quadric edge-collapse decimation to a target face count: ``enerf mesh --faces N``.

Garland and Heckbert's quadric error metric, as implemented by ``fast-simplification`` (the
pyvista project's binding of Sven Forstmann's Fast-Quadric-Mesh-Simplification; numpy only).
"""

from __future__ import annotations

import numpy as np

from ..errors import EnerfError

__all__ = ["decimate"]


def decimate(vertices: np.ndarray, faces: np.ndarray, target_faces: int) -> tuple[np.ndarray, np.ndarray]:
    """Collapse edges until at most ``target_faces`` faces remain (a mesh already that small is
    returned as it is).

    Args:
        vertices: [V, 3] float; faces: [F, 3] int.

    Where collapses cannot go further (a mesh of many tiny pieces: floaters), the smallest pieces
    are dropped until the count fits.

    Returns:
        vertices [V', 3] float64, faces [F', 3] int64 with F' <= target_faces, no unused vertices.
    """
    import fast_simplification

    if target_faces < 1:
        raise EnerfError(f"target face count must be at least 1, got {target_faces}")
    vertices = np.ascontiguousarray(vertices, np.float64)
    faces = np.ascontiguousarray(faces, np.int64)
    if len(faces) <= target_faces:
        return vertices, faces
    target = target_faces
    for _ in range(8):  # the collapse order can overshoot by a few faces: aim lower until it fits
        out_v, out_f = fast_simplification.simplify(vertices, faces, target_count=target)
        out_v, out_f = _compact(np.asarray(out_v, np.float64), np.asarray(out_f, np.int64))
        if len(out_f) <= target_faces or target == 1:
            break
        target = max(1, target - (len(out_f) - target_faces) - 1)
    if len(out_f) > target_faces:  # pieces too small to collapse further (floaters): keep the largest that fit
        out_v, out_f = _largest_pieces(out_v, out_f, target_faces)
    if len(out_f) == 0:
        raise EnerfError(f"could not decimate the mesh to {target_faces} faces")
    return out_v, out_f


def _compact(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    used = np.unique(faces)
    remap = np.full(len(vertices), -1, np.int64)
    remap[used] = np.arange(len(used))
    return vertices[used], remap[faces]


def _largest_pieces(vertices: np.ndarray, faces: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """The connected pieces (sharing vertices), largest first, while their faces fit ``budget``."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = len(vertices)
    rows = np.concatenate([faces[:, 0], faces[:, 1]])
    cols = np.concatenate([faces[:, 1], faces[:, 2]])
    _, labels = connected_components(coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)), directed=False)
    face_label = labels[faces[:, 0]]
    sizes = np.bincount(face_label)
    order = np.argsort(-sizes, kind="stable")
    fits = order[np.cumsum(sizes[order]) <= budget]
    return _compact(vertices, faces[np.isin(face_label, fits)])
