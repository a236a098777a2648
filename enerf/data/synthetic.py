"""The embedded demo scene: an analytic, exactly known forward-facing scene in LLFF layout.

``make_synthetic_scene`` ray-traces (in numpy, one ray through each pixel centre) a
textured background plane and a few textured spheres, boxes and a tilted panel at depths
of about 2.5 to 10, seen by cameras on a jittered grid that all look roughly down -z,
like a hand-held LLFF capture. Textures are photographs shipped inside scikit-image
(no download). Shading is texture colour times a fixed Lambert factor, so a surface
point has the same colour from every view and every pixel can be recomputed exactly:
``load_geometry(scene_dir)`` + ``trace_rays`` re-render any ray given in the world frame
of ``poses_bounds.npy`` (``Scene.scene_to_world`` maps loader rays there).

World frame: y up, cameras near z = 0 looking towards -z. Written files::

    images/000.png ...    8-bit RGB renders
    poses_bounds.npy      [N, 17] LLFF storage ([down, right, back, t, hwf] + near, far z-depth)
    scene.json            cameras, primitives, textures and light: everything trace_rays needs
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from ..errors import ConfigError, DataError

__all__ = [
    "FORMAT",
    "Geometry",
    "default_geometry",
    "synthetic_cameras",
    "geometry_from_dict",
    "load_geometry",
    "trace_rays",
    "render_view",
    "make_synthetic_scene",
    "synth_main",
]

FORMAT = "enerf-synthetic-v1"
_CHUNK = 1 << 16  # rays per tracing chunk
_EPS = 1e-9

# scikit-image sample images that ship inside the wheel (checked to load with no network).
_SKIMAGE_SOURCES = (
    "astronaut", "coffee", "chelsea", "cat", "rocket", "camera", "coins", "moon", "brick", "grass",
    "gravel", "hubble_deep_field", "immunohistochemistry", "stereo_motorcycle", "retina", "colorwheel",
    "clock", "page", "text", "cell",
)  # fmt: skip


# ----------------------------------------------------------------------------- textures


def _source_image(name: str) -> np.ndarray:
    """A scikit-image sample picture as float32 RGB [h, w, 3] in [0, 1]."""
    if name not in _SKIMAGE_SOURCES:
        raise DataError(f"texture source {name!r} is not one of the bundled scikit-image images")
    import skimage.data

    img = getattr(skimage.data, name)()
    if isinstance(img, tuple):  # stereo_motorcycle -> (left, right, disparity)
        img = img[0]
    img = np.asarray(img)
    img = img.astype(np.float32) / (255.0 if img.dtype == np.uint8 else 1.0)
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    return np.ascontiguousarray(img[:, :, :3])


def _center_crop(img: np.ndarray, height: int, width: int) -> np.ndarray:
    top, left = (img.shape[0] - height) // 2, (img.shape[1] - width) // 2
    if top < 0 or left < 0:
        raise DataError(f"texture of {img.shape[1]}x{img.shape[0]} is smaller than the {width}x{height} crop")
    return img[top : top + height, left : left + width]


def build_texture(spec: dict) -> np.ndarray:
    """Texture image from its scene.json spec: np.ndarray  # [h, w, 3] float32.

    ``{"source": name}`` or ``{"mosaic": [[name, ...], ...], "cell": [h, w]}`` (centre
    crops laid out in a grid), optionally with ``"tint": [r, g, b]`` multiplied in.
    """
    if "mosaic" in spec:
        ch, cw = spec["cell"]
        rows = [np.concatenate([_center_crop(_source_image(n), ch, cw) for n in row], 1) for row in spec["mosaic"]]
        tex = np.concatenate(rows, 0)
    else:
        tex = _source_image(spec["source"])
    if spec.get("tint") is not None:
        tex = tex * np.asarray(spec["tint"], dtype=np.float32)
    return np.ascontiguousarray(tex, dtype=np.float32)


def _wrap(index: np.ndarray, size: int, mode: str) -> np.ndarray:
    if mode == "repeat":
        return np.mod(index, size)
    if mode == "mirror":
        index = np.mod(index, 2 * size)
        return np.where(index >= size, 2 * size - 1 - index, index)
    return np.clip(index, 0, size - 1)


def sample_texture(tex: np.ndarray, u: np.ndarray, v: np.ndarray, mode: str) -> np.ndarray:
    """Bilinear lookup at texture coordinates (u right, v down; [0, 1] spans the image once).

    Texel (x, y) sits at (u, v) = ((x + 0.5) / w, (y + 0.5) / h). ``mode`` handles
    coordinates outside [0, 1]: "clamp", "repeat" or "mirror".

    Returns:
        np.ndarray  # [n, 3]
    """
    h, w = tex.shape[:2]
    x = u * w - 0.5
    y = v * h - 0.5
    x0 = np.floor(x)
    y0 = np.floor(y)
    fx = (x - x0)[:, None]
    fy = (y - y0)[:, None]
    x0 = x0.astype(np.int64)
    y0 = y0.astype(np.int64)
    xa, xb = _wrap(x0, w, mode), _wrap(x0 + 1, w, mode)
    ya, yb = _wrap(y0, h, mode), _wrap(y0 + 1, h, mode)
    top = tex[ya, xa] * (1 - fx) + tex[ya, xb] * fx
    bottom = tex[yb, xa] * (1 - fx) + tex[yb, xb] * fx
    return top * (1 - fy) + bottom * fy


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


def _look_at(position: np.ndarray, target: np.ndarray, roll: float) -> np.ndarray:
    back = position - target
    back = back / np.linalg.norm(back)
    right = np.cross([0.0, 1.0, 0.0], back)
    right = right / np.linalg.norm(right)
    up = np.cross(back, right)
    c, s = math.cos(roll), math.sin(roll)
    right, up = c * right + s * up, -s * right + c * up
    return np.stack([right, up, back, position], axis=1)


def synthetic_cameras(n_views: int, seed: int) -> np.ndarray:
    """Camera-to-world poses [n_views, 3, 4] ([right, up, back, t]) on a jittered grid near z = 0.

    Like an LLFF capture: a roughly planar grid about 1 x 0.6 units wide, every camera
    aimed near the point (0, 0, -6) with a small random roll.
    """
    rng = np.random.default_rng(seed)
    cols = max(1, math.ceil(math.sqrt(n_views * 1.5)))
    rows = math.ceil(n_views / cols)
    xs = np.linspace(-0.5, 0.5, cols) if cols > 1 else np.zeros(1)
    ys = np.linspace(0.3, -0.3, rows) if rows > 1 else np.zeros(1)
    grid = [(x, y) for y in ys for x in xs][:n_views]
    poses = []
    for x, y in grid:
        position = np.array([x, y, 0.0]) + np.concatenate([rng.normal(0, 0.04, 2), rng.uniform(-0.1, 0.1, 1)])
        target = np.array([0.0, 0.0, -6.0]) + np.concatenate([rng.normal(0, 0.25, 2), [0.0]])
        poses.append(_look_at(position, target, math.radians(rng.uniform(-3.0, 3.0))))
    return np.stack(poses, 0)


def _camera_rays(c2w: np.ndarray, height: int, width: int, focal: float) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre rays of one camera, as ``enerf.data.rays.pixel_rays`` (float64 numpy)."""
    j, i = np.meshgrid(np.arange(height) + 0.5, np.arange(width) + 0.5, indexing="ij")
    cam = np.stack([(i - 0.5 * width) / focal, -(j - 0.5 * height) / focal, -np.ones_like(i)], -1)
    directions = cam.reshape(-1, 3) @ c2w[:3, :3].T
    origins = np.broadcast_to(c2w[:3, 3], directions.shape)
    return origins, directions


