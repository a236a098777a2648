"""Compositing of packed samples (nerfacc ``rendering`` in torch) against hand-computed values and nerfacc."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from enerf.config import RenderConfig
from enerf.render import build_renderer
from enerf.render.compositing import composite_packed, composite_rows, exclusive_segment_sum, packed_transmittance

CPU = torch.device("cpu")


def test_transmittance_hand_computed():
    # Three rays of 3, 2 and 2 unit-length samples (nerfacc's documented example).
    t_starts = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    sigma = torch.tensor([0.4, 0.8, 0.1, 0.8, 0.1, 0.0, 0.9])
    ray_indices = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    trans, alphas = packed_transmittance(t_starts, t_starts + 1, sigma, ray_indices, 3, torch.ones(3))
    expected_trans = [1.0, math.exp(-0.4), math.exp(-1.2), 1.0, math.exp(-0.8), 1.0, 1.0]
    np.testing.assert_allclose(trans.numpy(), expected_trans, rtol=1e-6)
    np.testing.assert_allclose(alphas.numpy(), [1 - math.exp(-s) for s in sigma.tolist()], rtol=1e-6)
    # |direction| = 2 doubles every interval.
    trans2, _ = packed_transmittance(t_starts, t_starts + 1, sigma, ray_indices, 3, torch.full((3,), 2.0))
    np.testing.assert_allclose(trans2[2].item(), math.exp(-2.4), rtol=1e-6)


def test_exclusive_segment_sum_keeps_precision_across_many_rays():
    g = torch.Generator().manual_seed(0)
    counts = torch.randint(0, 9, (5000,), generator=g)
    ray_indices = torch.repeat_interleave(torch.arange(5000), counts)
    values = torch.rand(ray_indices.numel(), generator=g) * 100
    out = exclusive_segment_sum(values, ray_indices, 5000)
    v = values.double().numpy()
    expected = np.zeros_like(v)
    start = 0
    for c in counts.tolist():
        expected[start : start + c] = np.concatenate([[0.0], np.cumsum(v[start : start + c])[:-1]])
        start += c
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-4)


def test_packed_rendering_equals_dense_batched_rendering_of_the_same_samples(random_rays, random_grid, smooth_field):
    nerfacc = pytest.importorskip("nerfacc")  # its batched functions are plain torch, CPU included
    rays = random_rays(64, seed=1)
    rays = rays._replace(origins=rays.origins + torch.tensor([5.0, 0.0, 0.0]) * (torch.arange(64) < 4)[:, None])  # 4 misses
    grid = random_grid(16, 0.4, seed=2)
    renderer = build_renderer(RenderConfig(sampler="torch_grid", render_step_size=1 / 64, early_stop_eps=0.0), CPU, grid=grid)
    fns = smooth_field()
    samples = renderer.estimator.sample(rays, fns, train=False)
    ray_indices, t_starts, t_ends = samples.ray_indices, samples.t_starts, samples.t_ends
    counts = torch.bincount(ray_indices, minlength=64)
    assert (counts == 0).any() and counts.max() > 5  # empty rays and long ones are both covered
    packed = renderer.render_rays(rays, fns, train=False)

    # Dense [n_rays, max_count] layout of the same samples; padding has zero width and density.
    n, k = 64, int(counts.max())
    slot = torch.arange(ray_indices.numel()) - (torch.cumsum(counts, 0) - counts)[ray_indices]
    ts = torch.zeros(n, k)
    te = torch.zeros(n, k)
    ts[ray_indices, slot], te[ray_indices, slot] = t_starts, t_ends
    norm = rays.directions.norm(dim=-1, keepdim=True)
    mids = rays.origins[:, None] + (0.5 * (ts + te))[..., None] * rays.directions[:, None]
    rgb_dense, sigma_dense = fns["coarse"](mids, rays.viewdirs[:, None].expand(mids.shape))
    colors, opacities, _, extras = nerfacc.rendering(
        ts * norm, te * norm, rgb_sigma_fn=lambda *_: (rgb_dense, sigma_dense)
    )
    weights = extras["weights"]
    depth = (weights * 0.5 * (ts + te)).sum(-1)
    np.testing.assert_allclose(packed["rgb"].numpy(), colors.numpy(), atol=1e-5)
    np.testing.assert_allclose(packed["acc"].numpy(), opacities[:, 0].numpy(), atol=1e-5)
    np.testing.assert_allclose(packed["depth"].numpy(), depth.numpy(), atol=1e-5)
    mids_packed = rays.origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * rays.directions[ray_indices]
    rgb_p, sigma_p = fns["coarse"](mids_packed, rays.viewdirs[ray_indices])
    out = composite_packed(rgb_p, sigma_p, t_starts, t_ends, ray_indices, n, norm[:, 0])
    np.testing.assert_allclose(out["weights"].numpy(), weights[ray_indices, slot].numpy(), atol=1e-5)
    assert packed["n_samples"] == ray_indices.numel()


@pytest.mark.parametrize("white_bkgd", [False, True])
def test_rows_equal_packed_compositing(white_bkgd):
    """Samples in rows of k (``composite_rows``, the proposal sampler's layout) against
    ``composite_packed`` of the same samples with their ray indices: every output and the
    gradients of the colour with respect to density and colour, to float rounding; a ray with no
    density has depth_median 0 in both."""
    gen = torch.Generator().manual_seed(4)
    n_rays, k = 37, 11
    edges = torch.sort(torch.rand(n_rays, k + 1, generator=gen) * 5.0 + 0.1, dim=1).values
    t_starts, t_ends = edges[:, :-1].reshape(-1), edges[:, 1:].reshape(-1)
    sigma = (torch.rand(n_rays * k, generator=gen) * 4.0).requires_grad_()
    with torch.no_grad():
        sigma[:k] = 0.0  # ray 0 is empty
    rgb = torch.rand(n_rays * k, 3, generator=gen).requires_grad_()
    dir_norm = torch.rand(n_rays, generator=gen) + 0.5
    ray_indices = torch.arange(n_rays).repeat_interleave(k)
    rows = composite_rows(rgb, sigma, t_starts, t_ends, k, dir_norm, white_bkgd)
    packed = composite_packed(rgb, sigma, t_starts, t_ends, ray_indices, n_rays, dir_norm, white_bkgd)
    for key in ("rgb", "depth", "acc", "weights", "trans", "alphas", "depth_median"):
        torch.testing.assert_close(rows[key], packed[key], rtol=1e-5, atol=1e-6)
    assert float(rows["depth_median"][0]) == 0.0 and bool((rows["depth_median"][1:] > 0).all())
    grads = [torch.autograd.grad(out["rgb"].sum(), (sigma, rgb)) for out in (rows, packed)]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
