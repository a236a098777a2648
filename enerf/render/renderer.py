"""A renderer: one estimator (where to sample) plus the compositor (samples -> rgb, depth, acc).

``Renderer.render_rays`` asks its estimator for samples (``estimator.Samples``), queries the
field there unless the estimator already did (front-to-back early stop), and composites
(``compositing.composite_samples``). Build one with ``build.build_renderer``.

Every renderer takes the field as callables (``FieldFns``), renders training batches
(``render_rays``) and whole images (``render_image``), updates its estimator during training
(``update``; the grid estimators' occupancy grid) and saves / restores that state
(``state_dict`` / ``load_state_dict``; None for ``hierarchical``). Both grid estimators store
the same ``OccupancyGrid`` state, so a checkpoint trained with one renders with the other.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..config import RenderConfig
from ..data.rays import Rays, flatten_rays, index_rays
from .compositing import composite_samples, sample_weights
from .estimator import Estimator, FieldFns, Samples, TwoPassField

__all__ = ["Renderer", "query_colour_where_weighted"]

_COUNTS = ("n_samples", "n_queries", "n_colour_skipped")


def query_colour_where_weighted(samples: Samples, rays: Rays, field: TwoPassField,
                                threshold: float) -> tuple[Tensor, Tensor, int]:
    """The field at ``samples``, its colour computed only where the compositing weight exceeds
    ``threshold`` (TensoRF's appearance mask) and 0 elsewhere; each skipped sample changes a
    pixel by less than ``threshold``.

    Returns:
        rgb: Tensor  # [n_rays, n_samples, 3] (dense) or [n, 3] (packed)
        sigma: Tensor  # [n_rays, n_samples] or [n]
        n_colour_skipped: int, the samples whose colour was not computed
    """
    points, viewdirs = samples.points(rays)
    lead = points.shape[:-1]
    sigma, features = field.density_and_features(points.reshape(-1, 3))
    sigma = sigma.reshape(lead)
    with torch.no_grad():
        kept = (sample_weights(samples, sigma, rays) > threshold).reshape(-1).nonzero().squeeze(1)
    colour = field.color(features[kept], viewdirs.reshape(-1, 3)[kept])
    rgb = sigma.new_zeros(sigma.numel(), 3).index_put((kept,), colour)
    return rgb.reshape(*lead, 3), sigma, sigma.numel() - int(kept.numel())


class Renderer:
    """Samples from ``estimator``, composited.

    Args:
        cfg: render settings (``white_bkgd``, ``chunk``; the estimator reads the rest).
        estimator: hierarchical, torch_grid or nerfacc (``estimator.Estimator``).
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

    def update(self, step: int, fns: FieldFns, generator: torch.Generator | None = None) -> None:
        """Training step ``step``: let the estimator refresh its state (the grid's cadence is its own)."""
        self.estimator.update(step, fns, generator)

    def state_dict(self) -> dict | None:
        return self.estimator.state_dict()

    def load_state_dict(self, state: dict | None) -> None:
        self.estimator.load_state_dict(state)

    def render_rays(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> dict:
        """Render a batch of rays [n_rays].

        Returns:
            dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays]; the estimator's extras
            (hierarchical: rgb_coarse, depth_coarse, acc_coarse); n_samples (int, points
            rendered with gradients), n_queries (int, all points sent to the field,
            including a density pre-pass's) and n_colour_skipped (int, rendered points whose colour
            ``rgb_weight_threshold`` skipped).
        """
        samples = self.estimator.sample(rays, fns, train, generator)
        rgb, sigma, n_queries = samples.rgb, samples.sigma, samples.n_queries
        n_colour_skipped = 0
        if rgb is None:
            fine = samples.fine and fns.fine_rgb_sigma is not None
            two_pass = fns.fine_two_pass if fine else fns.two_pass
            threshold = self.cfg.rgb_weight_threshold
            if threshold > 0 and two_pass is not None:
                rgb, sigma, n_colour_skipped = query_colour_where_weighted(samples, rays, two_pass, threshold)
            else:
                rgb, sigma = (fns.fine_rgb_sigma if fine else fns.rgb_sigma)(*samples.points(rays))
            n_queries += samples.count
        out = composite_samples(samples, rgb, sigma, rays, self.cfg.white_bkgd)
        # Dense samples are all rendered with gradients (the coarse pass too); packed ones are
        # the kept samples, a pre-pass's or a front-to-back round's other queries are not.
        n_samples = samples.count if samples.packed else n_queries
        return {"rgb": out["rgb"], "depth": out["depth"], "acc": out["acc"], **samples.extras,
                "n_samples": int(n_samples), "n_queries": int(n_queries), "n_colour_skipped": n_colour_skipped}

    @torch.no_grad()
    def render_image(self, rays: Rays, fns: FieldFns, chunk: int | None = None) -> dict[str, Tensor]:
        """Render whole-image rays (leading shape [H, W]) ``chunk`` rays at a time, no jitter.

        Each chunk's results are moved to the CPU before the next one is rendered.

        Returns:
            dict of CPU tensors: rgb [H, W, 3], depth [H, W], acc [H, W] (and the estimator's
            extras, e.g. rgb_coarse [H, W, 3]).
        """
        shape = rays.origins.shape[:-1]
        flat = flatten_rays(rays)
        chunk = int(chunk or self.cfg.chunk)
        if chunk <= 0:
            raise ValueError(f"chunk must be positive, got {chunk}")
        parts: dict[str, list[Tensor]] = {}
        for start in range(0, flat.origins.shape[0], chunk):
            out = self.render_rays(index_rays(flat, slice(start, start + chunk)), fns, train=False)
            for key, value in out.items():
                if key not in _COUNTS:
                    parts.setdefault(key, []).append(value.cpu())
        return {key: torch.cat(values).reshape(*shape, *values[0].shape[1:]) for key, values in parts.items()}
