"""NeRF's hierarchical (coarse + fine) sampling, as an estimator of dense samples.

The field reaches the estimator as callables, never as a network::

    rgb_sigma_fn(points: Tensor [n_rays, n_samples, 3], viewdirs: Tensor [n_rays, n_samples, 3])
        -> (rgb: Tensor [n_rays, n_samples, 3] in [0, 1], sigma: Tensor [n_rays, n_samples] >= 0)

The callables return *activated* colour and density, so NeRF's ``raw_noise_std`` (noise on
the pre-activation density while training) is not the renderer's business: whoever builds
the callables passes it to the field as ``density_noise_std`` (see
``enerf.run.render_fn``), and builds them without noise for evaluation.

Semantics follow nerf-pytorch's ``render_rays`` / ``raw2outputs``: the last sample's
interval is 1e10, intervals are scaled by ``|directions|``, and ``depth`` is the expected
ray parameter ``t`` (camera z-depth for ``pixel_rays`` rays, whose camera z component is -1;
NDC ``t`` in [0, 1] for NDC rays). The compositing is ``compositing.composite``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..config import RenderConfig
from ..data.rays import Rays
from .compositing import composite
from .estimator import FieldFns, RgbSigmaFn, Samples
from .renderer import Renderer
from .sampling import sample_pdf, stratified_samples

__all__ = ["HierarchicalEstimator", "render_rays", "render_image"]


class HierarchicalEstimator:
    """Stratified samples, then (``cfg.n_importance > 0``) importance samples from a coarse pass.

    The coarse pass queries ``fns.rgb_sigma`` and composites it (its rgb / depth / acc come back
    as ``Samples.extras``, for the coarse loss); the samples returned are the sorted union of
    both sets, for the fine field. Without importance samples the stratified ones are returned
    for the coarse field. No state.
    """

    name = "hierarchical"
    grid = None

    def __init__(self, cfg: RenderConfig) -> None:
        self.cfg = cfg

    def sample(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> Samples:
        """Dense samples of ``rays`` [n_rays]: t [n_rays, n_samples (+ n_importance)].

        ``train``: stratified jitter and random importance samples iff ``train and cfg.perturb``;
        random numbers come from ``generator`` (default: torch's global generator).
        """
        cfg = self.cfg
        perturb = bool(train and cfg.perturb)
        t = stratified_samples(rays.near, rays.far, cfg.n_samples, perturb, cfg.lindisp, generator)
        stratified = Samples(t=t)
        if cfg.n_importance <= 0:
            return stratified
        rgb, sigma = fns.rgb_sigma(*stratified.points(rays))
        coarse = composite(rgb, sigma, t, rays.directions, cfg.white_bkgd)
        mids = 0.5 * (t[:, 1:] + t[:, :-1])
        t_fine = sample_pdf(mids, coarse["weights"][:, 1:-1], cfg.n_importance, not perturb, generator)
        t_all, _ = torch.sort(torch.cat([t, t_fine.detach()], dim=-1), dim=-1)
        extras = {"rgb_coarse": coarse["rgb"], "depth_coarse": coarse["depth"], "acc_coarse": coarse["acc"]}
        return Samples(t=t_all, n_queries=stratified.count, fine=True, extras=extras)

    def update(self, step: int, fns: FieldFns, generator: torch.Generator | None = None) -> None:
        return None

    def state_dict(self) -> dict | None:
        return None

    def load_state_dict(self, state: dict | None) -> None:
        return None


def render_rays(
    rays: Rays,
    coarse_fn: RgbSigmaFn,
    fine_fn: RgbSigmaFn | None,
    cfg: RenderConfig,
    train: bool,
    generator: torch.Generator | None = None,
) -> dict:
    """Render a batch of rays: a coarse pass, then (``cfg.n_importance > 0``) a fine pass.

    Args:
        rays: Rays with fields [n_rays, c].
        coarse_fn: rgb_sigma_fn of the coarse field.
        fine_fn: rgb_sigma_fn of the fine field; None reuses ``coarse_fn`` (as nerf-pytorch
            does without a fine network).
        cfg: sampling settings; ``cfg.raw_noise_std`` and ``cfg.chunk`` are not read here.
        train: stratified jitter and random importance samples iff ``train and cfg.perturb``.
        generator: source of the random numbers (default: torch's global generator).

    Returns:
        dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays] of the final pass;
        rgb_coarse, depth_coarse, acc_coarse when ``cfg.n_importance > 0``; and
        n_queries (int), the number of points passed to the callables
        (n_rays * n_samples, plus n_rays * (n_samples + n_importance) for the fine pass),
        which is also n_samples (every point is rendered with gradients).
    """
    return Renderer(cfg, HierarchicalEstimator(cfg)).render_rays(rays, FieldFns(coarse_fn, None, fine_fn), train, generator)


def render_image(
    rays: Rays,
    coarse_fn: RgbSigmaFn,
    fine_fn: RgbSigmaFn | None,
    cfg: RenderConfig,
    chunk: int | None = None,
) -> dict[str, Tensor]:
    """Render a whole image for evaluation (no jitter), ``chunk`` rays at a time.

    Peak memory is bounded by ``chunk * (2 * n_samples + n_importance)`` points; each
    chunk's results are moved to the CPU before the next one is rendered.

    Args:
        rays: Rays with leading shape [H, W].
        chunk: rays per pass (default ``cfg.chunk``).

    Returns:
        dict of CPU tensors: rgb [H, W, 3], depth [H, W], acc [H, W]
        (and rgb_coarse / depth_coarse / acc_coarse when ``cfg.n_importance > 0``).
    """
    return Renderer(cfg, HierarchicalEstimator(cfg)).render_image(rays, FieldFns(coarse_fn, None, fine_fn), chunk)
