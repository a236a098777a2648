"""Geometry of the synthetic scene: textured planes, quads, spheres and boxes, ray-traced in numpy.

``default_geometry`` is the scene's layout (the ``"geometry"`` entry of scene.json);
``geometry_from_dict`` / ``load_geometry`` turn that into a traceable ``Geometry``, and
``trace_rays`` gives the exact colour and first-hit distance of any world-frame ray. Shading
is texture colour times a fixed Lambert factor, so a surface point has the same colour from
every view.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError
from .textures import build_texture, sample_texture

__all__ = ["FORMAT", "Geometry", "default_geometry", "geometry_from_dict", "load_geometry", "trace_rays"]

FORMAT = "enerf-synthetic-v1"
_CHUNK = 1 << 16  # rays per tracing chunk
_EPS = 1e-9


# ----------------------------------------------------------------------------- primitives


class _Plane:
    """Plane through ``corner`` spanned by ``edge_u`` / ``edge_v`` (orthogonal; one texture period).

    ``bounded``: a quad with (a, b) in [0, 1]^2; otherwise infinite with wrapped texture.
    """

    def __init__(self, spec: dict, bounded: bool):
        self.corner = np.asarray(spec["corner"], dtype=np.float64)
        self.edge_u = np.asarray(spec["edge_u"], dtype=np.float64)
        self.edge_v = np.asarray(spec["edge_v"], dtype=np.float64)
        self.normal = np.asarray(spec["normal"], dtype=np.float64)
        self.bounded = bounded
        self.wrap = spec.get("wrap", "clamp" if bounded else "mirror")

    def intersect(self, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        denom = d @ self.normal
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ((self.corner - o) @ self.normal) / denom
        ok = np.isfinite(t) & (t > _EPS) & (np.abs(denom) > 1e-12)
        if self.bounded:
            a, b = self._coords(o + np.where(ok, t, 0.0)[:, None] * d)
            ok &= (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)
        return np.where(ok, t, np.inf)

    def _coords(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rel = x - self.corner
        return rel @ self.edge_u / (self.edge_u @ self.edge_u), rel @ self.edge_v / (self.edge_v @ self.edge_v)

    def surface(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u, v = self._coords(x)
        return u, v, np.broadcast_to(self.normal, x.shape)


class _Sphere:
    """Sphere with an equirectangular texture; u = 0.5 faces +z, v = 0 at the +y pole."""

    def __init__(self, spec: dict):
        self.center = np.asarray(spec["center"], dtype=np.float64)
        self.radius = float(spec["radius"])
        self.wrap = "repeat"

    def intersect(self, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        oc = o - self.center
        a = np.einsum("ij,ij->i", d, d)
        b = np.einsum("ij,ij->i", oc, d)
        c = np.einsum("ij,ij->i", oc, oc) - self.radius**2
        disc = b * b - a * c
        root = np.sqrt(np.maximum(disc, 0.0))
        t0 = (-b - root) / a
        t1 = (-b + root) / a
        t = np.where(t0 > _EPS, t0, t1)
        return np.where((disc >= 0) & (t > _EPS), t, np.inf)

    def surface(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = (x - self.center) / self.radius
        u = 0.5 + np.arctan2(n[:, 0], n[:, 2]) / (2 * np.pi)
        v = np.arccos(np.clip(n[:, 1], -1.0, 1.0)) / np.pi
        return u, v, n


class _Box:
    """Axis-aligned box; each face shows the whole texture (v = 0 at the face's top / far edge)."""

    # faces normal to axis k: (axis along u, axis along v); v runs down from the max side
    _FACE_AXES = {0: (2, 1), 1: (0, 2), 2: (0, 1)}

    def __init__(self, spec: dict):
        self.lo = np.asarray(spec["min"], dtype=np.float64)
        self.hi = np.asarray(spec["max"], dtype=np.float64)
        self.wrap = "clamp"

    def intersect(self, o: np.ndarray, d: np.ndarray) -> np.ndarray:
        d_safe = np.where(np.abs(d) < 1e-12, np.where(d < 0, -1e-12, 1e-12), d)
        t_lo = (self.lo - o) / d_safe
        t_hi = (self.hi - o) / d_safe
        t_near = np.minimum(t_lo, t_hi).max(axis=1)
        t_far = np.maximum(t_lo, t_hi).min(axis=1)
        t = np.where(t_near > _EPS, t_near, t_far)
        return np.where((t_near <= t_far) & (t_far > _EPS), t, np.inf)

    def surface(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dist = np.concatenate([np.abs(x - self.lo), np.abs(x - self.hi)], axis=1)  # [n, 6]
        face = dist.argmin(axis=1)
        axis = face % 3
        normal = np.zeros_like(x)
        normal[np.arange(len(x)), axis] = np.where(face < 3, -1.0, 1.0)
        size = self.hi - self.lo
        u = np.empty(len(x))
        v = np.empty(len(x))
        for k, (ua, va) in self._FACE_AXES.items():
            m = axis == k
            u[m] = (x[m, ua] - self.lo[ua]) / size[ua]
            v[m] = (self.hi[va] - x[m, va]) / size[va]
        return u, v, normal


_PRIMITIVES = {
    "plane": lambda spec: _Plane(spec, bounded=False),
    "quad": lambda spec: _Plane(spec, bounded=True),
    "sphere": _Sphere,
    "box": _Box,
}


@dataclass(frozen=True)
class Geometry:
    """A traceable scene: primitives with their textures and a directional light."""

    primitives: tuple  # tracer objects, in scene.json order
    textures: tuple  # np.ndarray [h, w, 3] float32 per primitive
    light_dir: np.ndarray  # [3] unit vector towards the light
    ambient: float
    spec: dict  # the scene.json "geometry" entry it was built from


def geometry_from_dict(spec: dict) -> Geometry:
    """Build a :class:`Geometry` from the ``"geometry"`` entry of scene.json."""
    try:
        prims = tuple(_PRIMITIVES[p["type"]](p) for p in spec["primitives"])
        textures = tuple(build_texture(p["texture"]) for p in spec["primitives"])
        light = np.asarray(spec["light"]["direction"], dtype=np.float64)
        ambient = float(spec["light"]["ambient"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"synthetic geometry spec is malformed ({type(exc).__name__}: {exc})") from None
    return Geometry(prims, textures, light / np.linalg.norm(light), ambient, spec)


def load_geometry(scene_dir: str | Path) -> Geometry:
    """The exact geometry of a scene written by :func:`make_synthetic_scene` (from scene.json)."""
    path = Path(scene_dir) / "scene.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read synthetic scene description ({type(exc).__name__})") from None
    if meta.get("format") != FORMAT:
        raise DataError(f"{path}: format {meta.get('format')!r} is not {FORMAT!r}")
    return geometry_from_dict(meta["geometry"])


def trace_rays(geometry: Geometry, origins: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Colour and hit distance of world-frame rays ``origins + t * directions``.

    Args:
        origins: np.ndarray  # [n, 3] world frame of poses_bounds.npy
        directions: np.ndarray  # [n, 3] need not be unit length

    Returns:
        rgb: np.ndarray  # [n, 3] float64 in [0, 1] (0 for rays that hit nothing)
        t: np.ndarray  # [n] float64 ray parameter of the first hit (inf for a miss)
    """
    origins = np.asarray(origins, dtype=np.float64).reshape(-1, 3)
    directions = np.asarray(directions, dtype=np.float64).reshape(-1, 3)
    n = origins.shape[0]
    rgb = np.zeros((n, 3))
    t_hit = np.full(n, np.inf)
    for start in range(0, n, _CHUNK):
        sl = slice(start, start + _CHUNK)
        rgb[sl], t_hit[sl] = _trace_chunk(geometry, origins[sl], directions[sl])
    return rgb, t_hit


def _trace_chunk(geometry: Geometry, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    best = np.full(len(o), np.inf)
    which = np.full(len(o), -1)
    for k, prim in enumerate(geometry.primitives):
        t = prim.intersect(o, d)
        closer = t < best
        best[closer] = t[closer]
        which[closer] = k
    rgb = np.zeros((len(o), 3))
    for k, (prim, tex) in enumerate(zip(geometry.primitives, geometry.textures)):
        m = np.flatnonzero(which == k)
        if m.size == 0:
            continue
        x = o[m] + best[m, None] * d[m]
        u, v, normal = prim.surface(x)
        lambert = np.maximum(normal @ geometry.light_dir, 0.0)
        shade = geometry.ambient + (1.0 - geometry.ambient) * lambert
        rgb[m] = sample_texture(tex, u, v, prim.wrap) * shade[:, None]
    return np.clip(rgb, 0.0, 1.0), best


# ----------------------------------------------------------------------------- scene layout


def _plane_spec(kind: str, center, edge_u, edge_v, texture: dict, **extra) -> dict:
    center, edge_u, edge_v = (np.asarray(a, dtype=np.float64) for a in (center, edge_u, edge_v))
    normal = np.cross(edge_v, edge_u)  # edge_u right, edge_v down -> normal towards the viewer
    return {
        "type": kind,
        "corner": (center - 0.5 * edge_u - 0.5 * edge_v).tolist(),
        "edge_u": edge_u.tolist(),
        "edge_v": edge_v.tolist(),
        "normal": (normal / np.linalg.norm(normal)).tolist(),
        "texture": texture,
        **extra,
    }


def default_geometry() -> dict:
    """The demo layout (world frame, y up, cameras near the origin looking down -z)."""
    tilt = math.radians(30.0)
    return {
        "light": {"direction": [-0.3, 0.5, 1.0], "ambient": 0.35},
        "primitives": [
            _plane_spec(
                "plane", [0.0, 0.0, -10.0], [26.0, 0.0, 0.0], [0.0, -20.3125, 0.0],
                {"mosaic": [["coffee", "rocket"], ["stereo_motorcycle", "immunohistochemistry"]], "cell": [400, 512]},
                name="background", wrap="mirror",
            ),
            {"type": "sphere", "name": "astronaut_ball", "center": [-1.6, 0.7, -5.0], "radius": 1.0,
             "texture": {"source": "astronaut"}},
            {"type": "sphere", "name": "cat_ball", "center": [2.0, -1.1, -7.5], "radius": 1.3,
             "texture": {"source": "chelsea"}},
            {"type": "box", "name": "brick_box", "min": [0.5, 0.3, -3.4], "max": [1.5, 1.1, -2.5],
             "texture": {"source": "brick", "tint": [0.95, 0.6, 0.45]}},
            {"type": "box", "name": "coin_box", "min": [-3.2, -2.3, -8.6], "max": [-1.2, -1.3, -6.4],
             "texture": {"source": "coins", "tint": [1.0, 0.85, 0.45]}},
            _plane_spec(
                "quad", [-0.2, 2.6, -9.0], [2.8 * math.cos(tilt), 0.0, 2.8 * math.sin(tilt)], [0.0, -2.0, 0.0],
                {"source": "hubble_deep_field"}, name="panel", wrap="clamp",
            ),
        ],
    }  # fmt: skip
