"""Volume rendering against hand-computed and analytic values."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from enerf.config import RenderConfig
from enerf.cameras.rays import Rays
from enerf.render import build_renderer, composite, sample_pdf, stratified_samples

CPU = torch.device("cpu")


class _Field:
    """A field from ``fn(points, viewdirs) -> (rgb, sigma)`` (sigma independent of viewdirs):
    density at the points, colour from the points as features; counts density passes and points."""

    def __init__(self, fn):
        self.fn, self.points, self.calls = fn, 0, 0

    def density(self, points, noise_std=0.0):
        assert points.shape[-1] == 3
        self.calls += 1
        self.points += points[..., 0].numel()
        return self.fn(points, torch.zeros_like(points))[1], points

    def mean_density(self, points, noise_std=0.0):
        return self.fn(points, torch.zeros_like(points))[1]

    def color(self, features, viewdirs):
        assert features.shape == viewdirs.shape
        return self.fn(features, viewdirs)[0]


def _fields(coarse, fine) -> dict:
    as_field = lambda fn: fn if isinstance(fn, _Field) else _Field(fn)  # noqa: E731
    return {"coarse": as_field(coarse), **({"fine": as_field(fine)} if fine is not None else {})}


def render_rays(rays, coarse, fine, cfg, train, generator=None):
    """The hierarchical renderer on ``coarse`` (and ``fine``) rgb_sigma functions."""
    return build_renderer(cfg, CPU).render_rays(rays, _fields(coarse, fine), train, generator)


def render_image(rays, coarse, fine, cfg, chunk=None):
    return build_renderer(cfg, CPU).render_image(rays, _fields(coarse, fine), chunk)


def _rays(n: int, near: float = 1.0, far: float = 5.0, seed: int = 0) -> Rays:
    """Rays from the origin with camera-style directions (x, y, -1), so t is z-depth."""
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) - 0.5
    directions = torch.cat([xy, -torch.ones(n, 1)], dim=-1)
    return Rays(
        origins=torch.zeros(n, 3),
        directions=directions,
        viewdirs=directions / directions.norm(dim=-1, keepdim=True),
        near=torch.full((n, 1), near),
        far=torch.full((n, 1), far),
    )


def _slab_fn(z0: float, z1: float, sigma_in: float, colour=(0.2, 0.5, 0.9)):
    """Density sigma_in where the depth -z lies in [z0, z1], else 0; constant colour."""

    def fn(points, viewdirs):
        depth = -points[..., 2]
        sigma = torch.where((depth >= z0) & (depth <= z1), sigma_in, 0.0)
        rgb = torch.tensor(colour).expand(points.shape)
        return rgb, sigma

    return fn


def _smooth_fn(points, viewdirs):
    sigma = torch.nn.functional.softplus(3 * torch.sin(3 * points[..., 0]) + 2 * torch.cos(2 * points[..., 1]) - points[..., 2])
    rgb = torch.sigmoid(points + 0.5 * viewdirs)
    return rgb, sigma


def test_composite_hand_computed():
    t = torch.tensor([[1.0, 1.5, 2.5]])
    sigma = torch.tensor([[0.5, 2.0, 1.0]])
    directions = torch.tensor([[0.0, 0.0, 2.0]])  # |d| = 2: deltas [1, 2, 2e10]
    rgb = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    out = composite(rgb, sigma, t, directions)
    alpha = [1 - math.exp(-0.5), 1 - math.exp(-4.0), 1.0]
    trans = [1.0, math.exp(-0.5), math.exp(-4.5)]
    weights = [a * tr for a, tr in zip(alpha, trans)]
    np.testing.assert_allclose(out["weights"][0].numpy(), weights, rtol=1e-5)
    np.testing.assert_allclose(out["rgb"][0].numpy(), weights, rtol=1e-5)
    np.testing.assert_allclose(out["acc"].item(), 1.0, rtol=1e-6)  # the last interval is 1e10
    np.testing.assert_allclose(out["depth"].item(), weights[0] * 1 + weights[1] * 1.5 + weights[2] * 2.5, rtol=1e-5)


def test_composite_constant_colour_is_colour_times_acc():
    torch.manual_seed(0)
    n, s = 6, 9
    t = torch.sort(torch.rand(n, s) * 4 + 1, dim=-1).values
    sigma = torch.rand(n, s) * 0.3
    colour = torch.tensor([0.3, 0.6, 0.1])
    sigma[:, -1] = 0.0  # keep acc below 1 despite the 1e10 last interval
    out = composite(colour.expand(n, s, 3), sigma, t, torch.randn(n, 3))
    assert (out["acc"] < 0.999).all()
    np.testing.assert_allclose(out["rgb"].numpy(), (colour[None] * out["acc"][:, None]).numpy(), rtol=1e-5)
    white = composite(colour.expand(n, s, 3), sigma, t, torch.randn(n, 3), white_bkgd=True)
    acc = white["acc"][:, None]
    np.testing.assert_allclose(white["rgb"].numpy(), (colour * acc + 1 - acc).numpy(), rtol=1e-5)


@pytest.mark.parametrize("z0", [2.3, 2.315])
def test_opaque_slab_depth(z0):
    z1, n_samples = z0 + 0.5, 128
    rays = _rays(10)
    fn = _slab_fn(z0, z1, 1e4)
    cfg = RenderConfig(n_samples=n_samples, n_importance=0, perturb=False)
    out = render_rays(rays, fn, None, cfg, train=False)
    t = np.linspace(1.0, 5.0, n_samples)
    k = np.argmax(t >= z0)  # an opaque slab stops every ray at its first sample inside
    np.testing.assert_allclose(out["depth"].numpy(), t[k], atol=1e-4)
    np.testing.assert_allclose(out["acc"].numpy(), 1.0, atol=1e-5)
    np.testing.assert_allclose(out["rgb"].numpy(), np.tile([0.2, 0.5, 0.9], (10, 1)), atol=1e-5)

    # All weight sits on coarse sample k, so the importance samples fill its bin between the
    # midpoints around it; the fine depth is the first of them inside the slab.
    n_importance = 64
    fine = render_rays(rays, fn, None, RenderConfig(n_samples=n_samples, n_importance=n_importance, perturb=False), train=False)
    spacing = t[1] - t[0]
    expect = max(z0, 0.5 * (t[k - 1] + t[k]))
    np.testing.assert_allclose(fine["depth"].numpy(), expect, atol=1.5 * spacing / (n_importance - 1))
    np.testing.assert_allclose(fine["acc"].numpy(), 1.0, atol=1e-5)


def test_semi_transparent_slab_matches_analytic():
    z0, z1, s = 2.3, 2.8, 2.0
    rays = _rays(8)
    cfg = RenderConfig(n_samples=2048, n_importance=0, perturb=False)
    out = render_rays(rays, _slab_fn(z0, z1, s), None, cfg, train=False)
    a = s * rays.directions.norm(dim=-1).numpy()  # attenuation per unit t
    length = z1 - z0
    acc = 1 - np.exp(-a * length)
    depth = z0 * acc + 1 / a - np.exp(-a * length) * (length + 1 / a)  # integral of t * a e^{-a (t - z0)}
    np.testing.assert_allclose(out["acc"].numpy(), acc, atol=5e-3)
    np.testing.assert_allclose(out["depth"].numpy(), depth, atol=1e-2)


def test_stratified_samples():
    near = torch.tensor([[1.0], [0.5], [2.0]])
    far = torch.tensor([[5.0], [1.5], [3.0]])
    n = 16
    t = stratified_samples(near, far, n, perturb=False, lindisp=False)
    for i in range(3):
        np.testing.assert_allclose(t[i].numpy(), np.linspace(near[i, 0].item(), far[i, 0].item(), n), rtol=1e-6)
    t_disp = stratified_samples(near, far, n, perturb=False, lindisp=True)
    for i in range(3):
        expect = 1 / np.linspace(1 / near[i, 0].item(), 1 / far[i, 0].item(), n)
        np.testing.assert_allclose(t_disp[i].numpy(), expect, rtol=1e-5)

    g = torch.Generator().manual_seed(3)
    jittered = stratified_samples(near, far, n, perturb=True, lindisp=False, generator=g)
    again = stratified_samples(near, far, n, perturb=True, lindisp=False, generator=torch.Generator().manual_seed(3))
    assert torch.equal(jittered, again)
    assert not torch.equal(jittered, t)
    for i in range(3):
        grid = np.linspace(near[i, 0].item(), far[i, 0].item(), n)
        mids = 0.5 * (grid[1:] + grid[:-1])
        lower, upper = np.r_[grid[0], mids], np.r_[mids, grid[-1]]
        row = jittered[i].numpy()
        assert np.all(row >= lower - 1e-6) and np.all(row <= upper + 1e-6)
        assert np.all(np.diff(row) >= 0)


def _pdf_case():
    bins = np.array([0.0, 1.0, 1.5, 3.0, 3.2, 4.0])
    weights = np.array([0.5, 2.0, 1.0, 3.0, 0.7])
    pdf = (weights + 1e-5) / (weights + 1e-5).sum()
    cdf = np.r_[0.0, np.cumsum(pdf)]
    return bins, weights, cdf


def test_sample_pdf_deterministic_is_inverse_cdf():
    bins, weights, cdf = _pdf_case()
    n = 101
    t = sample_pdf(
        torch.tensor(bins, dtype=torch.float32)[None].repeat(2, 1),
        torch.tensor(weights, dtype=torch.float32)[None].repeat(2, 1),
        n,
        deterministic=True,
    )
    expect = np.interp(np.linspace(0, 1, n), cdf, bins)  # inverse of the piecewise-linear cdf
    np.testing.assert_allclose(t[0].numpy(), expect, atol=1e-5)
    np.testing.assert_allclose(t[1].numpy(), expect, atol=1e-5)


def test_sample_pdf_random_follows_the_pdf():
    bins, weights, cdf = _pdf_case()
    g = torch.Generator().manual_seed(0)
    t = sample_pdf(
        torch.tensor(bins, dtype=torch.float32)[None],
        torch.tensor(weights, dtype=torch.float32)[None],
        20000,
        deterministic=False,
        generator=g,
    )[0].numpy()
    assert t.min() >= bins[0] and t.max() <= bins[-1]
    result = stats.kstest(t, lambda x: np.interp(x, bins, cdf))
    assert result.pvalue > 0.01
    counts, _ = np.histogram(t, bins=bins)
    np.testing.assert_allclose(counts / t.size, np.diff(cdf), atol=0.015)


def test_render_image_chunked_equals_unchunked():
    h, w = 5, 7
    rays = _rays(h * w, seed=1)
    rays_hw = Rays(*(f.reshape(h, w, -1) for f in rays))
    cfg = RenderConfig(n_samples=16, n_importance=8, perturb=True, chunk=1000)
    whole = render_image(rays_hw, _smooth_fn, None, cfg)
    chunked = render_image(rays_hw, _smooth_fn, None, cfg, chunk=6)
    direct = render_rays(rays, _smooth_fn, None, cfg, train=False)
    assert whole["rgb"].shape == (h, w, 3) and whole["depth"].shape == (h, w) and whole["acc"].shape == (h, w)
    assert whole["rgb"].device.type == "cpu" and not whole["rgb"].requires_grad
    for key in ("rgb", "depth", "acc", "rgb_coarse"):
        np.testing.assert_allclose(chunked[key].numpy(), whole[key].numpy(), atol=1e-6)
        np.testing.assert_allclose(whole[key].reshape(h * w, -1).numpy(), direct[key].reshape(h * w, -1).numpy(), atol=1e-6)


@pytest.mark.parametrize("n_importance", [0, 12])
def test_n_queries_counts_network_points(n_importance):
    n_rays, n_samples = 9, 20
    rays = _rays(n_rays)
    cfg = RenderConfig(n_samples=n_samples, n_importance=n_importance)
    coarse, fine = _Field(_smooth_fn), _Field(_smooth_fn)
    out = render_rays(rays, coarse, fine, cfg, train=True, generator=torch.Generator().manual_seed(0))
    assert out["n_queries"] == coarse.points + fine.points
    assert coarse.points == n_rays * n_samples and coarse.calls == 1
    # The fine pass re-queries the coarse samples together with the importance samples (nerf-pytorch).
    assert fine.points == (n_rays * (n_samples + n_importance) if n_importance else 0)
    assert ("rgb_coarse" in out) == (n_importance > 0)

    shared = _Field(_smooth_fn)  # no fine field: the coarse one runs both passes
    out = render_rays(rays, shared, None, cfg, train=False)
    assert shared.calls == (2 if n_importance else 1)
    assert out["n_queries"] == shared.points == n_rays * (n_samples + (n_samples + n_importance if n_importance else 0))


def test_perturbation_only_when_training():
    rays = _rays(4)
    cfg = RenderConfig(n_samples=16, n_importance=8, perturb=True)
    a = render_rays(rays, _smooth_fn, None, cfg, train=False, generator=torch.Generator().manual_seed(0))
    b = render_rays(rays, _smooth_fn, None, cfg, train=False, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a["rgb"], b["rgb"])
    c = render_rays(rays, _smooth_fn, None, cfg, train=True, generator=torch.Generator().manual_seed(0))
    d = render_rays(rays, _smooth_fn, None, cfg, train=True, generator=torch.Generator().manual_seed(0))
    assert torch.equal(c["rgb"], d["rgb"]) and not torch.equal(a["rgb"], c["rgb"])
    off = RenderConfig(n_samples=16, n_importance=8, perturb=False)
    e = render_rays(rays, _smooth_fn, None, off, train=True, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a["rgb"], e["rgb"])


def test_fine_samples_are_detached():
    rays = _rays(4)
    scale_c = torch.tensor(1.0, requires_grad=True)
    scale_f = torch.tensor(1.0, requires_grad=True)

    def coarse(points, viewdirs):
        rgb, sigma = _smooth_fn(points, viewdirs)
        return rgb, sigma * scale_c

    def fine(points, viewdirs):
        rgb, sigma = _smooth_fn(points, viewdirs)
        return rgb, sigma * scale_f

    out = render_rays(rays, coarse, fine, RenderConfig(n_samples=8, n_importance=8), train=True)
    out["rgb"].sum().backward()
    assert scale_c.grad is None  # the coarse field only moves the (detached) fine sample positions
    assert scale_f.grad is not None and scale_f.grad != 0
    out = render_rays(rays, coarse, fine, RenderConfig(n_samples=8, n_importance=8), train=True)
    out["rgb_coarse"].sum().backward()
    assert scale_c.grad is not None and scale_c.grad != 0
