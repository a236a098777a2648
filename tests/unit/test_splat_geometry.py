"""``Splats``' geometry, the one the rasterizer, the viewer and the files take their numbers from, against
independent computations: scipy's rotations for the covariance, the 3DGS colour rule, the importance order."""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial.transform import Rotation

from enerf.splats.gaussians import SH_C0, Splats


def _splats(n: int = 50, seed: int = 0) -> Splats:
    gen = torch.Generator().manual_seed(seed)
    return Splats(torch.randn(n, 3, generator=gen, dtype=torch.float64),
                  torch.randn(n, 3, generator=gen, dtype=torch.float64) - 2.0,
                  3.0 * torch.randn(n, 4, generator=gen, dtype=torch.float64),  # not unit: normalised where used
                  torch.randn(n, generator=gen, dtype=torch.float64),
                  2.0 * torch.randn(n, 4, 3, generator=gen, dtype=torch.float64))


def test_covariances_are_r_s_s_r_transposed():
    s = _splats()
    q = s.quats.numpy()
    rot = Rotation.from_quat(q[:, [1, 2, 3, 0]]).as_matrix()  # scipy: x, y, z, w
    std = np.exp(s.log_scales.numpy())
    expected = np.einsum("nij,nj,nkj->nik", rot, std**2, rot)
    np.testing.assert_allclose(s.covariances().numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(s.factors().numpy(), rot * std[:, None, :], atol=1e-12)
    # a covariance's eigenvalues are the variances along the Gaussian's axes
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(expected), 1), np.sort(std**2, 1), rtol=1e-9)


def test_base_colour_and_importance():
    s = _splats()
    rgb = np.clip(0.5 + SH_C0 * s.sh[:, 0].numpy(), 0.0, 1.0)
    np.testing.assert_allclose(s.base_rgb().numpy(), rgb, atol=1e-15)
    assert (rgb == 0.0).any() and (rgb == 1.0).any()  # the clamp is exercised
    volume = np.prod(np.exp(s.log_scales.numpy()), 1)
    np.testing.assert_allclose(s.importance().numpy(), volume / (1.0 + np.exp(-s.opacity_logits.numpy())), rtol=1e-12)
