"""The one view a splat file with no cameras opens at, in ``enerf view --splats F`` (no run) and in the
page of ``enerf export html`` (no ``--ckpt``): both take it from ``default_view``. Numpy only.

The splats of a capture mostly spread along a floor, a table or a wall, in a frame whose axes are
the capture tool's (COLMAP's y points down, nerfstudio's z up, another tool's anything): so the view
is fitted to the splats' centres rather than to the frame's axes. A fixed look down -z with +y up
sees such a layer edge-on, or from below, whenever the capture's up is not +y.
"""

from __future__ import annotations

import math

import numpy as np

from ..cameras.paths import to_homogeneous, viewmatrix

__all__ = ["DEFAULT_FOV_DEG", "DEFAULT_ELEVATION_DEG", "default_view", "view_c2w"]

DEFAULT_FOV_DEG = 50.0  # the vertical field of view the view opens with
DEFAULT_ELEVATION_DEG = 30.0  # how far above the splats' plane the camera looks from


def default_view(centers: np.ndarray, fov: float = math.radians(DEFAULT_FOV_DEG),
                 elevation: float = math.radians(DEFAULT_ELEVATION_DEG)) -> dict:
    """Where the camera starts without cameras: ``position`` [3], ``look_at`` [3], ``up`` [3] (unit),
    ``fov`` (vertical, radians).

    The axis along which the middle 90 % of the centres (inside their 5th-95th percentile box) spread
    least (the smallest principal axis, turned toward +z) is taken as up, and the camera looks at the
    centres' median from ``elevation`` above the plane of the other two, across the middle axis (so the
    widest spread runs across the picture), from where the middle 90 % about fill the view. A straight
    look along the plane would see a flat capture edge-on.

    Args:
        centers: [N, 3] the splats' centres
    """
    centers = np.asarray(centers, np.float64).reshape(-1, 3)
    centers = centers if len(centers) else np.zeros((1, 3))  # no splats: a view of the origin
    middle = np.median(centers, axis=0)
    lo, hi = np.percentile(centers, [5, 95], axis=0)
    radius = max(0.5 * float(np.linalg.norm(hi - lo)), 1e-3)
    dist = radius / math.tan(0.5 * fov) + radius
    inner = centers[np.all((centers >= lo) & (centers <= hi), axis=1)]
    inner = inner if len(inner) >= 3 else centers
    if len(inner) >= 3:
        axes = np.linalg.eigh(np.cov((inner - middle).T))[1]  # columns by increasing spread
        up, across = axes[:, 0], axes[:, 1]
    else:
        up, across = np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])
    up = up if up[2] >= 0 else -up
    back = math.cos(elevation) * -across + math.sin(elevation) * up  # from the centre toward the camera
    return {"position": middle + dist * back, "look_at": middle, "up": up, "fov": fov}


def view_c2w(view: dict) -> np.ndarray:
    """[4, 4] camera-to-world (OpenGL axes: columns right, up, back, position) of ``default_view``'s
    ``view``: looking from ``position`` at ``look_at``, its up axis the closest to ``up``."""
    position = np.asarray(view["position"], np.float64)
    return to_homogeneous(viewmatrix(position - np.asarray(view["look_at"], np.float64), view["up"], position))
