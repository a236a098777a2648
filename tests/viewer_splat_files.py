"""Splat files for the viewer's tests: a 3DGS PLY written with numpy alone (the reference
implementation's layout: binary little-endian, ``x y z nx ny nz f_dc_0..2 f_rest_* opacity
scale_0..2 rot_0..3``), and ``splat_modules()``: ``enerf.splats.ply`` and ``enerf.splats.frames``
where they exist, else small stand-ins with the functions the viewer uses (``read_splats`` with
plyfile, ``splats_into_scene`` with scipy)."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import numpy as np
import torch

__all__ = ["write_3dgs_ply", "splat_modules"]


def write_3dgs_ply(path: Path, means, log_scales, quats, opacity_logits, f_dc) -> Path:
    """Write N splats of SH degree 0 (``means`` [N, 3], ``log_scales`` [N, 3], ``quats`` w-x-y-z
    [N, 4], ``opacity_logits`` [N], ``f_dc`` [N, 3]) as a 3DGS PLY."""
    names = ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
             "rot_0", "rot_1", "rot_2", "rot_3"]
    n = len(means)
    cols = [np.asarray(means), np.zeros((n, 3)), np.asarray(f_dc), np.asarray(opacity_logits).reshape(n, 1),
            np.asarray(log_scales), np.asarray(quats)]
    data = np.concatenate(cols, axis=1).astype("<f4")
    header = "ply\nformat binary_little_endian 1.0\n" + f"element vertex {n}\n"
    header += "".join(f"property float {name}\n" for name in names) + "end_header\n"
    Path(path).write_bytes(header.encode("ascii") + data.tobytes())
    return Path(path)


def _read_splats(path):
    from plyfile import PlyData

    from enerf.splats.gaussians import Splats

    v = PlyData.read(str(path))["vertex"].data
    col = lambda *names: torch.tensor(np.stack([v[n] for n in names], axis=1), dtype=torch.float32)  # noqa: E731
    return Splats(col("x", "y", "z"), col("scale_0", "scale_1", "scale_2"), col("rot_0", "rot_1", "rot_2", "rot_3"),
                  col("opacity")[:, 0], col("f_dc_0", "f_dc_1", "f_dc_2")[:, None, :]), None


def _splats_into_scene(splats, scene, frame, source="the splats"):
    """World (or unnamed) -> scene: the inverse of ``scene.scene_to_world`` (degree 0 only)."""
    from scipy.spatial.transform import Rotation

    if frame == "scene":
        return splats
    m = np.linalg.inv(np.asarray(scene.scene_to_world, np.float64))
    scale = np.cbrt(np.linalg.det(m[:3, :3]))
    rot = Rotation.from_matrix(m[:3, :3] / scale)
    q = splats.quats.double().numpy()
    turned = (rot * Rotation.from_quat(q[:, [1, 2, 3, 0]])).as_quat()[:, [3, 0, 1, 2]]
    means = splats.means.double().numpy() @ m[:3, :3].T + m[:3, 3]
    return type(splats)(torch.tensor(means, dtype=torch.float32), splats.log_scales + float(np.log(scale)),
                        torch.tensor(turned, dtype=torch.float32), splats.opacity_logits, splats.sh)


def splat_modules(monkeypatch=None):
    """(``enerf.splats.ply``, ``enerf.splats.frames``), or stand-ins with ``read_splats`` /
    ``splats_into_scene`` (SH degree 0), which ``monkeypatch`` (pytest's) puts in their place."""
    out = []
    for name, functions in (("ply", {"read_splats": _read_splats}), ("frames", {"splats_into_scene": _splats_into_scene})):
        try:
            out.append(importlib.import_module(f"enerf.splats.{name}"))
        except ImportError:
            module = types.ModuleType(f"enerf.splats.{name}")
            for key, fn in functions.items():
                setattr(module, key, fn)
            if monkeypatch is not None:
                monkeypatch.setitem(sys.modules, f"enerf.splats.{name}", module)
            out.append(module)
    return tuple(out)
