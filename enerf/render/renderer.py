"""A renderer: one estimator (where to sample) plus one shading step (query the field, composite).

``Renderer.render_rays`` reads top to bottom::

    samples = estimator.sample(rays, density_fn, train)     # intervals (density only)
    if estimator.proposes:                                  # NeRF's coarse pass, a proposal step
        coarse = shade(samples, coarse field)               #   (its rgb: the coarse loss)
        samples = estimator.propose(rays, samples, coarse weights)
    out = shade(samples, fine field or the field)           # the field's colour: here only

``shade`` is the one place the field's colour is queried: density and features at every sample,
colour where the compositing weight exceeds ``rgb_weight_threshold`` (TensoRF's appearance
mask; all samples when it is 0), then ``compositing.composite_samples``. Build a renderer with
``build.build_renderer``; it saves and restores its estimator's state (``state_dict``; the
occupancy grid of the grid estimators, None for ``hierarchical``).
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor

from ..config import RenderConfig
from ..cameras.rays import Rays, flatten_rays, index_rays
from .compositing import composite_samples, sample_weights
from .estimator import DensityFn, Estimator, RadianceField, Samples

__all__ = ["Renderer", "shade", "density_fn", "CPU_CHUNK"]

# Rays per pass when a CPU renders whole images, at most (a smaller ``chunk`` is kept): a proposal
# pass of 1,024 rays reads 131,072 points, whose intermediates stay small enough to be reused from
# the allocator instead of fresh memory; measured (studies/render_probe.py) 1.4 times as fast as
# 8,192 rays a pass, the same image to float rounding (rays do not depend on each other).
CPU_CHUNK = 1024

_COUNTS = ("n_samples", "n_queries", "n_colour_skipped", "loss_terms")
_COARSE = ("rgb", "depth", "acc")


def density_fn(field: RadianceField, noise_std: float = 0.0) -> DensityFn:
    """The density an estimator sees (no gradients): points [n, 3] -> the field's mean density [n]
    under noise ``noise_std`` (so a ReLU head gone negative does not empty a grid for good)."""

    @torch.no_grad()
    def sigma(points: Tensor) -> Tensor:
        return field.mean_density(points, noise_std)

    return sigma


def shade(samples: Samples, rays: Rays, field: RadianceField, noise_std: float, white_bkgd: bool,
          rgb_weight_threshold: float = 0.0) -> tuple[dict[str, Tensor], int]:
    """Query ``field`` at ``samples`` of ``rays`` [n_rays] and composite.

    Density (with noise ``noise_std``) and features at every sample; colour at every sample, or
    with ``rgb_weight_threshold`` > 0 only where the compositing weight exceeds it (0 elsewhere;
    each skipped sample changes a pixel by less than the threshold).

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
    return composite_samples(samples, rgb, sigma, rays, white_bkgd), skipped


