"""Where to sample along rays: NeRF's stratified samples and inverse-CDF importance samples.

Both follow nerf-pytorch (``render_rays`` and ``sample_pdf``) value for value; random
numbers come from ``generator`` (drawn on the generator's device, then moved to the rays'
device, so a CPU generator can drive rendering on a GPU reproducibly).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["stratified_samples", "sample_pdf", "uniform"]


def uniform(shape: tuple[int, ...], like: Tensor, generator: torch.Generator | None) -> Tensor:
    """U[0, 1) samples of ``shape`` with the dtype and device of ``like``."""
    device = generator.device if generator is not None else like.device
    u = torch.rand(shape, generator=generator, device=device, dtype=like.dtype)
    return u.to(like.device)


def stratified_samples(
    near: Tensor,
    far: Tensor,
    n_samples: int,
    perturb: bool,
    lindisp: bool,
    generator: torch.Generator | None = None,
    lindisp_from: float = 0.0,
) -> Tensor:
    """Sample distances along each ray, evenly spaced in depth (or disparity) between near and far.

    Args:
        near: Tensor  # [n_rays, 1]
        far: Tensor  # [n_rays, 1]
        n_samples: samples per ray.
        perturb: jitter each sample uniformly within its stratum (the interval between the
            midpoints around it; the first and last strata are clipped at near and far).
        lindisp: space samples linearly in inverse depth instead of depth.
        lindisp_from: c > 0: nerfacto's piecewise spacing (``UniformLinDispPiecewiseSampler``,
            c = 1 there), evenly spaced in ``s = g(t)``, ``g(t) = t / (2c)`` for t < c and
            ``1 - c / (2t)`` beyond: as many samples before c (evenly in depth) as between c and
            infinity (evenly in disparity); overrides ``lindisp``.

    Returns:
        t: Tensor  # [n_rays, n_samples] sorted along each ray.
    """
    steps = torch.linspace(0.0, 1.0, n_samples, dtype=near.dtype, device=near.device)
    if lindisp_from > 0:
        c = float(lindisp_from)
        g_near, g_far = (torch.where(x < c, x / (2 * c), 1.0 - c / (2 * x)) for x in (near, far))
        u = g_near * (1.0 - steps) + g_far * steps
        t = torch.where(u < 0.5, 2 * c * u, c / (2 * (1.0 - u).clamp(min=1e-12)))
    elif lindisp:
        t = 1.0 / (1.0 / near * (1.0 - steps) + 1.0 / far * steps)
    else:
        t = near * (1.0 - steps) + far * steps
    t = t.expand(near.shape[0], n_samples)
    if perturb:
        mids = 0.5 * (t[:, 1:] + t[:, :-1])
        upper = torch.cat([mids, t[:, -1:]], dim=-1)
        lower = torch.cat([t[:, :1], mids], dim=-1)
        t = lower + (upper - lower) * uniform(t.shape, t, generator)
    return t


def sample_pdf(
    bins: Tensor,
    weights: Tensor,
    n_samples: int,
    deterministic: bool,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw samples from the piecewise-constant pdf given by ``weights`` over ``bins`` (inverse CDF).

    As nerf-pytorch: ``1e-5`` is added to every weight (so empty rays still sample
    uniformly), ``deterministic`` uses ``u = linspace(0, 1, n_samples)`` instead of
    ``u ~ U[0, 1)``, and bins whose cdf step is below ``1e-5`` are not interpolated into.

    Args:
        bins: Tensor  # [n_rays, n_bins + 1] bin edges, sorted.
        weights: Tensor  # [n_rays, n_bins] non-negative.
        n_samples: samples per ray.

    Returns:
        t: Tensor  # [n_rays, n_samples] (sorted when deterministic).
    """
    weights = weights + 1e-5
    pdf = weights / weights.sum(dim=-1, keepdim=True)
    cdf = torch.cumsum(pdf, dim=-1)
    cdf = torch.cat([torch.zeros_like(cdf[:, :1]), cdf], dim=-1)  # [n_rays, n_bins + 1]
    shape = (cdf.shape[0], n_samples)
    if deterministic:
        u = torch.linspace(0.0, 1.0, n_samples, dtype=cdf.dtype, device=cdf.device).expand(shape)
    else:
        u = uniform(shape, cdf, generator)
    u = u.contiguous()

    inds = torch.searchsorted(cdf.contiguous(), u, right=True)
    below = (inds - 1).clamp(min=0)
    above = inds.clamp(max=cdf.shape[-1] - 1)
    cdf_below, cdf_above = cdf.gather(-1, below), cdf.gather(-1, above)
    bins_below, bins_above = bins.gather(-1, below), bins.gather(-1, above)

    denom = cdf_above - cdf_below
    denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
    frac = (u - cdf_below) / denom
    return bins_below + frac * (bins_above - bins_below)
