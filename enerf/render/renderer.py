"""A renderer: one estimator (where to sample) plus one shading step (query the field, composite).

``Renderer.render_rays`` reads top to bottom::

    samples = estimator.sample(rays, fields, train)         # intervals (the estimator's passes)
    out = shade(samples, fields[samples.field])             # the final pass: the field's colour
    losses = samples.losses(out["weights"])                 # while training: the estimator's own

``shade`` (``shading.py``) is where a field's colour is queried: density and features at every
sample, colour where the compositing weight exceeds ``rgb_weight_threshold`` (TensoRF's
appearance mask; all samples when it is 0), then ``compositing.composite_samples``. Build a
renderer with ``build.build_renderer``; it saves and restores its estimator's state
(``state_dict``; the occupancy grid of the grid estimators, None for the others).
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor

from ..config import RenderConfig
from ..cameras.rays import Rays, flatten_rays, index_rays
from .estimator import Estimator, RadianceField, density_fn
from .shading import shade

__all__ = ["Renderer", "shade", "density_fn", "CPU_CHUNK"]  # shade, density_fn: from shading / estimator

# Rays per pass when a CPU renders whole images, at most (a smaller ``chunk`` is kept): a proposal
# pass of 1,024 rays reads 131,072 points, whose intermediates stay small enough to be reused from
# the allocator instead of fresh memory; measured (studies/render_probe.py) 1.4 times as fast as
# 8,192 rays a pass, the same image to float rounding (rays do not depend on each other).
CPU_CHUNK = 1024

_COUNTS = ("n_samples", "n_queries", "n_colour_skipped", "loss_terms")
_OUTPUTS = ("rgb", "depth", "acc")  # of the final pass


class Renderer:
    """Samples from ``estimator``, shaded.

    Args:
        cfg: render settings (``white_bkgd``, ``chunk``, ``raw_noise_std``, ``rgb_weight_threshold``;
            the estimator reads the rest).
        estimator: one of ``registry.ESTIMATORS`` (``estimator.Estimator``).
    """

    def __init__(self, cfg: RenderConfig, estimator: Estimator) -> None:
        self.cfg = cfg
        self.estimator = estimator

    @property
    def name(self) -> str:
        """The estimator's name (``hierarchical``, ``torch_grid``, ...; ``auto`` resolved)."""
        return self.estimator.name

    def noise_std(self, train: bool) -> float:
        """Noise on the pre-activation density: ``raw_noise_std`` while training, else 0."""
        return self.cfg.raw_noise_std if train else 0.0

    def update(self, step: int, fields: Mapping[str, RadianceField], generator: torch.Generator | None = None) -> None:
        """Training step ``step``: the estimator refreshes its own state (its cadence is its own)."""
        self.estimator.update(step, fields, generator)

    def draft(self, fraction: float) -> "Renderer":
        """A cheaper renderer with ``fraction`` (in (0, 1)) of the samples per ray, sharing this
        one's estimator state (``Estimator.draft``)."""
        estimator = self.estimator.draft(fraction)
        return Renderer(estimator.cfg, estimator)

    def state_dict(self) -> dict | None:
        return self.estimator.state_dict()

    def load_state_dict(self, state: dict | None) -> None:
        self.estimator.load_state_dict(state)

    def render_rays(self, rays: Rays, fields: Mapping[str, RadianceField], train: bool,
                    generator: torch.Generator | None = None) -> dict:
        """Render a batch of rays [n_rays] with ``fields`` (``coarse``; ``fine`` for the
        hierarchical estimator's final pass when there is one; the estimator's own networks).

        Returns:
            dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays]; what the estimator shaded
            itself (the hierarchical coarse pass: rgb_coarse, depth_coarse, acc_coarse); while
            training, loss_terms (the estimator's own named scalar losses: the proposal
            estimator's, else {}); n_samples (int, points rendered with gradients), n_queries
            (int, all points sent to the field, the estimator's density queries included) and
            n_colour_skipped (int, rendered points whose colour ``rgb_weight_threshold`` skipped).
        """
        cfg = self.cfg
        samples = self.estimator.sample(rays, fields, train, generator)
        shaded = samples.shaded
        out, skipped = shade(samples, rays, fields[samples.field], self.noise_std(train), cfg.white_bkgd,
                             cfg.rgb_weight_threshold, cfg.gradient_scaling if train else 0.0)
        n_samples = shaded.get("n_samples", 0) + samples.count
        extras = {key: value for key, value in shaded.items() if key not in _COUNTS}
        if train:
            extras["loss_terms"] = samples.losses(out["weights"]) if samples.losses is not None else {}
        return {**{key: out[key] for key in _OUTPUTS}, "depth_median": out["depth_median"], **extras, "n_samples": n_samples,
                "n_queries": samples.n_queries + n_samples,
                "n_colour_skipped": shaded.get("n_colour_skipped", 0) + skipped}

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
