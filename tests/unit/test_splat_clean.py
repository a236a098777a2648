"""``enerf.splats.clean``: crops against numpy, and a Gaussian's contribution to a view (its blending
weight summed over the pixels) against the weights computed here with numpy from the 3DGS image
formation, for one Gaussian behind another; a Gaussian behind the camera is dropped as a floater."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.splats import Splats
from enerf.splats.clean import contributions, crop_mask, drop_floaters
from enerf.cameras.pinhole import Pinhole

W, H, F = 64, 48, 100.0
CAMERA = Pinhole(torch.eye(4)[:3], W, H, F)  # at the origin, looking down -z (OpenGL axes)


def _gaussians(depths, sigmas, opacities) -> Splats:
    """Round Gaussians on the camera's axis at ``depths``, standard deviations ``sigmas``."""
    n = len(depths)
    means = torch.tensor([[0.0, 0.0, -d] for d in depths])
    log_scales = torch.log(torch.tensor(sigmas, dtype=torch.float32))[:, None].expand(n, 3).contiguous()
    logits = torch.logit(torch.tensor(opacities, dtype=torch.float32))
    return Splats(means, log_scales, torch.tensor([[1.0, 0, 0, 0]] * n), logits, torch.zeros(n, 1, 3))


def _alpha(depth: float, sigma: float, opacity: float) -> np.ndarray:
    """[H, W] a centred round Gaussian's alpha at the pixel centres: the projected variance
    (f sigma / z)² plus the 0.3 px² low-pass, capped at 0.99, fainter than 1/255 skipped."""
    var = (F * sigma / depth) ** 2 + 0.3
    u, v = np.meshgrid(np.arange(W) + 0.5 - W / 2, np.arange(H) + 0.5 - H / 2)
    a = np.minimum(0.99, opacity * np.exp(-0.5 * (u * u + v * v) / var))
    return np.where(a >= 1 / 255, a, 0.0)


def test_contribution_of_a_gaussian_behind_another():
    splats = _gaussians([4.0, 6.0], [0.1, 0.2], [0.7, 0.9])
    front, back = _alpha(4.0, 0.1, 0.7), _alpha(6.0, 0.2, 0.9)
    expected = [front.sum(), (back * (1 - front)).sum()]
    np.testing.assert_allclose(contributions(splats, [CAMERA]).numpy(), expected, rtol=2e-3)


def test_the_largest_over_views_and_floaters_behind_every_camera():
    splats = _gaussians([5.0, -3.0, 5.0], [0.1, 0.1, 0.1], [0.5, 0.9, 0.5])  # the second is behind the camera
    splats.means[2, 0] = 100.0  # far to the side: outside the first view
    aside = Pinhole(torch.tensor([[1.0, 0, 0, 100.0], [0, 1, 0, 0], [0, 0, 1, 0]]), W, H, F)
    c = contributions(splats, [CAMERA, aside]).numpy()
    one = _alpha(5.0, 0.1, 0.5).sum()
    np.testing.assert_allclose(c, [one, 0.0, one], rtol=2e-3)
    kept, dropped = drop_floaters(splats, [CAMERA, aside], 0.01)
    assert dropped == 1 and torch.equal(kept.means, splats.means[[0, 2]])


@pytest.mark.parametrize("crop", [(-1.0, -0.5, 0.0, 1.0, 0.5, 2.0), (0.2, -0.1, 0.3, 0.8)])
def test_crop_against_numpy(crop):
    means = torch.rand(500, 3, generator=torch.Generator().manual_seed(0)) * 4 - 2
    m = means.numpy()
    if len(crop) == 6:
        expected = np.all((m >= crop[:3]) & (m <= crop[3:]), axis=1)
    else:
        expected = np.linalg.norm(m - np.array(crop[:3], np.float32), axis=1) <= crop[3]
    assert 0 < expected.sum() < 500
    np.testing.assert_array_equal(crop_mask(means, crop).numpy(), expected)
