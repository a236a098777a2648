"""The embedded demo scene: an analytic, exactly known forward-facing scene in LLFF layout.

``make_synthetic_scene`` ray-traces (in numpy, one ray through each pixel centre) a
textured background plane and a few textured spheres, boxes and a tilted panel at depths
of about 2.5 to 10, seen by cameras on a jittered grid that all look roughly down -z,
like a hand-held LLFF capture. Textures are photographs shipped inside scikit-image
(no download). Shading is texture colour times a fixed Lambert factor, so a surface
point has the same colour from every view and every pixel can be recomputed exactly:
``load_geometry(scene_dir)`` + ``trace_rays`` re-render any ray given in the world frame
of ``poses_bounds.npy`` (``Scene.scene_to_world`` maps loader rays there).

The scene's geometry and tracer live in ``enerf.synthetic.geometry``, its textures in
``enerf.synthetic.textures``; this module places the cameras, renders the views and writes the
folder. World frame: y up, cameras near z = 0 looking towards -z. Written files::

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
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from ..errors import ConfigError, DataError
from .geometry import FORMAT, Geometry, default_geometry, geometry_from_dict, load_geometry, trace_rays
from .textures import build_texture

__all__ = [
    "FORMAT",
    "Geometry",
    "build_texture",
    "default_geometry",
    "synthetic_cameras",
    "geometry_from_dict",
    "load_geometry",
    "trace_rays",
    "trace_view",
    "make_synthetic_scene",
    "synth_main",
]


# ----------------------------------------------------------------------------- cameras and images


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
    """Pixel-centre rays of one camera, as ``enerf.cameras.rays.pixel_rays`` (float64 numpy)."""
    j, i = np.meshgrid(np.arange(height) + 0.5, np.arange(width) + 0.5, indexing="ij")
    cam = np.stack([(i - 0.5 * width) / focal, -(j - 0.5 * height) / focal, -np.ones_like(i)], -1)
    directions = cam.reshape(-1, 3) @ c2w[:3, :3].T
    origins = np.broadcast_to(c2w[:3, 3], directions.shape)
    return origins, directions


def trace_view(
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
        rgb, depth = trace_view(geometry, poses[k], height, width, focal)
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
