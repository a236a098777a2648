"""Per-image appearance: an affine colour transform for each training photo (exposure, white balance).

Phone photos and videos change exposure and white balance from frame to frame; a field that must
reproduce each photo's colours exactly bakes those changes into the scene (view-dependent haze,
colour shifts). With ``--appearance affine`` the colour a ray composites (``c``, [3]) is seen in
training photo ``i`` as::

    c_i = c + (D_i - mean_j D_j) c + (b_i - mean_j b_j)        D_i: [3, 3], b_i: [3], zero at the start

learned with the field (3DGS's per-image exposure transform; nerfacto learns an appearance embedding
into its colour network instead). The transforms' mean is the identity by construction, so the field
alone renders the photos' mean appearance: held-out views are scored on it (nerfacto's protocol, its
mean appearance embedding), and render / mesh / export read the field as they always do.

NeRF-W's protocol is the second figure every evaluation writes (``psnr_fit_right``): an affine colour
transform fitted by least squares to the left half of a held-out view, its PSNR on the right half
(``fit_affine``, ``right_half_psnr``); it asks what the geometry and colours reach once a photo's own
exposure is allowed, whether or not the run learned appearance.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from ..metrics import psnr

__all__ = ["Appearance", "fit_affine", "right_half_psnr", "APPEARANCE_PROTOCOL"]

# What metrics.json says of how held-out views were scored (its ``appearance``).
APPEARANCE_PROTOCOL = {
    "psnr": "the field's own colours: the mean appearance of the training photos (nerfacto's protocol)",
    "psnr_fit_right": "an affine colour transform fitted by least squares on each held-out view's left half, "
                      "PSNR on its right half (NeRF-W's protocol)",
}


class Appearance(nn.Module):
    """One affine colour transform per training photo, their mean the identity (module docstring).

    Args:
        n_images: training photos (the ray sampler's views, in its order).
    """

    def __init__(self, n_images: int) -> None:
        super().__init__()
        self.matrix = nn.Parameter(torch.zeros(n_images, 3, 3))  # D_i
        self.offset = nn.Parameter(torch.zeros(n_images, 3))  # b_i

    def forward(self, rgb: Tensor, views: Tensor) -> Tensor:
        """rgb: Tensor  # [n, 3] composited colours, views: Tensor  # [n] int64 (0 .. n_images - 1)
        -> Tensor  # [n, 3]: each ray's colour as its photo sees it."""
        matrix = (self.matrix - self.matrix.mean(0))[views]  # [n, 3, 3]
        offset = (self.offset - self.offset.mean(0))[views]  # [n, 3]
        return rgb + torch.einsum("nij,nj->ni", matrix, rgb) + offset


def fit_affine(pred: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The affine colour transform (A [3, 3], b [3]) that brings ``pred`` closest to ``target`` in
    least squares (``target ~ pred @ A.T + b``); pred, target: [n, 3]."""
    design = np.concatenate([pred.reshape(-1, 3), np.ones((pred.size // 3, 1))], axis=1).astype(np.float64)  # [n, 4]
    solution, *_ = np.linalg.lstsq(design, target.reshape(-1, 3).astype(np.float64), rcond=None)  # [4, 3]
    return solution[:3].T, solution[3]


def right_half_psnr(pred: np.ndarray, target: np.ndarray) -> float:
    """NeRF-W's protocol: PSNR on the right half of a view ([H, W, 3] in [0, 1]) after the affine colour
    transform fitted on its left half (``fit_affine``; the result clipped to [0, 1])."""
    half = pred.shape[1] // 2
    matrix, offset = fit_affine(pred[:, :half], target[:, :half])
    right = np.clip(pred[:, half:].astype(np.float64) @ matrix.T + offset, 0.0, 1.0)
    return psnr(right.astype(np.float32), target[:, half:])
