"""Early stop of the grid estimator: density pre-pass (nerfacc's way) and front-to-back queries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.config import FieldConfig

from enerf.config import RenderConfig
from enerf.fields.nerf import NeRFField
from enerf.fields import AnalyticField
from enerf.render import build_renderer
from enerf.render.compositing import packed_transmittance
from enerf.render.marching import march_rays, visibility_mask, visible_front_to_back

CPU = torch.device("cpu")


def test_early_stop_drops_samples_behind_opaque_ones_and_counts_queries(random_rays, random_grid):
    rays = random_rays(32, seed=5)
    grid = random_grid(8, 1.0, seed=0)
    calls = []

    def sigma(points):
        calls.append(points.shape[0])
        return torch.where(points[..., 2] > 0.0, 200.0, 0.0)  # opaque slab beyond z = 0

    fns = {"coarse": AnalyticField(sigma, lambda p, v: torch.full(p.shape, 0.5))}
    cfg = RenderConfig(sampler="torch_grid", render_step_size=1 / 64, early_stop_eps=1e-4, early_stop_block=0)
    out = build_renderer(cfg, CPU, grid=grid).render_rays(rays, fns, train=False)
    marched = march_rays(rays.origins, rays.directions, rays.near, rays.far, grid, 1 / 64)[0].numel()
    assert calls[0] == marched and out["n_queries"] == marched + out["n_samples"]
    # Each ray keeps its samples up to the first one whose preceding transmittance < 1e-4:
    # with sigma * delta = 200 * 2/64 * |d| > 6, that is one sample past z = 0.
    samples = build_renderer(cfg, CPU, grid=grid).estimator.sample(rays, fns, train=False)
    r_idx, ts = samples.ray_indices, samples.t_starts
    z_mid = rays.origins[r_idx, 2] + (ts + 1 / 128) * rays.directions[r_idx, 2]
    behind = torch.bincount(r_idx[z_mid > 0], minlength=32)
    assert behind.max() == 2 and out["n_samples"] < marched
    np.testing.assert_allclose(out["acc"][behind > 0].numpy(), 1.0, atol=1e-4)


@pytest.mark.parametrize("block", [1, 3, 8])
def test_front_to_back_density_reads_keep_the_same_samples_with_fewer_reads(block):
    gen = torch.Generator().manual_seed(11)
    n_rays = 40
    counts = torch.randint(0, 30, (n_rays,), generator=gen)
    ray_indices = torch.repeat_interleave(torch.arange(n_rays), counts)
    rank = torch.arange(ray_indices.numel()) - (torch.cumsum(counts, 0) - counts)[ray_indices]
    t_starts = rank.double() / 30
    t_ends = t_starts + 1 / 30
    dir_norm = 0.5 + torch.rand(n_rays, generator=gen, dtype=torch.float64)
    points = torch.randn(ray_indices.numel(), 3, generator=gen, dtype=torch.float64)
    # Density: mostly empty, an opaque layer at a random depth per ray, some rays never stopped.
    wall = torch.randint(0, 20, (n_rays,), generator=gen)[ray_indices]
    dense = 50.0 * (rank >= wall) + 2.0 * torch.rand(ray_indices.numel(), generator=gen, dtype=torch.float64)
    lookup = {tuple(p.tolist()): i for i, p in enumerate(points)}
    calls = []

    def sigma_fn(pts):
        calls.append(pts.shape[0])
        rows = torch.tensor([lookup[tuple(p.tolist())] for p in pts], dtype=torch.long)
        return dense[rows]

    for eps, alpha_thre in ((1e-4, 0.0), (1e-2, 0.05)):
        expected = visibility_mask(t_starts, t_ends, dense, ray_indices, n_rays, dir_norm, eps, alpha_thre)
        calls.clear()
        found = visible_front_to_back(
            points, t_starts, t_ends, ray_indices, n_rays, dir_norm, sigma_fn, eps, alpha_thre, block)
        kept, queried = found.kept, found.queried
        assert torch.equal(kept, torch.nonzero(expected)[:, 0]) and queried == sum(calls)
        expected_thickness = dense * (t_ends - t_starts) * dir_norm[ray_indices]
        torch.testing.assert_close(found.thickness, expected_thickness[found.queried_index])
        # Queried: every sample up to its ray's early stop (the L-th), at most 2 L + block in all
        # (rounds of block, 2 block, 4 block, ...), and fewer than all samples.
        last_visible = torch.zeros(n_rays, dtype=torch.long).scatter_reduce(
            0, ray_indices, torch.where(packed_transmittance(t_starts, t_ends, dense, ray_indices, n_rays, dir_norm)[0]
                                        >= eps, rank + 1, 0), "amax")
        needed = torch.minimum(counts, last_visible).sum()
        assert needed <= queried <= torch.minimum(counts, 2 * last_visible + block).sum() < ray_indices.numel()


def test_front_to_back_rendering_equals_prepass_rendering_with_gradients(random_rays, random_grid):
    """The two early-stop modes of torch_grid render the same image with the same gradients;
    front to back reads fewer densities."""
    rays = random_rays(48, seed=7)
    grid = random_grid(8, 0.7, seed=3)
    torch.manual_seed(0)
    field = NeRFField(FieldConfig(netdepth=2, netwidth=32, skips=(), multires=4, multires_views=2, view_width=16))
    with torch.no_grad():
        field.density_head.bias.fill_(50.0)  # opaque: rays stop after a few samples
    fns = {"coarse": field}
    results = {}
    for block in (0, 1):
        cfg = RenderConfig(sampler="torch_grid", render_step_size=1 / 64, early_stop_eps=1e-3, early_stop_block=block)
        field.zero_grad()
        out = build_renderer(cfg, CPU, grid=grid).render_rays(rays, fns, train=False)
        (out["rgb"].square().sum() + out["depth"].sum()).backward()
        grads = torch.cat([p.grad.reshape(-1) for p in field.parameters()])
        results[block] = (out, grads)
    (prepass, g_prepass), (ftb, g_ftb) = results[0], results[1]
    for key in ("rgb", "depth", "acc"):
        torch.testing.assert_close(ftb[key], prepass[key], atol=0, rtol=0)  # the same samples, shaded alike
    torch.testing.assert_close(g_ftb, g_prepass, atol=0, rtol=0)
    marched = prepass["n_queries"] - prepass["n_samples"]  # the pre-pass queries every marched sample
    assert 0 < ftb["n_samples"] == prepass["n_samples"] < marched / 2
    # Front to back: at most 2 L + 1 density reads per ray for L kept samples (rounds of 1, 2, 4, ...).
    reads = ftb["n_queries"] - ftb["n_samples"]
    assert ftb["n_samples"] <= reads <= 2 * ftb["n_samples"] + 48 < marched


@pytest.mark.parametrize("block", [0, 4])
def test_an_empty_grid_renders_black_and_still_backpropagates(block, random_rays, random_grid):
    """No marched sample at all (a grid that has emptied): zero colour and opacity, and a loss
    on them still has a graph (zero gradients), so a training step does not fail."""
    rays = random_rays(16, seed=2)
    field = NeRFField(FieldConfig(netdepth=2, netwidth=16, skips=(), multires=2, multires_views=1, view_width=8))
    cfg = RenderConfig(sampler="torch_grid", render_step_size=1 / 32, early_stop_eps=1e-2, early_stop_block=block)
    out = build_renderer(cfg, CPU, grid=random_grid(8, 1.0, seed=0).fill(False)).render_rays(rays, {"coarse": field}, train=True)
    assert out["n_samples"] == out["n_queries"] == 0
    assert float(out["rgb"].detach().abs().max()) == 0.0 and float(out["acc"].detach().abs().max()) == 0.0
    (out["rgb"] - 0.5).square().mean().backward()
    assert all(p.grad is None or float(p.grad.abs().max()) == 0.0 for p in field.parameters())
