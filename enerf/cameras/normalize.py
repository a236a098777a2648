"""Camera normalisation of captures, as nerfstudio's data parser does it.

``orient_and_center`` is nerfstudio's ``auto_orient_and_center_poses``: with ``up`` (its
default) the mean of the cameras' up axes is rotated onto +z; with ``pca`` the principal
directions of the camera centres become the axes (z the smallest, flipped so the cameras' mean
up axis has z >= 0); the mean camera centre moves to the origin. ``scale_to_box`` then scales the
centres so that the largest coordinate is 1 (nerfstudio's ``auto_scale_poses``): the cameras
lie in [-1, 1]^3.

A point ``p`` of the capture's frame is ``s (R p + t)`` in scene space; nerfstudio stores
``transform = [R | t]`` (3 x 4) and ``scale = s`` as ``dataparser_transforms.json``, enerf's
Scene the inverse 4 x 4 ``scene_to_world``. ``transform_record`` gives both from the latter.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["ORIENTATIONS", "rotation_between", "orient_and_center", "scale_to_box", "transform_record"]

ORIENTATIONS = ("up", "pca", "none")


def rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotation [3, 3] about the axis a x b that turns direction ``a`` onto direction ``b``
    (Rodrigues; for opposite directions, a half turn about an axis orthogonal to ``a``)."""
    a = np.asarray(a, np.float64) / np.linalg.norm(a)
    b = np.asarray(b, np.float64) / np.linalg.norm(b)
    v, c = np.cross(a, b), float(a @ b)
    if c < -1.0 + 1e-12:
        axis = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        axis /= np.linalg.norm(axis)
        return 2.0 * np.outer(axis, axis) - np.eye(3)
    k = np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    return np.eye(3) + k + k @ k / (1.0 + c)


def orient_and_center(poses: np.ndarray, method: str = "up") -> tuple[np.ndarray, np.ndarray]:
    """nerfstudio's ``auto_orient_and_center_poses`` with ``center_method = "poses"``.

    Args:
        poses: np.ndarray  # [N, 3, 4] camera-to-world, columns [right, up, back, centre]
        method: ``up``, ``pca`` or ``none`` (module docstring)
    Returns:
        poses: np.ndarray  # [N, 3, 4] oriented and centred
        transform: np.ndarray  # [3, 4] [R | t]: a point p goes to R p + t
    """
    poses = np.asarray(poses, np.float64)
    centre = poses[:, :3, 3].mean(0)
    if method == "up":
        up = poses[:, :3, 1].mean(0)
        rotation = rotation_between(up, np.array([0.0, 0.0, 1.0])) if np.linalg.norm(up) > 1e-9 else np.eye(3)
    elif method == "pca":
        diff = poses[:, :3, 3] - centre
        _, vectors = np.linalg.eigh(diff.T @ diff)
        vectors = vectors[:, ::-1].copy()  # largest principal direction first
        if np.linalg.det(vectors) < 0:
            vectors[:, 2] *= -1
        rotation = vectors.T
        if (rotation @ poses[:, :3, 1].mean(0))[2] < 0:  # cameras upside down: half turn about x
            rotation = np.diag([1.0, -1.0, -1.0]) @ rotation
    elif method == "none":
        rotation = np.eye(3)
    else:
        raise ConfigError(f"orientation {method!r} is not one of {', '.join(ORIENTATIONS)}")
    transform = np.concatenate([rotation, -rotation @ centre[:, None]], 1)
    out = np.empty_like(poses[:, :3, :4])
    out[:, :, :3] = rotation @ poses[:, :3, :3]
    out[:, :, 3] = poses[:, :3, 3] @ rotation.T + transform[:, 3]
    return out, transform


def scale_to_box(poses: np.ndarray) -> tuple[np.ndarray, float]:
    """Scale the camera centres so that the largest coordinate magnitude is 1.

    Returns:
        poses: np.ndarray  # [N, 3, 4]
        scale: float (1 when every centre is at the origin)
    """
    poses = np.array(poses, np.float64)
    extent = float(np.abs(poses[:, :3, 3]).max())
    scale = 1.0 / extent if extent > 0 else 1.0
    poses[:, :3, 3] *= scale
    return poses, scale


def transform_record(scene_to_world: np.ndarray) -> dict:
    """What a checkpoint stores about a scene's frame: ``scene_to_world`` [4, 4] and nerfstudio's
    ``dataparser_transforms.json`` pair (``transform`` [3, 4], ``scale``) of its inverse, all as lists.

    ``scene_to_world`` must be a similarity (rotation, uniform scale, translation)."""
    scene_to_world = np.asarray(scene_to_world, np.float64)
    world_to_scene = np.linalg.inv(scene_to_world)
    scale = float(np.cbrt(np.linalg.det(world_to_scene[:3, :3])))
    return {"scene_to_world": scene_to_world.tolist(), "transform": (world_to_scene[:3] / scale).tolist(),
            "scale": scale}