def render_view(
    geometry: Geometry, c2w: np.ndarray, height: int, width: int, focal: float
) -> tuple[np.ndarray, np.ndarray]:
    """Render one camera: rgb [H, W, 3] float64 and z-depth [H, W] (ray t with camera-z = -1)."""
    origins, directions = _camera_rays(c2w, height, width, focal)
    rgb, t = trace_rays(geometry, origins, directions)
    return rgb.reshape(height, width, 3), t.reshape(height, width)


def _llff_rows(poses: np.ndarray, bounds: np.ndarray, height: int, width: int, focal: float) -> np.ndarray:
    """[N, 17] poses_bounds rows: 3x5 [down, right, back, t, hwf] row-major, then near, far."""
    right, up, back, pos = (poses[:, :, k] for k in range(4))
    hwf = np.broadcast_to(np.array([height, width, focal], dtype=np.float64), pos.shape)
    mats = np.stack([-up, right, back, pos, hwf], axis=2)  # [N, 3, 5]
    return np.concatenate([mats.reshape(-1, 15), bounds], axis=1)


def _params(n_views: int, width: int, height: int, seed: int) -> dict:
    return {"n_views": int(n_views), "width": int(width), "height": int(height), "seed": int(seed)}


def _write_scene(folder: Path, n_views: int, width: int, height: int, seed: int) -> None:
    focal = 0.8 * width
    spec = default_geometry()
    geometry = geometry_from_dict(spec)
    poses = synthetic_cameras(n_views, seed)
    (folder / "images").mkdir()
    bounds = np.zeros((n_views, 2))
    digits = max(3, len(str(n_views - 1)))
    for k in range(n_views):
        rgb, depth = render_view(geometry, poses[k], height, width, focal)
        if not np.isfinite(depth).all():
            raise RuntimeError(f"synthetic view {k} has pixels that hit nothing; the layout is broken")
        bounds[k] = depth.min(), depth.max()
        iio.imwrite(folder / "images" / f"{k:0{digits}d}.png", np.round(rgb * 255).astype(np.uint8), compress_level=1)
    np.save(folder / "poses_bounds.npy", _llff_rows(poses, bounds, height, width, focal))
    meta = {
        "format": FORMAT,
        "description": "analytic forward-facing scene; world frame of poses_bounds.npy, y up, cameras look down -z",
        "params": _params(n_views, width, height, seed),
        "camera": {"height": height, "width": width, "focal": focal, "pixel_center": 0.5},
        "c2w": poses.tolist(),  # [N, 3, 4] columns [right, up, back, t]
        "bounds": bounds.tolist(),  # [N, 2] min / max z-depth of the hits per view
        "geometry": spec,
    }
    (folder / "scene.json").write_text(json.dumps(meta, indent=1))


