"""Pure-torch volume rendering with NeRF's hierarchical (coarse + fine) sampling.

The renderer receives callables, never a network::

    rgb_sigma_fn(points: Tensor [n_rays, n_samples, 3], viewdirs: Tensor [n_rays, n_samples, 3])
        -> (rgb: Tensor [n_rays, n_samples, 3] in [0, 1], sigma: Tensor [n_rays, n_samples] >= 0)

The callables return *activated* colour and density, so NeRF's ``raw_noise_std`` (noise on
the pre-activation density while training) is not the renderer's business: whoever builds
the callables passes it to the field as ``density_noise_std`` (see
``enerf.train.components.render_fn``), and builds them without noise for evaluation.

Semantics follow nerf-pytorch's ``render_rays`` / ``raw2outputs``: the last sample's
interval is 1e10, intervals are scaled by ``|directions|``, and ``depth`` is the expected
ray parameter ``t`` (camera z-depth for ``pixel_rays`` rays, whose camera z component is -1;
NDC ``t`` in [0, 1] for NDC rays).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..config import RenderConfig
from ..data.rays import Rays, flatten_rays, index_rays
from .sampling import sample_pdf, stratified_samples

__all__ = ["RgbSigmaFn", "composite", "render_rays", "render_image"]

RgbSigmaFn = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


def composite(
    rgb: Tensor, sigma: Tensor, t: Tensor, directions: Tensor, white_bkgd: bool = False
) -> dict[str, Tensor]:
    """Alpha-composite samples along rays (nerf-pytorch ``raw2outputs`` on activated values).

    Args:
        rgb: Tensor  # [n_rays, n_samples, 3]
        sigma: Tensor  # [n_rays, n_samples] density, >= 0
        t: Tensor  # [n_rays, n_samples] sorted sample positions
        directions: Tensor  # [n_rays, 3] marching directions (intervals are scaled by their norm)
        white_bkgd: composite onto a white background.

    Returns:
        dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays], weights [n_rays, n_samples].
    """
    dists = t[:, 1:] - t[:, :-1]
    dists = torch.cat([dists, torch.full_like(dists[:, :1], 1e10)], dim=-1)
    dists = dists * directions.norm(dim=-1, keepdim=True)
    alpha = 1.0 - torch.exp(-sigma * dists)
    # Exclusive cumulative product: transmittance before each sample.
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], dim=-1), dim=-1)
    weights = alpha * trans[:, :-1]
    acc = weights.sum(dim=-1)
    color = (weights[..., None] * rgb).sum(dim=-2)
    if white_bkgd:
        color = color + (1.0 - acc[..., None])
    return {"rgb": color, "depth": (weights * t).sum(dim=-1), "acc": acc, "weights": weights}


def _query(fn: RgbSigmaFn, rays: Rays, t: Tensor, white_bkgd: bool) -> dict[str, Tensor]:
    """Evaluate ``fn`` at ``origins + t * directions`` and composite."""
    points = rays.origins[:, None, :] + rays.directions[:, None, :] * t[..., None]  # [n, s, 3]
    viewdirs = rays.viewdirs[:, None, :].expand(points.shape)
    rgb, sigma = fn(points, viewdirs)
    return composite(rgb, sigma, t, rays.directions, white_bkgd)


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
        (n_rays * n_samples, plus n_rays * (n_samples + n_importance) for the fine pass).
    """
    perturb = bool(train and cfg.perturb)
    n_rays = rays.origins.shape[0]
    t = stratified_samples(rays.near, rays.far, cfg.n_samples, perturb, cfg.lindisp, generator)
    coarse = _query(coarse_fn, rays, t, cfg.white_bkgd)
    n_queries = n_rays * cfg.n_samples
    if cfg.n_importance <= 0:
        return {"rgb": coarse["rgb"], "depth": coarse["depth"], "acc": coarse["acc"], "n_queries": n_queries}

    mids = 0.5 * (t[:, 1:] + t[:, :-1])
    t_fine = sample_pdf(mids, coarse["weights"][:, 1:-1], cfg.n_importance, not perturb, generator)
    t_all, _ = torch.sort(torch.cat([t, t_fine.detach()], dim=-1), dim=-1)
    fine = _query(fine_fn if fine_fn is not None else coarse_fn, rays, t_all, cfg.white_bkgd)
    n_queries += n_rays * t_all.shape[-1]
    return {
        "rgb": fine["rgb"],
        "depth": fine["depth"],
        "acc": fine["acc"],
        "rgb_coarse": coarse["rgb"],
        "depth_coarse": coarse["depth"],
        "acc_coarse": coarse["acc"],
        "n_queries": n_queries,
    }


@torch.no_grad()
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
    shape = rays.origins.shape[:-1]
    flat = flatten_rays(rays)
    chunk = int(chunk or cfg.chunk)
    if chunk <= 0:
        raise ValueError(f"chunk must be positive, got {chunk}")
    parts: dict[str, list[Tensor]] = {}
    for start in range(0, flat.origins.shape[0], chunk):
        out = render_rays(index_rays(flat, slice(start, start + chunk)), coarse_fn, fine_fn, cfg, train=False)
        for key, value in out.items():
            if key != "n_queries":
                parts.setdefault(key, []).append(value.cpu())
    return {key: torch.cat(values).reshape(*shape, *values[0].shape[1:]) for key, values in parts.items()}
