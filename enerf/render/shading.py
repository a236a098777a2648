"""Shading: query a field at an estimator's samples and composite (``shade``). The renderer's final pass and the hierarchical estimator's
coarse pass are both ``shade``."""

from __future__ import annotations

import torch
from torch import Tensor

from ..cameras.rays import Rays
from .compositing import composite_samples, sample_weights
from .estimator import RadianceField, Samples

__all__ = ["shade", "scale_gradients"]


def scale_gradients(value: Tensor, scale: Tensor) -> Tensor:
    """``value`` itself, whose gradient is multiplied by ``scale`` (broadcast over its last axes)."""
    while scale.dim() < value.dim():
        scale = scale[..., None]
    return value * scale + value.detach() * (1.0 - scale)


def shade(samples: Samples, rays: Rays, field: RadianceField, noise_std: float, white_bkgd: bool,
          rgb_weight_threshold: float = 0.0, gradient_scaling: float = 0.0) -> tuple[dict[str, Tensor], int]:
    """Query ``field`` at ``samples`` of ``rays`` [n_rays] and composite.

    Density (with noise ``noise_std``) and features at every sample; colour at every sample, or
    with ``rgb_weight_threshold`` > 0 only where the compositing weight exceeds it (0 elsewhere;
    each skipped sample changes a pixel by less than the threshold). ``gradient_scaling`` r > 0 (while
    training): the gradients of density and colour at a sample at distance d from the camera are
    multiplied by min(1, d / r)² (Philip and Deschaintre, "Floaters No More", 2023), so that space
    right in front of a camera, which few other rays cross, is not fitted to that camera's pixels
    faster than the rest; the values rendered are unchanged.

    Returns:
        out: rgb [n_rays, 3], depth [n_rays], acc [n_rays], weights ([n_rays, n_samples] or [n])
        n_colour_skipped: int, the samples whose colour was not computed
    """
    points, viewdirs = samples.points(rays)
    if rgb_weight_threshold <= 0:
        sigma, features = field.density(points, noise_std)
        rgb, skipped = field.color(features, viewdirs), 0
    else:
        lead = points.shape[:-1]
        sigma, features = field.density(points.reshape(-1, 3), noise_std)
        sigma = sigma.reshape(lead)
        with torch.no_grad():
            kept = (sample_weights(samples, sigma, rays) > rgb_weight_threshold).reshape(-1).nonzero().squeeze(1)
        colour = field.color(features[kept], viewdirs.reshape(-1, 3)[kept])
        rgb = sigma.new_zeros(sigma.numel(), 3).index_put((kept,), colour).reshape(*lead, 3)
        skipped = sigma.numel() - int(kept.numel())
    if gradient_scaling > 0:
        scale = (samples.distances(rays).reshape(sigma.shape) / gradient_scaling).clamp(max=1.0) ** 2
        sigma, rgb = scale_gradients(sigma, scale), scale_gradients(rgb, scale)
    return composite_samples(samples, rgb, sigma, rays, white_bkgd), skipped