def make_synthetic_scene(
    out_dir: str | Path,
    n_views: int = 24,
    width: int = 1008,
    height: int = 756,
    seed: int = 0,
    overwrite: bool = False,
) -> Path:
    """Write the synthetic scene to ``out_dir`` (LLFF layout + scene.json) and return its path.

    The scene is rendered into a temporary folder beside ``out_dir`` and renamed into
    place, so ``out_dir`` is either absent or complete. An existing ``out_dir`` made with
    the same parameters is returned untouched; one that differs (or is not a synthetic
    scene) raises DataError unless ``overwrite`` is set.
    """
    if n_views < 1 or width < 2 or height < 2:
        raise ConfigError(f"synthetic scene needs n_views >= 1 and width, height >= 2, got {n_views}, {width}x{height}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        return _check_existing(out_dir, _params(n_views, width, height, seed))
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        _write_scene(tmp, n_views, width, height, seed)
        if out_dir.exists():  # overwrite: move the old scene aside first
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            os.replace(out_dir, old / "scene")
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, out_dir)
        except OSError:
            if out_dir.is_dir():  # someone else made it meanwhile
                return _check_existing(out_dir, _params(n_views, width, height, seed))
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _check_existing(out_dir: Path, params: dict) -> Path:
    try:
        meta = json.loads((out_dir / "scene.json").read_text())
    except (OSError, ValueError):
        raise DataError(
            f"{out_dir}: exists and is not a synthetic scene; choose another folder or overwrite it"
        ) from None
    if meta.get("format") != FORMAT or meta.get("params") != params:
        raise DataError(
            f"{out_dir}: exists with parameters {meta.get('params')}, not {params}; pass --overwrite to replace it"
        )
    return out_dir


def synth_main(out_dir: str, n_views: int, width: int, height: int, seed: int, overwrite: bool) -> Path:
    """``enerf data synth``: write the synthetic scene and return its folder."""
    return make_synthetic_scene(out_dir, n_views=n_views, width=width, height=height, seed=seed, overwrite=overwrite)
