"""Exact distance from points to the surfaces of the embedded scene (from its scene.json spec).

Used to score meshes extracted from a NeRF trained on the synthetic scene: every primitive
type of ``enerf.synthetic.scene`` has a closed-form closest point.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError

__all__ = ["primitive_distance", "surface_distance", "primitive_closest", "surface_closest"]


def _plane(spec: dict, x: np.ndarray, bounded: bool) -> np.ndarray:
    corner, eu, ev = (np.asarray(spec[k], np.float64) for k in ("corner", "edge_u", "edge_v"))
    rel = x - corner
    a = rel @ eu / (eu @ eu)
    b = rel @ ev / (ev @ ev)
    if bounded:
        a, b = np.clip(a, 0.0, 1.0), np.clip(b, 0.0, 1.0)
        closest = corner + a[:, None] * eu + b[:, None] * ev
        return np.linalg.norm(x - closest, axis=1)
    normal = np.asarray(spec["normal"], np.float64)
    return np.abs(rel @ (normal / np.linalg.norm(normal)))


def _sphere(spec: dict, x: np.ndarray) -> np.ndarray:
    return np.abs(np.linalg.norm(x - np.asarray(spec["center"], np.float64), axis=1) - float(spec["radius"]))


def _box(spec: dict, x: np.ndarray) -> np.ndarray:
    lo, hi = np.asarray(spec["min"], np.float64), np.asarray(spec["max"], np.float64)
    center, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    q = np.abs(x - center) - half
    outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
    inside = np.minimum(q.max(axis=1), 0.0)
    return np.abs(outside + inside)  # |signed distance| = distance to the box's surface


_DISTANCES = {
    "plane": lambda spec, x: _plane(spec, x, bounded=False),
    "quad": lambda spec, x: _plane(spec, x, bounded=True),
    "sphere": _sphere,
    "box": _box,
}


def primitive_distance(spec: dict, points: np.ndarray) -> np.ndarray:
    """Distance of points [n, 3] to the surface of one scene.json primitive -> [n]."""
    kind = spec.get("type")
    if kind not in _DISTANCES:
        raise DataError(f"no distance for primitive type {kind!r}")
    return _DISTANCES[kind](spec, np.asarray(points, np.float64).reshape(-1, 3))


def surface_distance(geometry_spec: dict, points: np.ndarray) -> np.ndarray:
    """Distance of points [n, 3] (world frame of poses_bounds.npy) to the nearest surface -> [n]."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    dist = np.full(len(points), np.inf)
    for spec in geometry_spec["primitives"]:
        dist = np.minimum(dist, primitive_distance(spec, points))
    return dist


def primitive_closest(spec: dict, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closest point on one primitive's surface [n, 3] and the unit normal there [n, 3].

    Normals point out of solids (spheres, boxes) and along ``normal`` for planes and quads. A
    point outside a box whose closest point is on an edge or corner gets the direction from that
    point to it (the distance's gradient), which is the face normal wherever one is defined.
    """
    x = np.asarray(points, np.float64).reshape(-1, 3)
    kind = spec.get("type")
    if kind == "sphere":
        center, radius = np.asarray(spec["center"], np.float64), float(spec["radius"])
        rel = x - center
        norm = np.linalg.norm(rel, axis=1, keepdims=True)
        normal = np.where(norm > 0, rel / np.maximum(norm, 1e-300), np.array([0.0, 0.0, 1.0]))
        return center + radius * normal, normal
    if kind in ("plane", "quad"):
        corner, eu, ev = (np.asarray(spec[k], np.float64) for k in ("corner", "edge_u", "edge_v"))
        normal = np.asarray(spec["normal"], np.float64)
        normal = normal / np.linalg.norm(normal)
        rel = x - corner
        a, b = rel @ eu / (eu @ eu), rel @ ev / (ev @ ev)
        if kind == "quad":
            a, b = np.clip(a, 0.0, 1.0), np.clip(b, 0.0, 1.0)
            closest = corner + a[:, None] * eu + b[:, None] * ev
        else:
            closest = x - (rel @ normal)[:, None] * normal
        return closest, np.broadcast_to(normal, x.shape).copy()
    if kind == "box":
        lo, hi = np.asarray(spec["min"], np.float64), np.asarray(spec["max"], np.float64)
        closest = np.clip(x, lo, hi)
        away = x - closest
        dist = np.linalg.norm(away, axis=1)
        outside = dist > 0
        normal = np.zeros_like(x)
        normal[outside] = away[outside] / dist[outside, None]
        inner = np.flatnonzero(~outside)  # inside (or on) the box: the nearest face
        to_face = np.concatenate([x[inner] - lo, hi - x[inner]], axis=1)  # [m, 6]
        face = to_face.argmin(axis=1)
        axis = face % 3
        closest[inner, axis] = np.where(face < 3, lo[axis], hi[axis])
        normal[inner, axis] = np.where(face < 3, -1.0, 1.0)
        return closest, normal
    raise DataError(f"no closest point for primitive type {kind!r}")


def surface_closest(geometry_spec: dict, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distance [n] of points [n, 3] to the nearest surface of the scene and the unit normal [n, 3]
    at the closest point on it (``primitive_closest``)."""
    x = np.asarray(points, np.float64).reshape(-1, 3)
    dist = np.full(len(x), np.inf)
    normal = np.zeros_like(x)
    for spec in geometry_spec["primitives"]:
        closest, n = primitive_closest(spec, x)
        d = np.linalg.norm(x - closest, axis=1)
        nearer = d < dist
        dist[nearer], normal[nearer] = d[nearer], n[nearer]
    return dist, normal
