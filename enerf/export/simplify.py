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

    Where collapses cannot go further, the smallest pieces are dropped until the count fits (a mesh
    of many tiny pieces: floaters); when even the largest piece alone is over the count (an open
    mesh whose collapses would flip faces), its vertices are clustered on the finest grid that
    brings the faces under the count (Rossignac and Borrel's vertex clustering).

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
        pieces_v, pieces_f = _largest_pieces(out_v, out_f, target_faces)
        out_v, out_f = (pieces_v, pieces_f) if len(pieces_f) else _clustered(out_v, out_f, target_faces)
    if len(out_f) == 0:
        raise EnerfError(f"could not decimate the mesh to {target_faces} faces")
    return out_v, out_f


def _cluster(vertices: np.ndarray, faces: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """Vertices merged per grid cell of side ``cell`` (to their mean); faces that lose a corner
    and repeated faces dropped."""
    keys = np.floor((vertices - vertices.min(0)) / cell).astype(np.int64)
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = np.bincount(inverse)
    merged = np.zeros((len(counts), 3))
    np.add.at(merged, inverse, vertices)
    merged /= counts[:, None]
    f = inverse[faces]
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])]
    _, first = np.unique(np.sort(f, axis=1), axis=0, return_index=True)
    return _compact(merged, f[np.sort(first)])


def _clustered(vertices: np.ndarray, faces: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertex clustering on the finest cell (bisected on a log scale between the shortest edge
    and the bounding box's diagonal) whose mesh has at most ``budget`` faces."""
    edges = np.linalg.norm(vertices[faces[:, [1, 2, 0]]] - vertices[faces], axis=-1)
    lo = float(edges[edges > 0].min()) if (edges > 0).any() else 1e-12
    hi = float(np.linalg.norm(np.ptp(vertices, axis=0))) + lo
    best = _cluster(vertices, faces, hi)
    for _ in range(30):
        mid = float(np.sqrt(lo * hi))
        v, f = _cluster(vertices, faces, mid)
        if len(f) <= budget:
            hi, best = mid, (v, f)
        else:
            lo = mid
        if hi / lo < 1.01:
            break
    return best


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
