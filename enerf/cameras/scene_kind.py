"""Forward-facing or walk-around: what a scene's cameras show, read from their poses alone.

``enerf train`` without a config file picks its settings by it (``enerf.config.presets``):
forward-facing scenes get NDC rays (configs/fern_cpu.txt), walk-around captures world-space rays
and a scene contraction (configs/capture_cpu.txt).

The rule. NDC warps every ray onto one near plane in front of the mean camera, so it suits a
scene only when all cameras look roughly the same way. Two angles measure how far they do not:

* ``spread_deg``: the 90th percentile of the angles between each camera's viewing direction and
  the cameras' mean viewing direction (a forward-facing sweep: a few degrees; a walk around an
  object: tens of degrees; a full circle: over 90);
* ``around_deg``: the same percentile for the directions from the point the cameras look at
  (the point nearest to all optical axes, in the least-squares sense) to the camera centres,
  i.e. how far the cameras surround that point; only when that point lies in front of the
  cameras (nearly parallel axes put it far behind or at infinity: nothing is surrounded).

A scene is forward-facing when ``spread_deg`` is at most ``FORWARD_MAX_DEG`` (30 degrees: tilted
that far, a camera with the usual 60-70 degree field of view still sees every ray head into the
half space in front of the mean view, which NDC needs) and ``around_deg`` at most
``FORWARD_MAX_AROUND_DEG`` (60 degrees: seen from the point they look at, the cameras stay within a
120-degree cone, on one side of it); walk-around otherwise. ``around_deg`` is the looser one because
a sideways sweep over a surface (a baseline as long as the depth) spreads the camera centres around
the look-at point without turning the cameras; when cameras do turn towards one point the two
angles agree. The 90th percentile keeps a few stray frames from deciding. The figures:
fern 9 / 9 deg, sargos 6 / 21 deg (forward-facing); the fox 47 / 48 deg, boardgame 68 / 68 deg
(walk-around): far from the thresholds on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CameraLayout", "FORWARD_MAX_DEG", "FORWARD_MAX_AROUND_DEG", "classify_cameras", "look_at_point", "focus_depth"]

FORWARD_MAX_DEG = 30.0
FORWARD_MAX_AROUND_DEG = 60.0
_PERCENTILE = 90.0


@dataclass(frozen=True)
class CameraLayout:
    """What the cameras show: ``kind`` (forward | walkaround) and the two angles it was decided by."""

    kind: str
    spread_deg: float  # 90th-percentile angle of the viewing directions from their mean
    around_deg: float | None  # 90th-percentile angle of the camera centres around the look-at point (None: none)

    def describe(self) -> str:
        """E.g. ``walk-around (viewing directions spread 68 deg around their mean)``."""
        name = "forward-facing" if self.kind == "forward" else "walk-around"
        around = f", cameras {self.around_deg:.0f} deg around the point they look at" if self.around_deg is not None else ""
        return f"{name} (viewing directions within {self.spread_deg:.0f} deg of their mean{around})"


def _spread(unit: np.ndarray) -> float:
    """90th-percentile angle in degrees of unit vectors ``unit`` [N, 3] from their mean direction
    (180 when they cancel out)."""
    mean = unit.mean(0)
    norm = np.linalg.norm(mean)
    if norm < 1e-9:
        return 180.0
    angles = np.degrees(np.arccos(np.clip(unit @ (mean / norm), -1.0, 1.0)))
    return float(np.percentile(angles, _PERCENTILE))


def look_at_point(c2w: np.ndarray) -> np.ndarray | None:
    """The point nearest to all optical axes (least squares: ``sum_i (I - d_i d_i^T)(p - c_i) = 0``),
    or None when the axes are parallel or the point lies behind the median camera.

    Args:
        c2w: np.ndarray  # [N, 3, 4+] OpenGL axes
    Returns:
        np.ndarray  # [3], or None
    """
    c2w = np.asarray(c2w, dtype=np.float64)
    dirs = -c2w[:, :3, 2] / np.linalg.norm(c2w[:, :3, 2], axis=1, keepdims=True)
    centres = c2w[:, :3, 3]
    normal = np.eye(3)[None] - dirs[:, :, None] * dirs[:, None, :]  # [N, 3, 3]
    try:
        point = np.linalg.solve(normal.sum(0), (normal @ centres[:, :, None]).sum(0)[:, 0])
    except np.linalg.LinAlgError:  # all axes parallel
        return None
    if not np.isfinite(point).all() or np.median(((point - centres) * dirs).sum(1)) <= 0:
        return None
    return point


def focus_depth(c2w: np.ndarray) -> float:
    """How far in front of the cameras they look: the median depth of ``look_at_point`` along
    their axes; without one, ten times the cameras' rms distance from their mean centre (1 when
    they all stand at one point).

    Args:
        c2w: np.ndarray  # [N, 3, 4+] OpenGL axes
    """
    c2w = np.asarray(c2w, dtype=np.float64)
    centres = c2w[:, :3, 3]
    point = look_at_point(c2w)
    if point is not None:
        dirs = -c2w[:, :3, 2] / np.linalg.norm(c2w[:, :3, 2], axis=1, keepdims=True)
        return float(np.median(((point - centres) * dirs).sum(1)))
    rms = float(np.sqrt(((centres - centres.mean(0)) ** 2).sum(1).mean()))
    return 10.0 * rms if rms > 0 else 1.0


def classify_cameras(c2w: np.ndarray) -> CameraLayout:
    """Forward-facing or walk-around (module docstring) from camera-to-world poses.

    Args:
        c2w: np.ndarray  # [N, 3, 4] (or [N, 4, 4]) OpenGL axes [right, up, back]: a camera looks along -z
    """
    c2w = np.asarray(c2w, dtype=np.float64)
    dirs = -c2w[:, :3, 2]
    dirs = dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
    spread = _spread(dirs)
    around = None
    point = look_at_point(c2w)
    if point is not None:
        offsets = c2w[:, :3, 3] - point
        lengths = np.linalg.norm(offsets, axis=1, keepdims=True)
        if (lengths > 0).all():
            around = _spread(offsets / lengths)
    forward = spread <= FORWARD_MAX_DEG and (around is None or around <= FORWARD_MAX_AROUND_DEG)
    return CameraLayout("forward" if forward else "walkaround", spread, around)
