"""Colour only where it counts (``RenderConfig.rgb_weight_threshold``, TensoRF's appearance mask):
the renderer's two-pass query against compositing weights computed independently in numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.config import FieldConfig

from enerf.config import RenderConfig
from enerf.fields.nerf import NeRFField
from enerf.render import build_renderer

CPU = torch.device("cpu")


class _SharpField:
    """A dense blob of density around the origin (so that most samples weigh nothing), colour a
    sigmoid of the features; ``calls`` records how many points each colour pass gets."""

    def __init__(self, calls: list[int]) -> None:
        self.calls = calls

    def density(self, points, noise_std=0.0):
        sigma = 40.0 * torch.exp(-points.square().sum(-1) / 0.05)
        return sigma, torch.cat([points, points.square()], -1)

    def mean_density(self, points, noise_std=0.0):
        return self.density(points)[0]

    def color(self, features, viewdirs):
        self.calls.append(features[..., 0].numel())
        return torch.sigmoid(2 * features[..., :3] - features[..., 3:] + viewdirs)


def _sharp_field(calls: list[int]) -> dict:
    return {"coarse": _SharpField(calls)}


def _numpy_weights(sigma: np.ndarray, t: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """nerf-pytorch's raw2outputs weights, in float64 numpy: alpha_i prod_{j<i} (1 - alpha_j)."""
    dists = np.concatenate([np.diff(t, axis=1), np.full_like(t[:, :1], 1e10)], 1) * np.linalg.norm(directions, axis=1)[:, None]
    alpha = 1.0 - np.exp(-sigma * dists)
    trans = np.cumprod(np.concatenate([np.ones_like(alpha[:, :1]), 1.0 - alpha], 1), 1)[:, :-1]
    return alpha * trans


def _rays_through_the_blob(random_rays, n: int, seed: int):
    rays = random_rays(n, seed=seed)
    # aim every ray at a point near the origin from 1.5 away, so t in [near, far] crosses the blob
    g = torch.Generator().manual_seed(seed)
    target = 0.2 * (torch.rand(n, 3, generator=g) - 0.5)
    directions = target - rays.origins
    directions = directions / directions.norm(dim=-1, keepdim=True)
    origins = target - 1.5 * directions
    return type(rays)(origins, directions, directions, torch.full_like(rays.near, 0.5), torch.full_like(rays.far, 2.5))


@pytest.mark.parametrize("threshold", [1e-4, 1e-2])
def test_dense_colour_is_computed_only_where_the_weight_exceeds_the_threshold(random_rays, threshold):
    rays = _rays_through_the_blob(random_rays, 64, seed=3)
    calls: list[int] = []
    fns = _sharp_field(calls)
    full = build_renderer(RenderConfig(n_samples=48, perturb=False), CPU).render_rays(rays, fns, train=False)
    masked_renderer = build_renderer(RenderConfig(n_samples=48, perturb=False, rgb_weight_threshold=threshold), CPU)
    calls.clear()
    masked = masked_renderer.render_rays(rays, fns, train=False)

    samples = masked_renderer.estimator.sample(rays, fns, train=False)
    points = (rays.origins[:, None] + samples.t[..., None] * rays.directions[:, None]).double().numpy()
    sigma = 40.0 * np.exp(-(points ** 2).sum(-1) / 0.05)
    weights = _numpy_weights(sigma, samples.t.double().numpy(), rays.directions.double().numpy())
    kept = weights > threshold
    assert 0 < kept.sum() < kept.size / 2  # the mask matters here: most samples are skipped
    assert calls == [int(kept.sum())]  # one colour pass, at the kept samples only
    assert masked["n_colour_skipped"] == kept.size - kept.sum() and full["n_colour_skipped"] == 0
    # a skipped sample would have added w * rgb with rgb in (0, 1): the pixel moves by less than the skipped weight
    skipped = np.where(kept, 0.0, weights).sum(1)
    diff = (full["rgb"] - masked["rgb"]).double().numpy()
    assert np.all(diff >= -1e-6) and np.all(diff <= skipped[:, None] + 1e-6)
    assert diff.max() > 0  # and it did move
    torch.testing.assert_close(masked["acc"], full["acc"], rtol=0, atol=0)
    torch.testing.assert_close(masked["depth"], full["depth"], rtol=0, atol=0)


def test_packed_samples_are_masked_by_their_own_weights(random_rays, random_grid):
    rays = _rays_through_the_blob(random_rays, 48, seed=5)
    calls: list[int] = []
    fns = _sharp_field(calls)
    settings = dict(sampler="torch_grid", render_step_size=1 / 64, early_stop_eps=0.0, perturb=False)
    grid = random_grid(8, 1.0, seed=0)
    full = build_renderer(RenderConfig(**settings), CPU, grid=grid).render_rays(rays, fns, train=False)
    calls.clear()
    masked = build_renderer(RenderConfig(**settings, rgb_weight_threshold=1e-3), CPU, grid=grid).render_rays(
        rays, fns, train=False)
    assert len(calls) == 1 and 0 < calls[0] < full["n_samples"] / 2
    assert masked["n_samples"] == full["n_samples"] and masked["n_colour_skipped"] == full["n_samples"] - calls[0]
    gap = (full["rgb"] - masked["rgb"]).abs().max().item()
    assert 0 < gap < 1e-3 * full["n_samples"] / 48  # below the threshold times the samples per ray


def test_nerf_field_two_passes_equal_its_forward_draws_included():
    torch.manual_seed(0)
    field = NeRFField(FieldConfig(netdepth=2, netwidth=32, skips=(), multires=4, view_width=16))
    x, d = torch.randn(200, 3), torch.nn.functional.normalize(torch.randn(200, 3), dim=-1)
    torch.manual_seed(7)
    rgb, sigma = field(x, d, noise_std=1.0)
    torch.manual_seed(7)
    sigma2, h = field.density(x, noise_std=1.0)
    torch.testing.assert_close(sigma2, sigma, rtol=0, atol=0)
    torch.testing.assert_close(field.color(h, d), rgb, rtol=0, atol=0)


def test_masked_training_batch_still_trains_density_and_colour(random_rays):
    """Gradients reach the density of every sample and the colour branch through the kept ones."""
    torch.manual_seed(0)
    field = NeRFField(FieldConfig(netdepth=2, netwidth=32, skips=(), multires=4, view_width=16))
    rays = random_rays(32, seed=1)
    renderer = build_renderer(RenderConfig(n_samples=16, rgb_weight_threshold=1e-4), CPU)
    out = renderer.render_rays(rays, {"coarse": field}, train=True, generator=torch.Generator().manual_seed(0))
    out["rgb"].sum().backward()
    assert field.rgb_head.weight.grad.abs().sum() > 0 and field.density_head.weight.grad.abs().sum() > 0
