"""Per-image appearance (``enerf.fields.appearance``) and the robust loss (``photometric_mse``,
``robust_mask``, the patch sampler): against numpy / scipy and against transforms of known values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import ndimage

from enerf.config import DataConfig
from enerf.data.loaders import load_scene
from enerf.data.sampler import RaySampler
from enerf.fields.appearance import Appearance, fit_affine, right_half_psnr
from enerf.train.nerf import photometric_mse, robust_mask

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
def test_trimmed_loss_per_ray_keeps_the_rays_of_smallest_error(trim):
    rng = np.random.default_rng(4)
    rgb, target = rng.random((100, 3)), rng.random((100, 3))
    per_ray = np.mean((rgb - target) ** 2, axis=1)
    # torch.quantile interpolates linearly: the rays at or below the (1 - trim) (n - 1)-th smallest stay
    kept = int(np.floor((1 - trim) * 99)) + 1
    expected = np.sort(per_ray)[:kept].mean()
    got = photometric_mse(torch.from_numpy(rgb), torch.from_numpy(target), trim).item()
    assert got == pytest.approx(expected, rel=1e-12)


def _robustnerf_mask_numpy(inlier: np.ndarray, p: int) -> np.ndarray:
    """RobustNeRF's mask written with scipy: inlier [n, p, p] bool -> [n, p, p] bool."""
    out = np.empty_like(inlier)
    inner = np.zeros((p, p), bool)
    inner[p // 4:p // 4 + p // 2, p // 4:p // 4 + p // 2] = True
    for k, patch in enumerate(inlier):
        share = ndimage.correlate(patch.astype(float), np.full((3, 3), 1 / 9), mode="constant", cval=0.0)
        pixel = patch | (share > 0.5 - 1e-9)
        out[k] = pixel | (inner if pixel.mean() > 0.6 else False)
    return out


@pytest.mark.parametrize("share", [0.3, 0.6, 0.8])
def test_robust_mask_matches_scipy(share):
    rng = np.random.default_rng(5)
    inlier = rng.random((12, 8, 8)) < share
    inlier[0] = True  # an all-inlier patch stays so
    inlier[1, :4] = False  # a block of outliers: removed but for its edge pixels with inlier neighbours
    got = robust_mask(torch.from_numpy(inlier.reshape(-1)), 8).numpy().reshape(12, 8, 8)
    np.testing.assert_array_equal(got, _robustnerf_mask_numpy(inlier, 8))
    assert got[0].all() and not got[1, :2].any()


def test_isolated_bad_pixels_stay_and_a_block_of_them_goes():
    """Errors of a patch: small everywhere, one isolated large pixel (an edge the field has yet to learn)
    and a 4 x 8 block of large ones (a passer-by): the loss keeps the first, leaves out the block's
    inside."""
    err = np.full((4, 8, 8), 0.01)
    err[:, 6, 6] = 1.0  # one bad pixel in every patch
    err[0, :4, :] = 0.5  # a block in patch 0
    rgb = torch.from_numpy(np.sqrt(err)[..., None].repeat(3, -1).reshape(-1, 3))
    target = torch.zeros_like(rgb)
    per_ray_trim = photometric_mse(rgb, target, trim=0.15)  # 15 % of 256: the block's 32 and more
    robust = photometric_mse(rgb, target, trim=0.15, patch=8)
    inlier = err.reshape(-1) <= np.quantile(err.reshape(-1), 0.85)
    keep = _robustnerf_mask_numpy(inlier.reshape(4, 8, 8), 8).reshape(-1)
    assert robust.item() == pytest.approx(err.reshape(-1)[keep].mean(), rel=1e-12)
    assert keep.reshape(4, 8, 8)[1:, 6, 6].all() and not keep.reshape(4, 8, 8)[0, :2].any()
    assert per_ray_trim.item() == pytest.approx(0.01, rel=1e-12)  # per ray: every large error left out


def test_patch_sampler_draws_whole_patches_inside_one_view(scene_dir):
    scene = load_scene(DataConfig(datadir=str(scene_dir), factor=1), Path("data"))
    sampler = RaySampler(scene, scene.i_train, 100, torch.Generator().manual_seed(0), patch=4)
    idx = sampler.draw()
    assert idx.shape == (6 * 16,)  # 100 // 16 patches of 4 x 4
    _, rgb = sampler.batch(idx)
    view, row, col = (t.reshape(6, 4, 4).numpy() for t in sampler.pixels(idx))
    for v, r, c in zip(view, row, col):
        assert (v == v[0, 0]).all()
        np.testing.assert_array_equal(r - r[0, 0], np.arange(4)[:, None].repeat(4, 1))
        np.testing.assert_array_equal(c - c[0, 0], np.arange(4)[None, :].repeat(4, 0))
    expected = np.stack([scene.image(int(scene.i_train[v]))[r, c] for v, r, c in
                         zip(view.reshape(-1), row.reshape(-1), col.reshape(-1))])
    np.testing.assert_allclose(rgb.numpy(), expected, atol=1e-6)
