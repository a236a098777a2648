"""The field as a teacher for the bake: cameras the capture does not have, and the fit's loss.

The photos pin the splats down only where a photo looks; between the photos, and nearer to or farther
from the scene than any of them, the splats are free to break (a Gaussian that fits two neighbouring
photos can be a streak in the view between them). The field interpolates smoothly there, so the bake
also fits the splats to the field's renderings from new cameras (``teacher_poses``):

* half of them **between** two neighbouring training cameras: the centre interpolated linearly at a
  random fraction in [0.25, 0.75], the rotation spherically (slerp);
* half of them a training camera **pushed in or out** along its viewing axis by up to ``push`` times
  its distance to what it looks at (its median depth).

``fit_loss`` is 3DGS's photometric loss, (1 - λ) L1 + λ (1 - SSIM), with SSIM's 11 x 11 Gaussian window
(σ 1.5) over the valid part of the image, as ``enerf.metrics.ssim`` (scikit-image) computes it for scoring.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy.spatial.transform import Rotation, Slerp
from torch import Tensor

__all__ = ["teacher_poses", "ssim_map", "fit_loss", "SSIM_RADIUS", "SSIM_SIGMA"]

SSIM_RADIUS = 5  # an 11 x 11 window (scikit-image's with sigma 1.5 and truncate 3.5)
SSIM_SIGMA = 1.5
_C1, _C2 = 0.01 ** 2, 0.03 ** 2  # (K1 L)², (K2 L)² for data range L = 1


def teacher_poses(poses: np.ndarray, depths: np.ndarray, count: int, push: float, seed: int = 0) -> np.ndarray:
    """``count`` new cameras near the capture's (module docstring).

    Args:
        poses: [V, 3, 4] camera-to-world of the training cameras (OpenGL axes: column 2 points back,
            away from what the camera looks at), V >= 2
        depths: [V] each camera's median depth (> 0) along its viewing axis
        push: the largest move along the axis, relative to the depth
    Returns:
        [count, 3, 4] float32 camera-to-world, unit rotation columns
    """
    poses = np.asarray(poses, np.float64)
    rng = np.random.default_rng(seed)
    centres = poses[:, :3, 3]
    dist = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    np.fill_diagonal(dist, np.inf)
    nearest = dist.argmin(1)
    rot = poses[:, :3, :3] / np.linalg.norm(poses[:, :3, :3], axis=1, keepdims=True)
    out = np.zeros((count, 3, 4))
    for k in range(count):
        i = int(rng.integers(len(poses)))
        if k % 2 == 0:  # between camera i and its nearest neighbour
            j, t = int(nearest[i]), float(rng.uniform(0.25, 0.75))
            out[k, :3, :3] = Slerp([0.0, 1.0], Rotation.from_matrix(rot[[i, j]]))([t]).as_matrix()[0]
            out[k, :3, 3] = (1.0 - t) * centres[i] + t * centres[j]
        else:  # camera i moved along its axis (back: + column 2)
            out[k, :3, :3] = rot[i]
            out[k, :3, 3] = centres[i] + rot[i][:, 2] * float(rng.uniform(-push, push)) * float(depths[i])
    return out.astype(np.float32)


def _window(device, dtype) -> Tensor:
    """[2 * SSIM_RADIUS + 1] the normalised 1D Gaussian window."""
    x = torch.arange(-SSIM_RADIUS, SSIM_RADIUS + 1, device=device, dtype=dtype)
    w = torch.exp(-0.5 * (x / SSIM_SIGMA) ** 2)
    return w / w.sum()


def _blur(x: Tensor) -> Tensor:
    """[C, H, W] -> [C, H - 10, W - 10]: the separable Gaussian window over the valid part (two depthwise
    1D convolutions: on a CPU, forward and backward, less than half the time of a banded matrix product)."""
    c, k = x.shape[0], 2 * SSIM_RADIUS + 1
    w = _window(x.device, x.dtype)
    along_w = F.conv2d(x[None], w.view(1, 1, 1, k).expand(c, 1, 1, k), groups=c)
    return F.conv2d(along_w, w.view(1, 1, k, 1).expand(c, 1, k, 1), groups=c)[0]


def ssim_map(pred: Tensor, target: Tensor) -> Tensor:
    """SSIM per pixel and channel (differentiable in ``pred``).

    Args:
        pred, target: Tensor  # [H, W, 3] in [0, 1], H and W > 10
    Returns:
        Tensor  # [3, H - 10, W - 10] (the window's valid positions; scikit-image crops the same border)
    """
    x, y = pred.permute(2, 0, 1), target.permute(2, 0, 1)
    stacked = _blur(torch.cat([x, y, x * x, y * y, x * y]))
    mx, my, xx, yy, xy = stacked.split(3)
    vx, vy, cxy = xx - mx * mx, yy - my * my, xy - mx * my  # population (co)variances, as use_sample_covariance=False
    return ((2 * mx * my + _C1) * (2 * cxy + _C2)) / ((mx * mx + my * my + _C1) * (vx + vy + _C2))


def fit_loss(pred: Tensor, target: Tensor, ssim_weight: float) -> Tensor:
    """(1 - ``ssim_weight``) mean |pred - target| + ``ssim_weight`` (1 - mean SSIM) (3DGS's, λ = 0.2);
    L1 alone where the image is too small for the window.

    pred, target: Tensor  # [H, W, 3] -> Tensor  # []"""
    l1 = (pred - target).abs().mean()
    if ssim_weight <= 0 or min(pred.shape[0], pred.shape[1]) <= 2 * SSIM_RADIUS:
        return l1
    return (1.0 - ssim_weight) * l1 + ssim_weight * (1.0 - ssim_map(pred, target).mean())

