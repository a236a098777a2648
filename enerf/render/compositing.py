"""The compositor: volume rendering of samples along rays -> rgb, depth, acc (nerfacc ``rendering``).

Samples come in two layouts (``estimator.Samples``), each composited the way its algorithm
defines:

* dense, ``t`` [n_rays, n_samples] (the hierarchical sampler): ``composite``, nerf-pytorch's
  ``raw2outputs`` (the last interval is 1e10, depth is ``sum_i w_i t_i``);
* packed, ``ray_indices``, ``t_starts``, ``t_ends`` [n] sorted by ray (the grid estimators):
  ``composite_packed``, nerfacc's ``rendering`` in torch: per-ray transmittance is an exclusive
  segment sum of ``sigma * delta`` (``torch.cumsum`` minus each ray's offset, found with
  ``torch.bincount``), colour, opacity and depth are segment sums (``index_add_``), depth at
  the interval midpoints. Packed samples in rows (``Samples.per_ray`` k > 0: ray r owns samples
  r k .. r k + k - 1, the proposal sampler's) give the same sums as rows of [n_rays, k]
  (``composite_rows``: cumulative sums along each row, no gathers or scatters).

Both scale intervals by ``|directions|`` (so NDC rays give the same alpha in both) and, with
``white_bkgd``, add ``1 - acc``. ``composite_samples`` picks the one a ``Samples`` needs.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cameras.rays import Rays
from .estimator import Samples

__all__ = [
    "composite",
    "composite_packed",
    "composite_rows",
    "composite_samples",
    "dense_weights",
    "sample_weights",
    "segment_starts",
    "exclusive_segment_sum",
    "packed_transmittance",
]


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
        dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays], weights [n_rays, n_samples], depth_median
        [n_rays] (the first sample where the cumulative weight reaches half of acc: a ray's surface that
        fog in front of it or weight left at the far end does not pull away, as it pulls the mean).
    """
    weights = dense_weights(sigma, t, directions)
    acc = weights.sum(dim=-1)
    color = (weights[..., None] * rgb).sum(dim=-2)
    if white_bkgd:
        color = color + (1.0 - acc[..., None])
    below = (torch.cumsum(weights, -1) < 0.5 * acc[:, None]).sum(-1).clamp_max(t.shape[-1] - 1)
    median = t.gather(-1, below[:, None])[:, 0]
    return {"rgb": color, "depth": (weights * t).sum(dim=-1), "acc": acc, "weights": weights, "depth_median": median}


def dense_weights(sigma: Tensor, t: Tensor, directions: Tensor) -> Tensor:
    """Compositing weights ``T_i alpha_i`` of dense samples (``composite``'s).

    Args:
        sigma: Tensor  # [n_rays, n_samples] density, >= 0
        t: Tensor  # [n_rays, n_samples] sorted sample positions
        directions: Tensor  # [n_rays, 3]

    Returns:
        Tensor  # [n_rays, n_samples]
    """
    dists = t[:, 1:] - t[:, :-1]
    dists = torch.cat([dists, torch.full_like(dists[:, :1], 1e10)], dim=-1)
    dists = dists * directions.norm(dim=-1, keepdim=True)
    alpha = 1.0 - torch.exp(-sigma * dists)
    # Exclusive cumulative product: transmittance before each sample.
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], dim=-1), dim=-1)
    return alpha * trans[:, :-1]


def sample_weights(samples: Samples, sigma: Tensor, rays: Rays) -> Tensor:
    """Compositing weights of ``samples`` of ``rays`` with density ``sigma``, as
    ``composite_samples`` would weigh them: Tensor  # [n_rays, n_samples] (dense) or [n] (packed)."""
    if samples.per_ray:
        trans, alphas = row_transmittance(samples.t_starts, samples.t_ends, sigma, samples.per_ray,
                                          rays.directions.norm(dim=-1))
        return trans * alphas
    if samples.packed:
        trans, alphas = packed_transmittance(samples.t_starts, samples.t_ends, sigma, samples.ray_indices,
                                             rays.origins.shape[0], rays.directions.norm(dim=-1))
        return trans * alphas
    return dense_weights(sigma, samples.t, rays.directions)


