"""Helpers the tests share that the package has no use for: every pixel's ray of some views at once, a camera
path file's JSON written by hand, the inverse of the LLFF pose conversion, the sampler a name means on a device."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from enerf.cameras.path_file import CAMERA_PATH_FORMAT
from enerf.cameras.rays import Rays, flatten_rays
from enerf.data.scene import Scene
from enerf.render.registry import estimator_class


def training_rays(scene: Scene, indices, device: torch.device) -> tuple[Rays, Tensor]:
    """Rays and colours of every pixel of the given views, all at once (training makes them per batch,
    ``enerf.data.sampler.RaySampler``).

    Returns:
        rays: Rays  # [n_views * H * W]
        rgb: Tensor  # [n_views * H * W, 3]
    """
    per_view = [flatten_rays(scene.rays(int(i), device=device)) for i in indices]
    rays = Rays(*(torch.cat([getattr(r, name) for r in per_view]) for name in Rays._fields))
    rgb = torch.from_numpy(scene.images[list(indices)].reshape(-1, 3)).to(device)
    return rays, rgb


def camera_path_dict(keyframes, frames: int = 0, width: int | None = None, height: int | None = None,
                     fov_y: float | None = None, fps: float | None = None) -> dict:
    """The JSON object of a camera path file (``CameraPath``); keyframes: [K, 3, 4] or [K, 4, 4]."""
    keys = np.asarray(keyframes, dtype=np.float64).reshape(-1, *np.shape(keyframes)[-2:])[:, :3, :4]
    out = {"format": CAMERA_PATH_FORMAT, "version": 1, "frames": int(frames),
           "keyframes": [{"c2w": k.tolist()} for k in keys]}
    for key, value in (("width", width), ("height", height), ("fov_y", fov_y), ("fps", fps)):
        if value is not None:
            out[key] = value
    return out


def cam_from_world_from_llff_pose(pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The inverse of ``enerf.ingest.colmap_poses.llff_pose_from_cam_from_world``.

    Args:
        pose: np.ndarray  # [3, 5] (or [3, 4]) LLFF pose
    Returns:
        rotation: np.ndarray  # [3, 3] R of cam_from_world
        translation: np.ndarray  # [3] t of cam_from_world
    """
    pose = np.asarray(pose, dtype=np.float64)
    c2w_rot = np.stack([pose[:, 1], pose[:, 0], -pose[:, 2]], 1)
    return c2w_rot.T, -c2w_rot.T @ pose[:, 3]


def resolve_sampler(name: str, device: torch.device, warn=lambda message: None) -> str:
    """The sampler ``--sampler name`` means on ``device`` (``auto``: nerfacc or torch_grid), as
    ``enerf.render.build_renderer`` resolves it; ``warn`` takes its warning lines.

    Raises:
        ConfigError: an unknown name, or ``nerfacc`` where it cannot run.
    """
    return estimator_class(name).resolve(device, warn).name
