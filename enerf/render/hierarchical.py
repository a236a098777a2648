"""NeRF's hierarchical (coarse + fine) sampling, as an estimator of dense samples.

``sample`` returns the stratified samples. With importance samples (``n_importance > 0``) they
are a proposal: the renderer shades them with the coarse field (the coarse loss reads that
pass), and ``propose`` turns the pass's compositing weights into the fine samples, the sorted
union of both sets, for the fine field.

Semantics follow nerf-pytorch's ``render_rays`` / ``raw2outputs``: the last sample's interval is
1e10, intervals are scaled by ``|directions|``, and ``depth`` is the expected ray parameter ``t``
(camera z-depth for ``pixel_rays`` rays, whose camera z component is -1; NDC ``t`` in [0, 1]
for NDC rays). The compositing is ``compositing.composite``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..config import RenderConfig
from ..cameras.rays import Rays
from .estimator import DensityFn, Samples
from .sampling import sample_pdf, stratified_samples

__all__ = ["HierarchicalEstimator"]


class HierarchicalEstimator:
    """Stratified samples, then (``cfg.n_importance > 0``) importance samples from a coarse pass.

    No state; the density function is not used (the samples depend on the coarse pass's weights).
    """

    name = "hierarchical"
    grid = None
    density_field = None

    def __init__(self, cfg: RenderConfig) -> None:
        self.cfg = cfg
        self.proposes = cfg.n_importance > 0

    def sample(self, rays: Rays, density_fn: DensityFn, train: bool,
               generator: torch.Generator | None = None) -> Samples:
        """Stratified samples of ``rays`` [n_rays]: t [n_rays, n_samples], jittered iff
        ``train and cfg.perturb`` (random numbers from ``generator``, default torch's global one)."""
        cfg = self.cfg
        return Samples(t=stratified_samples(rays.near, rays.far, cfg.n_samples, bool(train and cfg.perturb),
                                            cfg.lindisp, generator, cfg.lindisp_from))

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

    def update(self, step: int, density_fn: DensityFn, generator: torch.Generator | None = None) -> None:
        return None

    def loss_terms(self, weights: Tensor) -> dict[str, Tensor]:
        return {}

    def state_dict(self) -> dict | None:
        return None

    def load_state_dict(self, state: dict | None) -> None:
        return None
