"""Splat files for the viewer's tests: a 3DGS PLY written with numpy alone (the reference
implementation's layout: binary little-endian, ``x y z nx ny nz f_dc_0..2 f_rest_* opacity
scale_0..2 rot_0..3``), and ``ply_module()``: ``enerf.splats.ply`` where it exists, else a small
stand-in with its interface (``read_splats`` with plyfile, ``splats_to_frame`` with numpy)."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import numpy as np
import torch

__all__ = ["write_3dgs_ply", "ply_module"]


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


def _splats_to_frame(splats, matrix):
    from scipy.spatial.transform import Rotation

    m = np.asarray(matrix, np.float64)
    scale = np.cbrt(np.linalg.det(m[:3, :3]))
    rot = Rotation.from_matrix(m[:3, :3] / scale)
    q = splats.quats.double().numpy()
    turned = (rot * Rotation.from_quat(q[:, [1, 2, 3, 0]])).as_quat()[:, [3, 0, 1, 2]]
    means = splats.means.double().numpy() @ m[:3, :3].T + m[:3, 3]
    return type(splats)(torch.tensor(means, dtype=torch.float32), splats.log_scales + float(np.log(scale)),
                        torch.tensor(turned, dtype=torch.float32), splats.opacity_logits, splats.sh)


def ply_module(monkeypatch=None):
    """``enerf.splats.ply``, or a stand-in with its ``read_splats`` / ``splats_to_frame`` (degree
    0), which ``monkeypatch`` (pytest's) puts in its place for the test."""
    try:
        return importlib.import_module("enerf.splats.ply")
    except ImportError:
        module = types.ModuleType("enerf.splats.ply")
        module.read_splats, module.splats_to_frame, module.stand_in = _read_splats, _splats_to_frame, True
        if monkeypatch is not None:
            monkeypatch.setitem(sys.modules, "enerf.splats.ply", module)
        return module
