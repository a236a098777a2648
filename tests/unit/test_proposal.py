"""The proposal sampler (``enerf.render.proposal``) against independent numpy computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.config import RenderConfig
from enerf.cameras.rays import Rays
from enerf.render import build_renderer
from enerf.render.compositing import composite_packed
from enerf.render.proposal import (anneal_power, distortion_loss, interval_weights, outer_weights, proposal_loss,
                                   sample_intervals, spacing)

CPU = torch.device("cpu")


def _sorted_edges(g: torch.Generator, n_rays: int, n: int, lo: float = 0.0, hi: float = 1.0) -> torch.Tensor:
    return torch.sort(lo + (hi - lo) * torch.rand(n_rays, n + 1, generator=g, dtype=torch.float64), dim=-1).values


@pytest.mark.parametrize("lindisp_from,lindisp", [(1.0, False), (0.0, True), (0.0, False)])
def test_spacing_maps_near_far_to_0_1_and_inverts(lindisp_from, lindisp):
    near = torch.tensor([[0.05], [0.5]], dtype=torch.float64)
    far = torch.tensor([[1000.0], [3.0]], dtype=torch.float64)
    s_to_t, t_to_s = spacing(near, far, lindisp_from, lindisp)
    s = torch.linspace(0, 1, 11, dtype=torch.float64).expand(2, 11)
    t = s_to_t(s)
    torch.testing.assert_close(t[:, :1], near)
    torch.testing.assert_close(t[:, -1:], far)
    torch.testing.assert_close(t_to_s(t), s)
    # independently: piecewise g(t) = t / 2 below 1, 1 - 1 / (2 t) above; disparity; depth
    tn, nn_, fn = t.numpy(), near.numpy(), far.numpy()
    if lindisp_from > 0:
        g = lambda x: np.where(x < 1, x / 2, 1 - 1 / (2 * x))  # noqa: E731
    elif lindisp:
        g = lambda x: 1 / x  # noqa: E731
    else:
        g = lambda x: x  # noqa: E731
    np.testing.assert_allclose((g(tn) - g(nn_)) / (g(fn) - g(nn_)), s.numpy(), atol=1e-9)


def test_sample_intervals_is_the_inverse_cdf_of_the_padded_weights():
    """Without jitter, edge k is the inverse CDF (linear interpolation of (cdf, edges), numpy's
    ``interp``) at quantile (k + 0.5) / (n + 1) of the weights + 0.01."""
    g = torch.Generator().manual_seed(0)
    edges = _sorted_edges(g, 5, 12)
    weights = torch.rand(5, 12, generator=g, dtype=torch.float64) ** 4
    out = sample_intervals(edges, weights, 7, jitter=False)
    assert out.shape == (5, 8)
    for r in range(5):
        w = weights[r].numpy() + 0.01
        cdf = np.concatenate([[0.0], np.cumsum(w / w.sum())])
        u = (np.arange(8) + 0.5) / 8
        np.testing.assert_allclose(out[r].numpy(), np.interp(u, cdf, edges[r].numpy()), atol=1e-9)
    jittered = sample_intervals(edges, weights, 7, jitter=True, generator=torch.Generator().manual_seed(3))
    assert bool((jittered[:, 1:] >= jittered[:, :-1]).all())


def test_interval_weights_are_transmittance_times_opacity():
    g = torch.Generator().manual_seed(1)
    t = _sorted_edges(g, 4, 9, 0.1, 4.0)
    sigma = torch.rand(4, 9, generator=g, dtype=torch.float64) * 3
    norm = 0.5 + torch.rand(4, generator=g, dtype=torch.float64)
    w = interval_weights(sigma, t, norm).numpy()
    for r in range(4):
        trans = 1.0
        for i in range(9):
            alpha = 1 - np.exp(-sigma[r, i].item() * (t[r, i + 1] - t[r, i]).item() * norm[r].item())
            assert w[r, i] == pytest.approx(trans * alpha, rel=1e-9)
            trans *= 1 - alpha


def test_outer_weights_sum_the_overlapping_envelope_intervals():
    """Brute force: every envelope interval (a, b) with a < end and b > start counts."""
    g = torch.Generator().manual_seed(2)
    env = _sorted_edges(g, 6, 10)
    env[:, 0], env[:, -1] = 0.0, 1.0
    env_w = torch.rand(6, 10, generator=g, dtype=torch.float64)
    edges = _sorted_edges(g, 6, 7, 0.01, 0.99)
    out = outer_weights(edges, env, env_w).numpy()
    for r in range(6):
        for i in range(7):
            a, b = edges[r, i].item(), edges[r, i + 1].item()
            overlap = (env[r, :-1].numpy() < b) & (env[r, 1:].numpy() > a)
            assert out[r, i] == pytest.approx(env_w[r].numpy()[overlap].sum(), rel=1e-9)


def test_proposal_loss_vanishes_when_the_envelope_bounds_and_not_otherwise():
    g = torch.Generator().manual_seed(3)
    edges = _sorted_edges(g, 3, 8)
    w = torch.rand(3, 8, generator=g, dtype=torch.float64)
    assert proposal_loss(edges, w, edges, w).item() < 1e-20  # each interval bounds itself (up to cumsum rounding)
    w_env = torch.zeros(3, 8, dtype=torch.float64, requires_grad=True)
    loss = proposal_loss(edges, w, edges, w_env)
    assert loss.item() == pytest.approx((w ** 2 / (w + 1e-7)).sum(-1).mean().item(), rel=1e-9)
    loss.backward()
    assert bool((w_env.grad < 0).all())  # raising the envelope lowers the loss


def test_distortion_loss_equals_the_quadratic_double_sum():
    g = torch.Generator().manual_seed(4)
    edges = _sorted_edges(g, 5, 11)
    w = torch.rand(5, 11, generator=g, dtype=torch.float64) / 5
    e, wn = edges.numpy(), w.numpy()
    m = 0.5 * (e[:, 1:] + e[:, :-1])
    inter = np.einsum("ri,rj,rij->r", wn, wn, np.abs(m[:, :, None] - m[:, None, :]))
    intra = (wn ** 2 * (e[:, 1:] - e[:, :-1])).sum(-1) / 3
    assert distortion_loss(edges, w).item() == pytest.approx((inter + intra).mean(), rel=1e-9)
    # one narrow peak costs less than the same weight split between two distant places
    peak = torch.tensor([[0.0, 0.49, 0.51, 1.0]], dtype=torch.float64)
    assert distortion_loss(peak, torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)) < \
        distortion_loss(peak, torch.tensor([[0.5, 0.0, 0.5]], dtype=torch.float64))


def test_anneal_power_runs_from_0_to_1_as_nerfacto():
    assert anneal_power(0, 1000) == 0.0 and anneal_power(1000, 1000) == 1.0 and anneal_power(5000, 1000) == 1.0
    assert anneal_power(100, 1000) == pytest.approx(1 / 1.9)  # 10 * 0.1 / (9 * 0.1 + 1)
    assert anneal_power(3, 0) == 1.0


class _Slab(torch.nn.Module):
    """Proposal networks of one level: density 200 in the slab 1.9 < z < 2.1, 0.01 elsewhere."""

    def forward(self, level, x):
        return torch.where((x[..., 2] > 1.9) & (x[..., 2] < 2.1), 200.0, 0.01)


def test_the_estimator_puts_the_final_intervals_where_the_proposal_density_is():
    """Rays along +z from the origin, near 0.05, far 1000, piecewise spacing: the slab at
    t in (1.9, 2.1) is 2.5 % of s, yet after one proposal pass a quarter of the final intervals
    lie on it (all its weight, 1, against the padding's 0.01 x 256 spread evenly: 1 / 3.56 = 28 %);
    the renderer composites them packed, n_samples per ray."""
    n = 8
    rays = Rays(origins=torch.zeros(n, 3), directions=torch.tensor([[0.0, 0.0, 1.0]]).expand(n, 3),
                viewdirs=torch.tensor([[0.0, 0.0, 1.0]]).expand(n, 3), near=torch.full((n, 1), 0.05),
                far=torch.full((n, 1), 1000.0))
    cfg = RenderConfig(sampler="proposal", n_samples=32, proposal_samples=(256,), proposal_resolutions=(16,),
                       lindisp_from=1.0, perturb=False)
    renderer = build_renderer(cfg, CPU)
    samples = renderer.estimator.sample(rays, {"proposal": _Slab()}, train=False)
    assert samples.packed and samples.count == n * 32
    assert torch.equal(samples.ray_indices, torch.arange(n).repeat_interleave(32))
    mids = 0.5 * (samples.t_starts + samples.t_ends)
    on_slab = ((mids > 1.85) & (mids < 2.15)).float().mean().item()
    assert on_slab > 0.25
    # the field sees these intervals composited as intervals
    sigma = _Slab()(0, rays.origins[samples.ray_indices] + mids[:, None] * rays.directions[samples.ray_indices])
    out = composite_packed(torch.ones(samples.count, 3), sigma, samples.t_starts, samples.t_ends, samples.ray_indices,
                           n, torch.ones(n))
    torch.testing.assert_close(out["acc"], torch.ones(n), atol=1e-3, rtol=0)


def test_a_proposal_run_trains_saves_and_renders_from_its_checkpoint(scene_dir, tmp_path, train_metrics):
    """A tiny run with the proposal renderer: the loss terms are logged, the proposal networks are
    saved beside the field, and ``enerf eval`` from the checkpoint gives the run's PSNR again."""
    import json

    from enerf.cli import main
    from enerf.checkpoint import load_checkpoint

    m = train_metrics(scene_dir, tmp_path, "prop", 30, "--factor", "1", "--renderer", "proposal", "--N_samples", "16",
                      "--proposal_samples", "32", "--proposal_resolutions", "16", "--netdepth", "2", "--netwidth", "32",
                      "--multires", "4", "--no_lpips", "--eval_every", "0", "--quiet")
    assert m["renderer"] == "proposal" and np.isfinite(m["psnr"])
    payload, _ = load_checkpoint(tmp_path / "prop" / "checkpoints" / "latest.pt")
    assert set(payload["fields"]) == {"coarse", "proposal"}
    assert main(["eval", "--ckpt", str(tmp_path / "prop" / "checkpoints" / "latest.pt"), "--quiet"]) == 0
    again = json.loads((tmp_path / "prop" / "metrics.json").read_text())
    assert again["psnr"] == pytest.approx(m["psnr"], abs=1e-4)
