"""The sampling interface: estimators behind ``build_renderer``, and their CPU-testable preconditions."""

from __future__ import annotations

import pytest
import torch

from enerf.config import FieldConfig, RenderConfig
from enerf.errors import ConfigError
from enerf.render import NerfaccEstimator, Samples, build_fields, build_renderer
from enerf.render.registry import check_sampler_options
from enerf.render.compositing import composite, composite_packed

CPU = torch.device("cpu")


@pytest.mark.parametrize("settings,message", [
    ({"sampler": "nerfacc", "cull_occluded": True, "early_stop_eps": 1e-2}, "cull_occluded needs sampler torch_grid"),
    ({"sampler": "nerfacc", "n_importance": 8}, "n_importance must be 0 with sampler nerfacc"),
    ({"sampler": "proposal", "n_importance": 8}, "n_importance must be 0 with sampler proposal"),
    ({"sampler": "hierarchical", "cull_occluded": True, "early_stop_eps": 1e-2}, "cull_occluded needs sampler torch_grid"),
    ({"sampler": "torch_grid", "cull_occluded": True, "early_stop_eps": 0.0}, "cull_occluded needs .*early_stop_eps > 0"),
])
def test_each_sampler_refuses_settings_it_cannot_honour(settings, message):
    """Each estimator checks its own options (``Estimator.check``), before a run builds its fields."""
    cfg = RenderConfig(**settings)  # the config itself names no sampler
    with pytest.raises(ConfigError, match=message):
        check_sampler_options(cfg)
    with pytest.raises(ConfigError, match=message):
        build_fields(FieldConfig(netdepth=1, netwidth=8), CPU, cfg)


def test_each_sampler_takes_its_own_options():
    for settings in ({"sampler": "hierarchical", "n_importance": 8},
                     {"sampler": "torch_grid", "cull_occluded": True, "early_stop_eps": 1e-2},
                     {"sampler": "auto", "cull_occluded": True, "early_stop_eps": 1e-2}):
        check_sampler_options(RenderConfig(**settings))


def test_nerfacc_estimator_refuses_culling_before_touching_nerfacc(random_grid):
    """``auto`` passes the config's check and may resolve to nerfacc, which does not cull: the
    estimator says so before nerfacc (CUDA) is imported, on any machine."""
    with pytest.raises(ConfigError, match="--cull_occluded needs --sampler torch_grid; nerfacc does not cull"):
        NerfaccEstimator(RenderConfig(sampler="auto", cull_occluded=True, early_stop_eps=1e-2), random_grid(4, 1.0, seed=0))


@pytest.mark.parametrize("renderer", ["hierarchical", "torch_grid"])
def test_renderer_composites_the_estimators_samples_and_images_equal_batches(renderer, random_rays, random_grid,
                                                                            smooth_field):
    """``Renderer.render_rays`` = the compositor applied by hand to the estimator's samples at the
    points they name; ``render_image`` over an [H, W] ray grid, chunked, = one batch of all rays."""
    cfg = RenderConfig(sampler=renderer, n_samples=24, render_step_size=1 / 48, early_stop_eps=0.0, perturb=False)
    rays, fields = random_rays(60, seed=4), smooth_field()
    built = build_renderer(cfg, CPU, grid=random_grid(8, 0.6, seed=5)) if renderer == "torch_grid" else build_renderer(cfg, CPU)
    out = built.render_rays(rays, fields, train=False)
    samples: Samples = built.estimator.sample(rays, fields, train=False)
    assert samples.packed == (renderer == "torch_grid") and samples.count > 60
    if samples.packed:
        t_mid = 0.5 * (samples.t_starts + samples.t_ends)
        points = rays.origins[samples.ray_indices] + t_mid[:, None] * rays.directions[samples.ray_indices]
        rgb, sigma = fields["coarse"](points, rays.viewdirs[samples.ray_indices])
        expected = composite_packed(rgb, sigma, samples.t_starts, samples.t_ends, samples.ray_indices, 60,
                                    rays.directions.norm(dim=-1))
    else:
        points = rays.origins[:, None] + samples.t[..., None] * rays.directions[:, None]
        rgb, sigma = fields["coarse"](points, rays.viewdirs[:, None].expand(points.shape))
        expected = composite(rgb, sigma, samples.t, rays.directions)
    for key in ("rgb", "depth", "acc"):
        torch.testing.assert_close(out[key], expected[key], rtol=0, atol=0)
    assert out["n_samples"] == samples.count and out["n_queries"] == samples.count
    image = built.render_image(type(rays)(*(t.reshape(6, 10, -1) for t in rays)), fields, chunk=7)
    for key in ("rgb", "depth", "acc"):
        torch.testing.assert_close(image[key].reshape(out[key].shape), out[key])


def test_nerfacc_estimator_updates_its_one_grid_as_nerfacc_does():
    """nerfacc's update (pure torch) run on the estimator's grid equals it run on a separate
    ``nerfacc.OccGridEstimator``, and nerfacc's estimator holds the grid's tensors, not copies."""
    nerfacc = pytest.importorskip("nerfacc")
    from enerf.render import OccupancyGrid

    cfg = RenderConfig(sampler="nerfacc", cull_occluded=False, grid_update_every=2, grid_warmup=3,
                       render_step_size=0.05)
    grid = OccupancyGrid([-1, -1, -1, 1, 1, 1], 8)
    estimator = NerfaccEstimator(cfg, grid)
    reference = nerfacc.OccGridEstimator(roi_aabb=[-1, -1, -1, 1, 1, 1], resolution=8, levels=1)

    def density(x):  # a ball of radius 0.6
        return 40.0 * (x.norm(dim=-1) < 0.6).float()

    for step in range(7):
        torch.manual_seed(step)
        estimator.update_grid(step, density)
        torch.manual_seed(step)
        reference.update_every_n_steps(step, lambda x: (density(x) * cfg.render_step_size).reshape(-1, 1),
                                       occ_thre=cfg.occ_thre, ema_decay=cfg.grid_ema_decay, warmup_steps=3, n=2)
        assert torch.equal(grid.occs, reference.occs)
        assert torch.equal(grid.binaries.reshape(-1), reference.binaries.reshape(-1))
        assert estimator.estimator.occs.data_ptr() == grid.occs.data_ptr()
        assert estimator.estimator.binaries.data_ptr() == grid.binaries.data_ptr()
    assert 0 < grid.binaries.float().mean() < 1
