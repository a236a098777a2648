"""Splats in antimatter15's ``.splat`` layout (antimatter15/splat ``convert.py``; read by its viewer,
SuperSplat, splat-transform and Spark): no header, 32 bytes a splat, little-endian:

    position  float32 [3]  x, y, z (the PLY's coordinates and axes: no conversion)
    scale     float32 [3]  exp(log scale): standard deviations
    color     uint8   [4]  (0.5 + SH_C0 * f_dc) * 255 and sigmoid(opacity) * 255
    rotation  uint8   [4]  the unit quaternion w, x, y, z as q * 128 + 128

each uint8 rounded and clipped to 0..255, the splats sorted largest ``exp(sum of log scales) *
opacity`` first (as ``convert.py``). Band 0 only: the other SH bands are dropped, and the frame is
not recorded (readers take it as ``world``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_bytes
from ..errors import DataError
from .gaussians import SH_C0, Splats

__all__ = ["ROW", "encode_splat", "decode_splat", "write_dotsplat", "read_dotsplat"]

ROW = np.dtype([("position", "<f4", 3), ("scale", "<f4", 3), ("color", "u1", 4), ("rotation", "u1", 4)])  # 32 bytes


def encode_splat(splats: Splats) -> bytes:
    """The ``.splat`` bytes of ``splats`` (module docstring): ``[N]`` rows of ``ROW``."""
    s = splats.map(lambda t: t.detach().to("cpu", torch.float64))
    order = torch.argsort(s.importance(), descending=True)
    s = s.select(order)
    rows = np.zeros(len(s), ROW)
    rows["position"] = s.means.numpy()
    rows["scale"] = np.exp(s.log_scales.numpy())
    rgba = np.concatenate([s.base_rgb().numpy(), s.opacities.numpy()[:, None]], 1)
    rows["color"] = np.clip(np.round(rgba * 255), 0, 255)
    quats = torch.nn.functional.normalize(s.quats, dim=1).numpy()
    rows["rotation"] = np.clip(np.round(quats * 128 + 128), 0, 255)
    return rows.tobytes()


def decode_splat(raw: bytes, where: str) -> Splats:
    """``.splat`` bytes -> Splats on the CPU (float32, SH degree 0).

    Raises:
        DataError: a size that is no multiple of 32 bytes (one line naming ``where``).
    """
    if len(raw) % ROW.itemsize:
        raise DataError(f"{where}: truncated or not a .splat file ({len(raw)} bytes, not a multiple of 32)")
    rows = np.frombuffer(raw, ROW)
    alpha = np.clip(rows["color"][:, 3] / 255.0, 0.5 / 255, 1.0 - 0.5 / 255)  # 0 and 255 stay finite
    quats = (rows["rotation"].astype(np.float64) - 128.0) / 128.0
    quats /= np.maximum(np.linalg.norm(quats, axis=1, keepdims=True), 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_scales = np.log(rows["scale"].astype(np.float64))  # a scale <= 0: not finite (files.finite_splats)

    def tensor(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(x, np.float32))

    dc = (rows["color"][:, :3] / 255.0 - 0.5) / SH_C0
    return Splats(tensor(rows["position"]), tensor(log_scales), tensor(quats), tensor(np.log(alpha / (1 - alpha))),
                  tensor(dc[:, None, :]))


def write_dotsplat(path: str | Path, splats: Splats, frame_name: str = "world") -> int:
    """Write ``splats`` as ``.splat`` at ``path``, atomically; returns its size in bytes (``frame_name``
    is not recorded: ``enerf.splats.files`` refuses others than world)."""
    data = encode_splat(splats)
    atomic_write_bytes(Path(path), data)
    return len(data)


def read_dotsplat(path: str | Path) -> tuple[Splats, None]:
    """Read a ``.splat`` file: (Splats, None: no frame recorded)."""
    return decode_splat(Path(path).read_bytes(), str(path)), None
