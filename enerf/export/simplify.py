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
        if len(out_f) <= target_faces:
            break
        target = max(1, target - (len(out_f) - target_faces) - 1)
    else:
        raise EnerfError(f"could not decimate the mesh to {target_faces} faces")
    used = np.unique(out_f)
    remap = np.full(len(out_v), -1, np.int64)
    remap[used] = np.arange(len(used))
    return np.asarray(out_v, np.float64)[used], remap[np.asarray(out_f, np.int64)]
