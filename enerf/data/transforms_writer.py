"""Writing nerfstudio / instant-ngp ``transforms.json`` files (``enerf data colmap --layout
nerfstudio|blender``): COLMAP's camera as the format's fields, and the file itself. The reader is
``enerf.data.transforms_reader`` (the loader: ``enerf.data.nerfstudio``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_json
from ..errors import DataError

__all__ = ["colmap_camera_fields", "transforms_meta", "write_transforms"]


def colmap_camera_fields(model: str, params, width: int, height: int) -> dict:
    """A COLMAP camera as ``transforms.json`` intrinsics, mapped as nerfstudio's
    ``colmap_utils.parse_colmap_camera_params`` does (SIMPLE_PINHOLE, SIMPLE_RADIAL and RADIAL
    become OPENCV with the coefficients they have, the radial fisheyes OPENCV_FISHEYE).

    Raises:
        DataError: a COLMAP model the format has no name for (FULL_OPENCV, FOV, THIN_PRISM_FISHEYE...).
    """
    p = [float(v) for v in params]
    out = {"w": int(width), "h": int(height)}
    if model in ("SIMPLE_PINHOLE", "SIMPLE_RADIAL", "RADIAL"):
        k = p[3:] + [0.0] * (2 - len(p[3:]))
        out.update(fl_x=p[0], fl_y=p[0], cx=p[1], cy=p[2], k1=k[0], k2=k[1], p1=0.0, p2=0.0, camera_model="OPENCV")
    elif model == "PINHOLE":
        out.update(fl_x=p[0], fl_y=p[1], cx=p[2], cy=p[3], camera_model="PINHOLE")
    elif model == "OPENCV":
        out.update(fl_x=p[0], fl_y=p[1], cx=p[2], cy=p[3], k1=p[4], k2=p[5], p1=p[6], p2=p[7], camera_model="OPENCV")
    elif model == "OPENCV_FISHEYE":
        out.update(fl_x=p[0], fl_y=p[1], cx=p[2], cy=p[3], k1=p[4], k2=p[5], k3=p[6], k4=p[7],
                   camera_model="OPENCV_FISHEYE")
    elif model in ("SIMPLE_RADIAL_FISHEYE", "RADIAL_FISHEYE"):
        k = p[3:] + [0.0] * (2 - len(p[3:]))
        out.update(fl_x=p[0], fl_y=p[0], cx=p[1], cy=p[2], k1=k[0], k2=k[1], k3=0.0, k4=0.0,
                   camera_model="OPENCV_FISHEYE")
    else:
        raise DataError(f"COLMAP camera model {model} has no transforms.json equivalent; use PINHOLE, SIMPLE_RADIAL, "
                        "RADIAL, OPENCV or OPENCV_FISHEYE")
    out["camera_angle_x"] = 2.0 * math.atan(0.5 * out["w"] / out["fl_x"])
    return out


def transforms_meta(camera: dict, frames: list[dict], applied_transform: np.ndarray | None = None) -> dict:
    """The ``transforms.json`` object: ``camera`` (``colmap_camera_fields``) at the top level, then
    ``frames`` (each with ``file_path`` and a 4 x 4 ``transform_matrix``), then ``applied_transform``
    (3 x 4) when given."""
    meta = dict(camera)
    meta["frames"] = [{**f, "transform_matrix": np.asarray(f["transform_matrix"], np.float64).tolist()} for f in frames]
    if applied_transform is not None:
        meta["applied_transform"] = np.asarray(applied_transform, np.float64)[:3].tolist()
    return meta


def write_transforms(path: Path, meta: dict) -> None:
    """Write ``meta`` as ``path`` (temp file, then rename)."""
    atomic_write_json(Path(path), meta)