def segment_starts(ray_indices: Tensor, n_rays: int) -> tuple[Tensor, Tensor]:
    """Where each ray's samples begin in a packed list sorted by ray.

    Returns:
        starts: Tensor  # [n_rays] index of each ray's first sample (its count is 0 if none)
        counts: Tensor  # [n_rays] samples per ray
    """
    counts = torch.bincount(ray_indices, minlength=n_rays)
    return torch.cumsum(counts, 0) - counts, counts


def exclusive_segment_sum(values: Tensor, ray_indices: Tensor, n_rays: int) -> Tensor:
    """Per-ray exclusive prefix sums of packed values: ``out[i] = sum of values[j]``, j < i, same ray.

    One global ``cumsum`` (in float64, so earlier rays' totals do not eat the precision)
    minus the running total at each ray's first sample. Differentiable in ``values``.

    Args:
        values: Tensor  # [n_samples]
        ray_indices: Tensor  # [n_samples] int64, non-decreasing

    Returns:
        Tensor  # [n_samples], dtype of ``values``
    """
    if values.numel() == 0:
        return values.clone()
    wide = values.double()
    before = torch.cumsum(wide, 0) - wide  # sum over all earlier samples
    starts, _ = segment_starts(ray_indices, n_rays)
    return (before - before[starts[ray_indices]]).to(values.dtype)


def packed_transmittance(
    t_starts: Tensor, t_ends: Tensor, sigma: Tensor, ray_indices: Tensor, n_rays: int, dir_norm: Tensor
) -> tuple[Tensor, Tensor]:
    """Transmittance before each sample and each sample's opacity.

    ``T_i = exp(-sum_{j<i} sigma_j delta_j)``, ``alpha_i = 1 - exp(-sigma_i delta_i)`` with
    ``delta_i = (t_end - t_start) * |direction|``.

    Args:
        t_starts, t_ends, sigma: Tensor  # [n_samples]
        ray_indices: Tensor  # [n_samples]
        dir_norm: Tensor  # [n_rays] |directions|

    Returns:
        trans: Tensor  # [n_samples]
        alphas: Tensor  # [n_samples]
    """
    sigma_delta = sigma * (t_ends - t_starts) * dir_norm[ray_indices]
    trans = torch.exp(-exclusive_segment_sum(sigma_delta, ray_indices, n_rays))
    return trans, 1.0 - torch.exp(-sigma_delta)


def composite_packed(
    rgb: Tensor,
    sigma: Tensor,
    t_starts: Tensor,
    t_ends: Tensor,
    ray_indices: Tensor,
    n_rays: int,
    dir_norm: Tensor,
    white_bkgd: bool = False,
) -> dict[str, Tensor]:
    """Alpha-composite packed samples (nerfacc ``rendering`` with ``rgb_sigma_fn`` results).

    Args:
        rgb: Tensor  # [n_samples, 3]
        sigma: Tensor  # [n_samples] density >= 0
        t_starts, t_ends: Tensor  # [n_samples]
        ray_indices: Tensor  # [n_samples] int64, non-decreasing
        dir_norm: Tensor  # [n_rays] |directions|

    Returns:
        dict with rgb [n_rays, 3], depth [n_rays] (sum of w_i * t_mid_i), acc [n_rays], depth_median
        [n_rays] (``composite``'s; 0 for a ray without samples), and per sample weights, trans, alphas [n_samples].
    """
    trans, alphas = packed_transmittance(t_starts, t_ends, sigma, ray_indices, n_rays, dir_norm)
    weights = trans * alphas
    t_mid = 0.5 * (t_starts + t_ends)
    color = rgb.new_zeros(n_rays, 3).index_add_(0, ray_indices, weights[:, None] * rgb)
    acc = weights.new_zeros(n_rays).index_add_(0, ray_indices, weights)
    depth = weights.new_zeros(n_rays).index_add_(0, ray_indices, weights * t_mid)
    if white_bkgd:
        color = color + (1.0 - acc[:, None])
    before = exclusive_segment_sum(weights, ray_indices, n_rays)  # weight of the ray's earlier samples
    half = 0.5 * acc[ray_indices]
    crossing = (before < half) & (before + weights >= half)
    median = weights.new_zeros(n_rays).index_put_((ray_indices[crossing],), t_mid[crossing])
    return {"rgb": color, "depth": depth, "acc": acc, "weights": weights, "trans": trans, "alphas": alphas,
            "depth_median": median}


