"""Per-image appearance (``enerf.fields.appearance``) and the robust loss (``photometric_mse``):
against numpy and against transforms of known values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.fields.appearance import Appearance, fit_affine, right_half_psnr
from enerf.train.nerf import photometric_mse


def test_transforms_match_numpy_and_their_mean_is_the_identity():
    rng = np.random.default_rng(0)
    n = 5
    model = Appearance(n)
    with torch.no_grad():
        model.matrix.copy_(torch.from_numpy(rng.normal(0, 0.2, (n, 3, 3)).astype(np.float32)))
        model.offset.copy_(torch.from_numpy(rng.normal(0, 0.1, (n, 3)).astype(np.float32)))
    matrix, offset = model.matrix.detach().numpy(), model.offset.detach().numpy()
    colour = rng.random(3).astype(np.float32)
    views = torch.arange(n)
    seen = model(torch.from_numpy(colour).expand(n, 3), views).detach().numpy()  # [n, 3]
    for i in range(n):
        a = np.eye(3) + matrix[i] - matrix.mean(0)
        np.testing.assert_allclose(seen[i], a @ colour + offset[i] - offset.mean(0), atol=1e-6)
    np.testing.assert_allclose(seen.mean(0), colour, atol=1e-6)  # the mean appearance is the field's colour


def test_learns_known_per_photo_transforms():
    """Colours seen through per-photo transforms whose mean is the identity: Adam recovers each one."""
    rng = np.random.default_rng(1)
    n = 4
    deltas = rng.normal(0, 0.15, (n, 3, 3))
    deltas -= deltas.mean(0)
    shifts = rng.normal(0, 0.05, (n, 3))
    shifts -= shifts.mean(0)
    colours = rng.random((2048, 3))
    views = rng.integers(0, n, 2048)
    target = colours + np.einsum("nij,nj->ni", deltas[views], colours) + shifts[views]
    model = Appearance(n)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    c, v, t = (torch.from_numpy(x) for x in (colours.astype(np.float32), views, target.astype(np.float32)))
    for _ in range(1500):
        optimizer.zero_grad()
        torch.mean((model(c, v) - t) ** 2).backward()
        optimizer.step()
    learned = (model.matrix - model.matrix.mean(0)).detach().numpy()
    np.testing.assert_allclose(learned, deltas, atol=5e-3)
    np.testing.assert_allclose((model.offset - model.offset.mean(0)).detach().numpy(), shifts, atol=5e-3)


def test_fit_affine_recovers_a_known_transform():
    rng = np.random.default_rng(2)
    a, b = np.eye(3) + rng.normal(0, 0.2, (3, 3)), rng.normal(0, 0.1, 3)
    pred = rng.random((500, 3))
    fitted_a, fitted_b = fit_affine(pred, pred @ a.T + b)
    np.testing.assert_allclose(fitted_a, a, atol=1e-10)
    np.testing.assert_allclose(fitted_b, b, atol=1e-10)


def test_right_half_psnr_is_the_noise_of_the_right_half():
    """Target = an affine transform of the rendering, exact on the left half and with noise of known
    power on the right: the fit is the transform, the PSNR that of the noise (no clipping: values stay
    inside [0, 1])."""
    rng = np.random.default_rng(3)
    a, b = np.diag([0.8, 0.9, 0.7]) + 0.02, np.array([0.05, 0.03, 0.1])
    pred = rng.uniform(0.1, 0.9, (20, 32, 3))
    target = pred @ a.T + b
    noise = rng.normal(0, 0.01, (20, 16, 3))
    target[:, 16:] += noise
    assert right_half_psnr(pred.astype(np.float32), target.astype(np.float32)) == pytest.approx(
        -10 * np.log10(np.mean(noise**2)), abs=0.01)


@pytest.mark.parametrize("trim", [0.0, 0.2, 0.5])
def test_trimmed_loss_keeps_the_rays_of_smallest_error(trim):
    rng = np.random.default_rng(4)
    rgb, target = rng.random((100, 3)), rng.random((100, 3))
    per_ray = np.mean((rgb - target) ** 2, axis=1)
    # torch.quantile interpolates linearly: the rays at or below the (1 - trim) (n - 1)-th smallest stay
    kept = int(np.floor((1 - trim) * 99)) + 1
    expected = np.sort(per_ray)[:kept].mean()
    got = photometric_mse(torch.from_numpy(rgb), torch.from_numpy(target), trim).item()
    assert got == pytest.approx(expected, rel=1e-12)
