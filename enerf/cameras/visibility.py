"""Which cameras see a point: frustum counts (Nerfbusters' visibility, no occlusion test).

A point is in a pinhole camera's frustum when it lies in front of the camera (positive depth along
its viewing axis) and projects inside the image: ``0 <= u <= width``, ``0 <= v <= height`` with the
pixel grid of ``rays.pixel_rays`` (pixel centres at half-integers, columns of ``c2w`` [right, up,
back, t]). Surfaces are not known here, so a point behind an object still counts as seen.

Training uses the counts to find space no training camera looks into (``enerf.train.visibility``);
held-out scoring to find the pixels whose surface at least one training camera saw
(``seen_pixels``, ``enerf.train.evaluate``'s ``psnr_seen``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["frustum_counts", "seen_pixels"]

_CAMERAS_A_ROUND = 8  # seen_pixels tests the points left unseen against this many cameras at a time


def frustum_counts(points: Tensor, poses: Tensor, height: int, width: int, focal: float,
                   chunk: int = 65536) -> Tensor:
    """How many of the cameras ``poses`` have each point in their frustum.

    Args:
        points: Tensor  # [n, 3] in the cameras' frame
        poses: Tensor  # [c, 3, 4] camera-to-world, columns [right, up, back, t]
        height, width, focal: the cameras' common pinhole (pixels)

    Returns:
        Tensor  # [n] int64 in [0, c]
    """
    poses = poses.to(points.device, torch.float32)
    rot, centre = poses[:, :3, :3], poses[:, :3, 3]  # [c, 3, 3], [c, 3]
    # camera c's coordinates of p: R_c^T (p - t_c) = p R_c - t_c R_c (row vectors), every camera in one product
    stacked = rot.permute(1, 0, 2).reshape(3, -1)  # [3, c * 3]
    offset = torch.einsum("cj,cji->ci", centre, rot).reshape(-1)  # [c * 3]
    counts = []
    for start in range(0, points.shape[0], chunk):
        p = points[start:start + chunk].to(torch.float32)
        local = (p @ stacked - offset).view(p.shape[0], -1, 3)  # [n, c, 3]
        depth = -local[..., 2]
        safe = depth.clamp(min=1e-9)
        u = focal * local[..., 0] / safe + 0.5 * width
        v = -focal * local[..., 1] / safe + 0.5 * height
        inside = (depth > 0) & (u >= 0) & (u <= width) & (v >= 0) & (v <= height)
        counts.append(inside.sum(dim=1))
    return torch.cat(counts) if counts else points.new_zeros(0, dtype=torch.int64)


def seen_pixels(origins: Tensor, directions: Tensor, depth: Tensor, poses: Tensor, height: int, width: int,
                focal: float) -> np.ndarray:
    """The pixels of a view whose point at ``depth`` along the ray lies in at least one of ``poses``'
    frusta (``frustum_counts``).

    Args:
        origins, directions: Tensor  # [h, w, 3], the view's rays (``Scene.rays``; directions not unit)
        depth: Tensor  # [h, w], the distance along each ray in units of its direction (the renderer's depth)
        poses, height, width, focal: the training cameras (``frustum_counts``)

    Returns:
        np.ndarray  # [h, w] bool
    """
    points = (origins + directions * depth[..., None]).reshape(-1, 3)
    seen = torch.zeros(points.shape[0], dtype=torch.bool, device=points.device)
    todo = torch.arange(points.shape[0], device=points.device)
    for start in range(0, poses.shape[0], _CAMERAS_A_ROUND):  # a point once seen is not tested again
        hit = frustum_counts(points[todo], poses[start:start + _CAMERAS_A_ROUND], height, width, focal) > 0
        seen[todo[hit]] = True
        todo = todo[~hit]
        if todo.numel() == 0:
            break
    return seen.reshape(depth.shape).cpu().numpy()
