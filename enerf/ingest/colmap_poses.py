"""COLMAP camera poses in the conventions enerf reads: LLFF's ``poses_bounds.npy`` rows and the
camera-to-world matrices of a ``transforms.json``. Plain numpy; no pycolmap needed.

COLMAP stores ``cam_from_world``: a point ``x`` of the world is ``R x + t`` in the camera, whose
axes are OpenCV's [right, down, forward]. The camera-to-world pose is ``[R^T | -R^T t]``.

LLFF (``imgs2poses.py``) stores per image a row-major 3 x 5 matrix whose columns are the camera's
[down, right, back] axes in world coordinates, its centre, and ``(H, W, focal)``; then the near /
far depth of the points the image sees (their 0.1 and 99.9 percentiles along the viewing axis).
``transforms.json`` (NeRF synthetic, instant-ngp, nerfstudio) stores 4 x 4 camera-to-world
matrices with OpenGL camera axes [right, up, back].
"""

from __future__ import annotations

import numpy as np

from ..cameras.pinhole import GL_TO_CV

__all__ = [
    "llff_pose_from_cam_from_world",
    "opengl_c2w_from_cam_from_world",
    "depth_bounds",
    "poses_bounds_rows",
    "similarity_align",
    "pose_errors",
]


def llff_pose_from_cam_from_world(rotation: np.ndarray, translation: np.ndarray, hwf: tuple[float, float, float]) -> np.ndarray:
    """One LLFF 3 x 5 pose from a COLMAP world-to-camera transform.

    Args:
        rotation: np.ndarray  # [3, 3] R of cam_from_world (x_cam = R x_world + t)
        translation: np.ndarray  # [3] t of cam_from_world
        hwf: image height, width and focal length in pixels.
    Returns:
        np.ndarray  # [3, 5] columns [down, right, back, centre, (H, W, focal)] in world coordinates
    """
    c2w_rot = np.asarray(rotation, dtype=np.float64).T  # columns: camera [right, down, forward] in world
    centre = -c2w_rot @ np.asarray(translation, dtype=np.float64)
    return np.stack([c2w_rot[:, 1], c2w_rot[:, 0], -c2w_rot[:, 2], centre, np.asarray(hwf, dtype=np.float64)], 1)


def opengl_c2w_from_cam_from_world(rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """Camera-to-world with OpenGL camera axes, as ``transforms.json`` stores it.

    Returns:
        np.ndarray  # [4, 4] columns [right, up, back, centre] (last row 0 0 0 1)
    """
    c2w_rot = np.asarray(rotation, dtype=np.float64).T
    c2w = np.eye(4)
    c2w[:3, :3] = c2w_rot @ GL_TO_CV  # COLMAP's camera axes are OpenCV's
    c2w[:3, 3] = -c2w_rot @ np.asarray(translation, dtype=np.float64)
    return c2w


def depth_bounds(
    points: np.ndarray, rotation: np.ndarray, translation: np.ndarray, percent: float = 0.1, min_beyond: int = 3
) -> tuple[float, float]:
    """Near / far depth of the points one image sees, as LLFF's ``imgs2poses`` computes them.

    LLFF takes the ``percent`` and ``100 - percent`` percentiles of the depths (0.1 and 99.9). With
    fewer than ``100 * min_beyond / percent`` points (3,000 by default) those are single points,
    and one badly triangulated point decides the bound; so the percentile moves inwards until
    about ``min_beyond`` points lie beyond each bound (fern at 504 x 378 sees ~600 points per
    image: near bounds up to 35 % and far bounds up to 60 % off the release's without this).

    Args:
        points: np.ndarray  # [P, 3] world positions of the 3D points observed in the image
        rotation, translation: cam_from_world of the image
    Returns:
        (near, far) depths along the viewing axis
    """
    depths = (np.asarray(points, dtype=np.float64) @ np.asarray(rotation, dtype=np.float64).T + translation)[:, 2]
    q = min(max(percent, 100.0 * min_beyond / len(depths)), 50.0)
    return float(np.percentile(depths, q)), float(np.percentile(depths, 100.0 - q))


def poses_bounds_rows(poses: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """The ``poses_bounds.npy`` array: each 3 x 5 pose flattened row-major, then near, far.

    Args:
        poses: np.ndarray  # [N, 3, 5]
        bounds: np.ndarray  # [N, 2]
    Returns:
        np.ndarray  # [N, 17] float64
    """
    return np.concatenate([np.asarray(poses, np.float64).reshape(-1, 15), np.asarray(bounds, np.float64)], 1)


def similarity_align(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The similarity minimising ``sum |s R src + t - dst|^2`` (Umeyama 1991).

    Args:
        src, dst: np.ndarray  # [N, 3] corresponding points (N >= 3, not collinear)
    Returns:
        scale, rotation np.ndarray  # [3, 3], translation np.ndarray  # [3]
    """
    src, dst = np.asarray(src, np.float64), np.asarray(dst, np.float64)
    mu_s, mu_d = src.mean(0), dst.mean(0)
    u, d, vt = np.linalg.svd((dst - mu_d).T @ (src - mu_s) / len(src))
    sign = np.diag([1.0, 1.0, np.sign(np.linalg.det(u @ vt))])
    rotation = u @ sign @ vt
    scale = float(np.trace(np.diag(d) @ sign) / ((src - mu_s) ** 2).sum(1).mean())
    return scale, rotation, mu_d - scale * rotation @ mu_s


def pose_errors(poses: np.ndarray, reference: np.ndarray) -> dict:
    """Compare LLFF poses with reference LLFF poses of the same images after aligning the centres.

    Args:
        poses, reference: np.ndarray  # [N, 3, 5] (or [N, 3, 4]) LLFF poses
    Returns:
        dict: ``scale`` (reference units per pose unit), ``centre`` (error of each aligned centre
        over the largest distance of a reference centre from their mean), ``degrees`` (rotation
        error of each camera after the alignment's rotation)
    """
    scale, rotation, shift = similarity_align(poses[:, :, 3], reference[:, :, 3])
    centres = scale * poses[:, :, 3] @ rotation.T + shift
    spread = np.linalg.norm(reference[:, :, 3] - reference[:, :, 3].mean(0), axis=1).max()
    relative = np.einsum("nji,jk,nkl->nil", reference[:, :, :3], rotation, poses[:, :, :3])
    cos = np.clip((np.trace(relative, axis1=1, axis2=2) - 1.0) / 2.0, -1.0, 1.0)
    return {"scale": scale, "centre": np.linalg.norm(centres - reference[:, :, 3], axis=1) / spread,
            "degrees": np.degrees(np.arccos(cos))}
