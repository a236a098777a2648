"""The proposal sampler (nerfacto's; nerfacc's ``PropNetEstimator``) and mip-NeRF 360's losses.

Where a ray is sampled is decided in a normalised distance ``s`` in [0, 1] (``spacing``: the
piecewise linear / disparity spacing of ``--lindisp_from``, else linear or disparity), in
passes::

    s edges: P_0 + 1 evenly spaced (one jitter per ray while training)
    for each proposal level i:                               fields["proposal"].levels[i]
        w_i = weights of level i's density on those intervals
        s edges = P_{i+1} + 1 edges drawn from w_i (inverse CDF; w_i ** anneal while training)
    final intervals: n_samples, where the radiance field is queried once

The intervals go to the renderer packed (``Samples.ray_indices``), in rows (``Samples.per_ray``:
every ray has ``n_samples``), so ``compositing.composite_rows`` weighs them exactly as intervals. While training, the
samples' ``losses`` give the two losses of mip-NeRF 360 (Barron et al., 2022, eqs. 13 and 15):

* ``proposal``: each level's weights must bound the final (detached) weights from above on
  every final interval: mean of max(w - w_outer, 0)^2 / (w + 1e-7) (nerfstudio's
  ``interlevel_loss``); its gradient reaches the proposal networks only;
* ``distortion``: sum_ij w_i w_j |m_i - m_j| + sum_i w_i^2 (s_i+1 - s_i) / 3 over the final
  intervals (midpoints m, in s), which gathers each ray's weight into as short a stretch as it
  can: floaters cost what they weigh times how far they lie from the surface.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import torch
from torch import Tensor, nn

from ..config import FieldConfig, RenderConfig
from ..cameras.rays import Rays
from .estimator import Estimator, Samples, draft_count
from .sampling import uniform

__all__ = ["ProposalEstimator", "spacing", "sample_intervals", "interval_weights", "outer_weights",
           "proposal_loss", "distortion_loss", "anneal_power"]

_EPS = 1e-7  # nerfstudio's in the proposal loss
_PADDING = 0.01  # nerfstudio's histogram_padding: a little weight everywhere, so no interval is never resampled
_ANNEAL_SLOPE = 10.0  # nerfacto's proposal_weights_anneal_slope
# steps over which resampling goes from even spacing to the proposal weights (nerfacto's
# proposal_weights_anneal_max_num_iters)
ANNEAL_STEPS = 1000


def spacing(near: Tensor, far: Tensor, lindisp_from: float, lindisp: bool):
    """The maps between ray distance t and normalised distance s in [0, 1] (s = 0 at ``near``,
    1 at ``far``): ``lindisp_from`` c > 0: g(t) = t / (2c) before c, 1 - c / (2t) beyond
    (``sampling.stratified_samples``' piecewise spacing); else 1 / t with ``lindisp``, else t.

    Args:
        near, far: Tensor  # [n_rays, 1]

    Returns:
        (s_to_t, t_to_s): functions Tensor  # [n_rays, k] -> Tensor  # [n_rays, k]
    """
    if lindisp_from > 0:
        c = float(lindisp_from)

        def g(t: Tensor) -> Tensor:
            return torch.where(t < c, t / (2 * c), 1.0 - c / (2 * t.clamp(min=1e-12)))

        def g_inv(u: Tensor) -> Tensor:
            return torch.where(u < 0.5, 2 * c * u, c / (2 * (1.0 - u).clamp(min=1e-12)))
    elif lindisp:
        def g(t: Tensor) -> Tensor:
            return 1.0 / t.clamp(min=1e-12)

        g_inv = g
    else:
        def g(t: Tensor) -> Tensor:
            return t

        g_inv = g
    g_near, g_far = g(near), g(far)

    def s_to_t(s: Tensor) -> Tensor:
        return g_inv(g_near + s * (g_far - g_near)).clamp(min=near, max=far)

    def t_to_s(t: Tensor) -> Tensor:
        return (g(t) - g_near) / (g_far - g_near)

    return s_to_t, t_to_s


def sample_intervals(edges: Tensor, weights: Tensor, n_intervals: int, jitter: bool,
                     generator: torch.Generator | None = None) -> Tensor:
    """New interval edges drawn from the piecewise-constant pdf ``weights`` over ``edges``
    (nerfstudio's ``PDFSampler``: ``_PADDING`` added to every weight, evenly spaced quantiles,
    shifted by one U[0, 1) jitter per ray while training, else centred in their strata).

    Args:
        edges: Tensor  # [n_rays, n + 1] sorted
        weights: Tensor  # [n_rays, n] >= 0
        n_intervals: intervals to return (``n_intervals + 1`` edges)

    Returns:
        Tensor  # [n_rays, n_intervals + 1] sorted, without gradient
    """
    with torch.no_grad():
        w = weights + _PADDING
        cdf = torch.cumsum(w / w.sum(dim=-1, keepdim=True), dim=-1).clamp(max=1.0)
        cdf = torch.cat([torch.zeros_like(cdf[:, :1]), cdf[:, :-1], torch.ones_like(cdf[:, :1])], dim=-1)
        n_edges = n_intervals + 1
        u = torch.linspace(0.0, 1.0 - 1.0 / n_edges, n_edges, dtype=edges.dtype, device=edges.device)
        shift = uniform((edges.shape[0], 1), edges, generator) if jitter else torch.full_like(edges[:, :1], 0.5)
        u = (u + shift / n_edges).expand(edges.shape[0], n_edges).contiguous()
        inds = torch.searchsorted(cdf.contiguous(), u, right=True)
        below = (inds - 1).clamp(min=0, max=edges.shape[-1] - 1)
        above = inds.clamp(max=edges.shape[-1] - 1)
        cdf_lo, cdf_hi = cdf.gather(-1, below), cdf.gather(-1, above)
        e_lo, e_hi = edges.gather(-1, below), edges.gather(-1, above)
        frac = torch.nan_to_num((u - cdf_lo) / (cdf_hi - cdf_lo), 0.0).clamp(0.0, 1.0)
        return e_lo + frac * (e_hi - e_lo)


def interval_weights(sigma: Tensor, t_edges: Tensor, dir_norm: Tensor) -> Tensor:
    """Compositing weights T_i (1 - exp(-sigma_i delta_i)) of intervals.

    Args:
        sigma: Tensor  # [n_rays, n] density on each interval
        t_edges: Tensor  # [n_rays, n + 1]
        dir_norm: Tensor  # [n_rays] |directions| (intervals are in ray t)

    Returns:
        Tensor  # [n_rays, n]
    """
    sigma_delta = sigma * (t_edges[:, 1:] - t_edges[:, :-1]) * dir_norm[:, None]
    before = torch.cumsum(sigma_delta, dim=-1) - sigma_delta
    return torch.exp(-before) * (1.0 - torch.exp(-sigma_delta))


def outer_weights(edges: Tensor, env_edges: Tensor, env_weights: Tensor) -> Tensor:
    """For each interval of ``edges``, the summed weight of the ``env`` intervals that overlap
    it (mip-NeRF 360's ``outer`` measure, nerfstudio's ``outer``).

    Args:
        edges: Tensor  # [n_rays, n + 1]
        env_edges: Tensor  # [n_rays, m + 1]
        env_weights: Tensor  # [n_rays, m]

    Returns:
        Tensor  # [n_rays, n]
    """
    cum = torch.cat([torch.zeros_like(env_weights[:, :1]), torch.cumsum(env_weights, dim=-1)], dim=-1)
    m = env_weights.shape[-1]
    lo = (torch.searchsorted(env_edges[:, :-1].contiguous(), edges[:, :-1].contiguous(), right=True) - 1).clamp(0, m - 1)
    hi = torch.searchsorted(env_edges[:, 1:].contiguous(), edges[:, 1:].contiguous(), right=True).clamp(0, m - 1)
    return cum[:, 1:].gather(-1, hi) - cum[:, :-1].gather(-1, lo)


def proposal_loss(edges: Tensor, weights: Tensor, env_edges: Tensor, env_weights: Tensor) -> Tensor:
    """mip-NeRF 360's proposal loss of one level (eq. 13): mean over rays and final intervals of
    max(w - outer, 0)^2 / (w + 1e-7), ``w`` = ``weights`` detached. Shapes as ``outer_weights``."""
    w = weights.detach()
    bound = outer_weights(edges.detach(), env_edges, env_weights)
    return ((w - bound).clamp(min=0.0) ** 2 / (w + _EPS)).sum(dim=-1).mean()


def distortion_loss(edges: Tensor, weights: Tensor) -> Tensor:
    """mip-NeRF 360's distortion loss (eq. 15) per ray, averaged: sum_ij w_i w_j |m_i - m_j| +
    sum_i w_i^2 (e_i+1 - e_i) / 3, the double sum in O(n) as 2 sum_i w_i (m_i W_<i - S_<i)
    (W_<i, S_<i: running sums of w and w m before i).

    Args:
        edges: Tensor  # [n_rays, n + 1] sorted (in s)
        weights: Tensor  # [n_rays, n]
    """
    mids = 0.5 * (edges[:, 1:] + edges[:, :-1])
    w_before = torch.cumsum(weights, dim=-1) - weights
    wm = weights * mids
    wm_before = torch.cumsum(wm, dim=-1) - wm
    inter = 2.0 * (weights * (mids * w_before - wm_before)).sum(dim=-1)
    intra = (weights ** 2 * (edges[:, 1:] - edges[:, :-1])).sum(dim=-1) / 3.0
    return (inter + intra).mean()


def anneal_power(step: int, anneal_steps: int) -> float:
    """The power the proposal weights are raised to before resampling at training step ``step``
    (nerfacto: slope 10, from 0, all samples evenly spread, to 1 at ``anneal_steps``)."""
    if anneal_steps <= 0:
        return 1.0
    frac = min(max(step / anneal_steps, 0.0), 1.0)
    return _ANNEAL_SLOPE * frac / ((_ANNEAL_SLOPE - 1.0) * frac + 1.0)


class ProposalEstimator(Estimator):
    """Proposal passes, then ``cfg.n_samples`` intervals per ray (the module docstring).

    ``sample`` reads the run's ``ProposalNetworks`` (``fields["proposal"]``, built by ``networks``,
    called as ``proposal(level, points)``). While training, the samples carry the losses of
    their passes (``Samples.losses``: the passes' intervals and weights, kept until then).
    """

    name = "proposal"

    def __init__(self, cfg: RenderConfig) -> None:
        super().__init__(cfg)
        self.step = 0

    @staticmethod
    def networks(cfg: RenderConfig, field: FieldConfig, device: torch.device) -> dict[str, nn.Module]:
        """The proposal networks (``fields["proposal"]``), in the radiance field's box and contraction."""
        from ..fields.proposal import ProposalNetworks

        return {"proposal": ProposalNetworks(cfg.proposal_resolutions, cfg.proposal_components, field.contraction,
                                             field.grid_aabb).to(device)}

    def sample(self, rays: Rays, fields: Mapping[str, nn.Module], train: bool,
               generator: torch.Generator | None = None) -> Samples:
        """Packed intervals of ``rays`` [n_rays], ``cfg.n_samples`` per ray.

        Args:
            fields: ``fields["proposal"]``: ``ProposalNetworks``, ``proposal(level, points [..., 3]) -> density [...]``.
            train: jitter, anneal, and keep the passes (with gradients) for the samples' ``losses``.
        """
        cfg, proposal = self.cfg, fields["proposal"]
        n_rays = rays.origins.shape[0]
        s_to_t, _ = spacing(rays.near, rays.far, cfg.lindisp_from, cfg.lindisp)
        dir_norm = rays.directions.norm(dim=-1)
        jitter = bool(train and cfg.perturb)
        power = anneal_power(self.step, ANNEAL_STEPS) if train else 1.0
        first = cfg.proposal_samples[0]
        steps = torch.linspace(0.0, 1.0, first + 1, dtype=rays.near.dtype, device=rays.near.device)
        if jitter:  # one shift per ray, as nerfacto's single jitter
            shift = (uniform((n_rays, 1), rays.near, generator) - 0.5) / first
            edges = (steps + shift).clamp(0.0, 1.0)
        else:
            edges = steps.expand(n_rays, first + 1)
        levels = []
        counts = list(cfg.proposal_samples[1:]) + [cfg.n_samples]
        n_queries = 0
        for level, n_next in enumerate(counts):
            t = s_to_t(edges)
            points = rays.origins[:, None, :] + rays.directions[:, None, :] * (0.5 * (t[:, 1:] + t[:, :-1]))[..., None]
            with torch.set_grad_enabled(train and torch.is_grad_enabled()):
                weights = interval_weights(proposal(level, points), t, dir_norm)
            n_queries += points.shape[0] * points.shape[1]
            levels.append((edges, weights))
            resample = weights.detach() ** power if power != 1.0 else weights.detach()
            edges = sample_intervals(edges, resample, n_next, jitter, generator)
        t = s_to_t(edges)
        ray_indices = torch.arange(n_rays, device=t.device).repeat_interleave(cfg.n_samples)
        return Samples(ray_indices=ray_indices, t_starts=t[:, :-1].reshape(-1), t_ends=t[:, 1:].reshape(-1),
                       per_ray=cfg.n_samples, n_queries=n_queries,
                       losses=self._losses(levels, edges) if train else None)

    def _losses(self, levels: list[tuple[Tensor, Tensor]], edges: Tensor):
        """The losses of one training batch's passes (``levels``: (s edges, weights) of each
        proposal pass; ``edges``: s edges of the final intervals), from the radiance field's
        compositing weights on its intervals."""
        cfg = self.cfg

        def losses(weights: Tensor) -> dict[str, Tensor]:
            """weights: Tensor  # [n_rays * n_samples] (packed, ray-major) -> {"proposal": the sum over
            levels (weight 1, nerfacto's), "distortion": distortion_weight x distortion_loss (left out at 0)}."""
            w = weights.reshape(edges.shape[0], -1)
            terms = {"proposal": sum(proposal_loss(edges, w, e, pw) for e, pw in levels)}
            if cfg.distortion_weight > 0:
                terms["distortion"] = cfg.distortion_weight * distortion_loss(edges, w)
            return terms

        return losses

    def update(self, step: int, fields=None, generator: torch.Generator | None = None) -> None:
        """Training step ``step``: sets the annealing of the proposal weights."""
        self.step = step

    @classmethod
    def draft_config(cls, cfg: RenderConfig, fraction: float) -> RenderConfig:
        """Fewer final intervals and proposal intervals (the same proposal networks, read on fewer
        intervals: on a CPU the proposal passes cost more than the field's few samples)."""
        cfg = super().draft_config(cfg, fraction)
        return dataclasses.replace(cfg, n_samples=draft_count(cfg.n_samples, fraction),
                                   proposal_samples=tuple(draft_count(n, fraction) for n in cfg.proposal_samples))
