"""NeRF's hierarchical (coarse + fine) sampling, as an estimator of dense samples.

``sample`` returns the stratified samples. With importance samples (``n_importance > 0``) they
are a proposal: ``sample`` shades them with the coarse field itself (the coarse loss reads that
pass: ``rgb_coarse``), turns the pass's compositing weights into the fine samples, and returns
the sorted union of both sets, for the fine field (``fields["fine"]``, built by ``networks``).

Semantics follow nerf-pytorch's ``render_rays`` / ``raw2outputs``: the last sample's interval is
1e10, intervals are scaled by ``|directions|``, and ``depth`` is the expected ray parameter ``t``
(camera z-depth for ``pixel_rays`` rays, whose camera z component is -1; NDC ``t`` in [0, 1]
for NDC rays). The compositing is ``compositing.composite``.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import torch
from torch import Tensor, nn

from ..config import FieldConfig, RenderConfig
from ..cameras.rays import Rays
from .estimator import Estimator, RadianceField, Samples, draft_count
from .sampling import sample_pdf, stratified_samples
from .shading import shade

__all__ = ["HierarchicalEstimator"]

_COARSE = ("rgb", "depth", "acc")


class HierarchicalEstimator(Estimator):
    """Stratified samples, then (``cfg.n_importance > 0``) importance samples from a coarse pass.

    No state; the coarse pass reads ``fields["coarse"]``, the fine samples are shaded with
    ``fields["fine"]``.
    """

    name = "hierarchical"
    fine_network = True  # --N_importance > 0: the fine field

    @staticmethod
    def networks(cfg: RenderConfig, field: FieldConfig, device: torch.device) -> dict[str, nn.Module]:
        """The fine field (the coarse one's shape) when ``cfg.n_importance > 0``."""
        from ..fields.nerf import NeRFField

        return {"fine": NeRFField(field).to(device)} if cfg.n_importance > 0 else {}

    def sample(self, rays: Rays, fields: Mapping[str, RadianceField], train: bool,
               generator: torch.Generator | None = None) -> Samples:
        """Samples of ``rays`` [n_rays]: the stratified ones, t [n_rays, n_samples], jittered iff
        ``train and cfg.perturb`` (random numbers from ``generator``, default torch's global one);
        with ``n_importance``, merged with the fine ones (``propose``) after the coarse pass."""
        cfg = self.cfg
        samples = Samples(t=stratified_samples(rays.near, rays.far, cfg.n_samples, bool(train and cfg.perturb),
                                               cfg.lindisp, generator, cfg.lindisp_from))
        if cfg.n_importance <= 0:
            return samples
        noise = cfg.raw_noise_std if train else 0.0
        coarse, skipped = shade(samples, rays, fields["coarse"], noise, cfg.white_bkgd, cfg.rgb_weight_threshold,
                                cfg.gradient_scaling if train else 0.0)
        fine = self.propose(rays, samples, coarse["weights"], train, generator)
        fine.field = "fine" if "fine" in fields else "coarse"
        fine.shaded = {**{f"{key}_coarse": coarse[key] for key in _COARSE}, "n_samples": samples.count,
                       "n_colour_skipped": skipped}
        return fine

    def propose(self, rays: Rays, samples: Samples, weights: Tensor, train: bool,
                generator: torch.Generator | None = None) -> Samples:
        """The fine samples: ``cfg.n_importance`` drawn from the coarse pass's ``weights``
        [n_rays, n_samples] (random iff ``train and cfg.perturb``), merged with ``samples``:
        t [n_rays, n_samples + n_importance]."""
        t = samples.t
        mids = 0.5 * (t[:, 1:] + t[:, :-1])
        t_fine = sample_pdf(mids, weights[:, 1:-1], self.cfg.n_importance, not (train and self.cfg.perturb), generator)
        t_all, _ = torch.sort(torch.cat([t, t_fine.detach()], dim=-1), dim=-1)
        return Samples(t=t_all)

    @classmethod
    def draft_config(cls, cfg: RenderConfig, fraction: float) -> RenderConfig:
        """Fewer stratified and importance samples (the same sampling)."""
        cfg = super().draft_config(cfg, fraction)
        return dataclasses.replace(cfg, n_samples=draft_count(cfg.n_samples, fraction),
                                   n_importance=draft_count(cfg.n_importance, fraction) if cfg.n_importance else 0)