class Renderer:
    """Samples from ``estimator``, shaded.

    Args:
        cfg: render settings (``white_bkgd``, ``chunk``, ``raw_noise_std``, ``rgb_weight_threshold``;
            the estimator reads the rest).
        estimator: hierarchical, torch_grid, nerfacc or proposal (``estimator.Estimator``).
    """

    def __init__(self, cfg: RenderConfig, estimator: Estimator) -> None:
        self.cfg = cfg
        self.estimator = estimator

    @property
    def name(self) -> str:
        """``hierarchical``, ``torch_grid`` or ``nerfacc``: the estimator's name."""
        return self.estimator.name

    @property
    def grid(self):
        """The estimator's ``OccupancyGrid`` (None for ``hierarchical``)."""
        return self.estimator.grid

    @property
    def update_queries(self) -> int:
        """Points the estimator's grid updates have sent to the field so far (0: no grid)."""
        return int(getattr(self.estimator, "update_queries", 0))

    def noise_std(self, train: bool) -> float:
        """Noise on the pre-activation density: ``raw_noise_std`` while training, else 0."""
        return self.cfg.raw_noise_std if train else 0.0

    def update(self, step: int, fields: Mapping[str, RadianceField], generator: torch.Generator | None = None) -> None:
        """Training step ``step``: let the estimator refresh its state from the coarse field's
        density (the grid's cadence is its own)."""
        self.estimator.update(step, density_fn(fields["coarse"], self.noise_std(True)), generator)

    def state_dict(self) -> dict | None:
        return self.estimator.state_dict()

    def load_state_dict(self, state: dict | None) -> None:
        self.estimator.load_state_dict(state)

    def render_rays(self, rays: Rays, fields: Mapping[str, RadianceField], train: bool,
                    generator: torch.Generator | None = None) -> dict:
        """Render a batch of rays [n_rays] with ``fields`` (``coarse``, and ``fine`` for the
        hierarchical estimator's final pass when there is one).

        Returns:
            dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays]; after a proposal pass also
            rgb_coarse, depth_coarse, acc_coarse; while training, loss_terms
            (the estimator's own named scalar losses: the proposal estimator's, else {}); n_samples (int, points rendered with
            gradients), n_queries (int, all points sent to the field, the estimator's density
            queries included) and n_colour_skipped (int, rendered points whose colour
            ``rgb_weight_threshold`` skipped).
        """
        cfg, noise = self.cfg, self.noise_std(train)
        field = fields["coarse"]
        named = self.estimator.density_field  # the proposal networks, for the proposal estimator
        density = fields[named] if named is not None else density_fn(field, noise)
        samples = self.estimator.sample(rays, density, train, generator)
        n_queries, n_samples, skipped, extras = samples.n_queries, 0, 0, {}
        if self.estimator.proposes:
            coarse, skipped = shade(samples, rays, field, noise, cfg.white_bkgd, cfg.rgb_weight_threshold)
            extras = {f"{key}_coarse": coarse[key] for key in _COARSE}
            n_samples += samples.count
            samples = self.estimator.propose(rays, samples, coarse["weights"], train, generator)
            field = fields.get("fine", field)
        out, skipped_here = shade(samples, rays, field, noise, cfg.white_bkgd, cfg.rgb_weight_threshold)
        n_samples += samples.count
        if train:
            extras["loss_terms"] = self.estimator.loss_terms(out["weights"])
        return {**{key: out[key] for key in _COARSE}, "depth_median": out["depth_median"], **extras, "n_samples": n_samples,
                "n_queries": n_queries + n_samples, "n_colour_skipped": skipped + skipped_here}

    @torch.no_grad()
    def render_image(self, rays: Rays, fields: Mapping[str, RadianceField], chunk: int | None = None,
                     progress=None) -> dict[str, Tensor]:
        """Render whole-image rays (leading shape [H, W]) ``chunk`` rays at a time (on a CPU at
        most ``CPU_CHUNK``), no jitter.

        Each chunk's results are moved to the CPU before the next one is rendered; ``progress``
        (optional): called with the number of rays of each chunk done (e.g. ``tqdm.update``).

        Returns:
            dict of CPU tensors: rgb [H, W, 3], depth [H, W], acc [H, W] (and the coarse pass's
            rgb_coarse [H, W, 3], ... after a proposal pass).
        """
        shape = rays.origins.shape[:-1]
        flat = flatten_rays(rays)
        chunk = int(chunk or self.cfg.chunk)
        if chunk <= 0:
            raise ValueError(f"chunk must be positive, got {chunk}")
        if flat.origins.device.type == "cpu":
            chunk = min(chunk, CPU_CHUNK)
        parts: dict[str, list[Tensor]] = {}
        for start in range(0, flat.origins.shape[0], chunk):
            out = self.render_rays(index_rays(flat, slice(start, start + chunk)), fields, train=False)
            for key, value in out.items():
                if key not in _COUNTS:
                    parts.setdefault(key, []).append(value.cpu())
            if progress is not None:
                progress(min(chunk, flat.origins.shape[0] - start))
        return {key: torch.cat(values).reshape(*shape, *values[0].shape[1:]) for key, values in parts.items()}