def row_transmittance(t_starts: Tensor, t_ends: Tensor, sigma: Tensor, per_ray: int, dir_norm: Tensor
                      ) -> tuple[Tensor, Tensor]:
    """``packed_transmittance`` of packed samples in rows of ``per_ray`` (``Samples.per_ray``).

    Args:
        t_starts, t_ends, sigma: Tensor  # [n_rays * per_ray]
        dir_norm: Tensor  # [n_rays]

    Returns:
        trans, alphas: Tensor  # [n_rays * per_ray]
    """
    sigma_delta = (sigma * (t_ends - t_starts)).view(-1, per_ray) * dir_norm[:, None]
    before = torch.cumsum(sigma_delta, dim=1) - sigma_delta
    return torch.exp(-before).view(-1), (1.0 - torch.exp(-sigma_delta)).view(-1)


def composite_rows(rgb: Tensor, sigma: Tensor, t_starts: Tensor, t_ends: Tensor, per_ray: int, dir_norm: Tensor,
                   white_bkgd: bool = False) -> dict[str, Tensor]:
    """``composite_packed`` of packed samples in rows of ``per_ray`` (``Samples.per_ray``): the same
    sums, along rows of [n_rays, per_ray] (to float rounding).

    Args:
        rgb: Tensor  # [n_rays * per_ray, 3]
        sigma, t_starts, t_ends: Tensor  # [n_rays * per_ray]
        dir_norm: Tensor  # [n_rays]

    Returns:
        dict as ``composite_packed``'s.
    """
    trans, alphas = row_transmittance(t_starts, t_ends, sigma, per_ray, dir_norm)
    weights = trans * alphas
    rows = weights.view(-1, per_ray)
    t_mid = (0.5 * (t_starts + t_ends)).view(-1, per_ray)
    color = (rows[..., None] * rgb.view(-1, per_ray, 3)).sum(dim=1)
    acc = rows.sum(dim=1)
    if white_bkgd:
        color = color + (1.0 - acc[:, None])
    before = torch.cumsum(rows, dim=1) - rows
    half = 0.5 * acc[:, None]
    crossing = (before < half) & (before + rows >= half)
    first = crossing.to(torch.uint8).argmax(dim=1, keepdim=True)
    median = torch.where(crossing.any(dim=1), t_mid.gather(1, first)[:, 0], torch.zeros_like(acc))
    return {"rgb": color, "depth": (rows * t_mid).sum(dim=1), "acc": acc, "weights": weights, "trans": trans,
            "alphas": alphas, "depth_median": median}


def composite_samples(samples: Samples, rgb: Tensor, sigma: Tensor, rays: Rays, white_bkgd: bool = False) -> dict[str, Tensor]:
    """Composite the field's values at ``samples`` of ``rays`` [n_rays] (dense or packed).

    Args:
        rgb: Tensor  # [n_rays, n_samples, 3] (dense) or [n, 3] (packed)
        sigma: Tensor  # [n_rays, n_samples] or [n], density >= 0

    Returns:
        dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays] and per-sample weights.
    """
    if samples.per_ray:
        return composite_rows(rgb, sigma, samples.t_starts, samples.t_ends, samples.per_ray,
                              rays.directions.norm(dim=-1), white_bkgd)
    if samples.packed:
        dir_norm = rays.directions.norm(dim=-1)
        return composite_packed(rgb, sigma, samples.t_starts, samples.t_ends, samples.ray_indices,
                                rays.origins.shape[0], dir_norm, white_bkgd)
    return composite(rgb, sigma, samples.t, rays.directions, white_bkgd)
