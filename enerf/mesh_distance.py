"""Exact distance from points to a triangle mesh: the closest point on it, its distance and the
face it lies on. Used by the mesh metrics (``enerf.metrics``) and by the shape labels
(``enerf.shapes.mesh``)."""

from __future__ import annotations

import numpy as np
import trimesh
from scipy.spatial import cKDTree

__all__ = ["closest_points", "point_mesh_distance"]


class _Proximity:
    """Closest points on a mesh: candidate triangles from scipy KD-trees, exact distances to them.

    A fine tree holds dense surface samples tagged with their face (plus every face centroid);
    a query point's ``k`` nearest samples within ``radius`` name the candidate faces and the
    exact point-triangle distance is taken to each. A point with no sample within ``radius``
    takes its candidates from a coarse tree (``coarse_samples`` points) instead, because far
    queries are slow on a dense tree. Either way the face of the nearest sample is at most one
    sample spacing farther than the true nearest face, which bounds the error (fine spacing
    near the surface, coarse spacing beyond ``radius``); in practice the true face is nearly
    always among the k candidates and the distance is exact.
    """

    def __init__(
        self,
        mesh: trimesh.Trimesh,
        samples_per_face: int = 2,
        min_samples: int = 100_000,
        coarse_samples: int = 10_000,
        radius: float = 0.03,
        k: int = 8,
    ):
        count = max(min_samples, samples_per_face * len(mesh.faces))
        points, face_index = trimesh.sample.sample_surface(mesh, count, seed=12345)
        # every face's centroid too, so that small faces are never missed
        self.fine = cKDTree(np.concatenate([points, mesh.triangles_center]))
        self.fine_face = np.concatenate([face_index, np.arange(len(mesh.faces))])
        coarse, coarse_face = trimesh.sample.sample_surface(mesh, coarse_samples, seed=54321)
        self.coarse = cKDTree(coarse)
        self.coarse_face = coarse_face
        self.triangles = np.asarray(mesh.triangles, dtype=np.float64)
        self.radius, self.k = float(radius), int(k)

    def _candidates(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Candidate faces [n, k] and a validity mask [n, k]."""
        dist, idx = self.fine.query(p, k=self.k, distance_upper_bound=self.radius)
        valid = np.isfinite(dist)
        cand = self.fine_face[np.minimum(idx, len(self.fine_face) - 1)]
        far = ~valid[:, 0]
        if far.any():
            _, cidx = self.coarse.query(p[far], k=self.k)
            cand[far] = self.coarse_face[cidx]
            valid[far] = True
        return cand, valid

    def query(self, points: np.ndarray, chunk: int = 100_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        closest = np.empty_like(points, dtype=np.float64)
        dist = np.empty(len(points), dtype=np.float64)
        face = np.empty(len(points), dtype=np.int64)
        for lo in range(0, len(points), chunk):
            p = np.asarray(points[lo : lo + chunk], dtype=np.float64)
            cand, valid = self._candidates(p)
            q = trimesh.triangles.closest_point(self.triangles[cand.reshape(-1)], np.repeat(p, self.k, axis=0))
            q = q.reshape(len(p), self.k, 3)
            d = np.where(valid, np.linalg.norm(q - p[:, None, :], axis=-1), np.inf)  # [n, k]
            best = np.argmin(d, axis=1)
            rows = np.arange(len(p))
            closest[lo : lo + chunk] = q[rows, best]
            dist[lo : lo + chunk] = d[rows, best]
            face[lo : lo + chunk] = cand[rows, best]
        return closest, dist, face


def closest_points(mesh: trimesh.Trimesh, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Closest surface points of ``points``.

    Args:
        points: np.ndarray  # [n, 3]
    Returns:
        closest [n, 3], distance [n], face index [n] of the closest triangle.
    """
    return _Proximity(mesh).query(np.asarray(points, dtype=np.float64))


def point_mesh_distance(points: np.ndarray, mesh: trimesh.Trimesh) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned distance [n] from ``points`` [n, 3] to ``mesh`` and the unit normal [n, 3] of
    the closest face."""
    _, dist, face = closest_points(mesh, points)
    return dist, np.asarray(mesh.face_normals)[face]
