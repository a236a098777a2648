"""The sampling interface (nerfacc's contract): an estimator gets rays and a density function
and returns intervals; colour is none of its business.

A renderer (``renderer.py``) is an estimator plus one shading step::

    samples = estimator.sample(rays, density_fn, train, generator)   # Samples: intervals only
    sigma, features = field.density(points)                          # the one query of the field
    rgb = field.color(features, viewdirs)                            # (where the weight counts)
    out = composite_samples(samples, rgb, sigma, rays, white_bkgd)

Estimators (each in its own module):

* ``HierarchicalEstimator`` (``hierarchical.py``): NeRF's stratified samples; with importance
  samples its coarse pass is an explicit proposal step (``propose``) the renderer runs; dense.
* ``TorchGridEstimator`` (``grid_estimator.py``): occupancy-grid marching in torch; packed.
* ``NerfaccEstimator`` (``nerfacc_backend.py``): the same through ``nerfacc.OccGridEstimator``.

The field reaches the renderer as a module with the methods of ``RadianceField``
(``enerf.fields.nerf.NeRFField``); an estimator sees only its density, as a ``DensityFn``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from torch import Tensor

from ..config import RenderConfig
from ..cameras.rays import Rays

__all__ = ["DensityFn", "RadianceField", "Samples", "Estimator", "midpoints"]

DensityFn = Callable[[Tensor], Tensor]  # points [n, 3] -> density [n] >= 0 (called without gradients)


class RadianceField(Protocol):
    """What a renderer asks of a field (``NeRFField`` has these methods)."""

    def density(self, x: Tensor, noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        """x: Tensor  # [..., 3] -> (sigma: Tensor  # [...] >= 0, features: Tensor  # [..., F]);
        ``noise_std``: noise on the pre-activation density (NeRF's ``raw_noise_std``)."""

    def mean_density(self, x: Tensor, noise_std: float = 0.0) -> Tensor:
        """x: Tensor  # [..., 3] -> Tensor  # [...]: the density ``density`` gives on average."""

    def color(self, features: Tensor, dirs: Tensor) -> Tensor:
        """features: Tensor  # [..., F], dirs: Tensor  # [..., 3] unit -> rgb: Tensor  # [..., 3] in [0, 1]."""


@dataclass
class Samples:
    """Where an estimator wants a batch of rays [n_rays] rendered: intervals, dense or packed.

    Dense (the hierarchical estimator; ``t`` set): the field is queried at ``t``.
        t: Tensor  # [n_rays, n_samples] sorted along each ray
    Packed (the grid estimators; ``ray_indices`` set): the field is queried at the midpoints.
        ray_indices: Tensor  # [n] int64, non-decreasing
        t_starts, t_ends: Tensor  # [n] sorted within each ray
    n_queries: points the estimator itself sent to its density function (a density pre-pass,
        front-to-back rounds), not counting the renderer's own query.
    """

    t: Tensor | None = None
    ray_indices: Tensor | None = None
    t_starts: Tensor | None = None
    t_ends: Tensor | None = None
    n_queries: int = 0

    @property
    def packed(self) -> bool:
        """True for the packed layout (ray_indices, t_starts, t_ends)."""
        return self.ray_indices is not None

    @property
    def count(self) -> int:
        """Number of samples (n, or n_rays * n_samples)."""
        return int(self.ray_indices.numel() if self.packed else self.t.numel())

    def points(self, rays: Rays) -> tuple[Tensor, Tensor]:
        """Where to query the field, and the view directions there.

        Returns:
            points, viewdirs: Tensor  # [n, 3] (packed: interval midpoints) or [n_rays, n_samples, 3]
        """
        if self.packed:
            return midpoints(rays, self.ray_indices, self.t_starts, self.t_ends), rays.viewdirs[self.ray_indices]
        points = rays.origins[:, None, :] + rays.directions[:, None, :] * self.t[..., None]
        return points, rays.viewdirs[:, None, :].expand(points.shape)


def midpoints(rays: Rays, ray_indices: Tensor, t_starts: Tensor, t_ends: Tensor) -> Tensor:
    """Tensor  # [n, 3] the midpoints of packed intervals of ``rays``."""
    return rays.origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * rays.directions[ray_indices]


class Estimator(Protocol):
    """What a renderer asks of an estimator.

    name: ``hierarchical``, ``torch_grid``, ``nerfacc`` or ``proposal``.
    cfg: the render settings it was built with.
    grid: its occupancy grid (None: it keeps no grid; a grid also means a varying number of
        samples per ray, so the training batch is sized by samples, not rays).
    density_field: the run's network whose density ``sample`` reads: None for the radiance
        field's own (``density_fn``), ``"proposal"`` for the proposal networks
        (``fields["proposal"]``).
    proposes: True when ``sample``'s intervals are a proposal: the renderer shades them with the
        coarse field, then asks ``propose`` for the intervals of the final pass (NeRF's coarse +
        fine); False when ``sample``'s intervals are the final ones.
    """

    name: str
    cfg: RenderConfig
    grid: object | None
    density_field: str | None
    proposes: bool

    def sample(self, rays: Rays, density_fn: DensityFn, train: bool,
               generator: torch.Generator | None = None) -> Samples:
        """Intervals of ``rays`` [n_rays] (jittered iff ``train and cfg.perturb``)."""

    def propose(self, rays: Rays, samples: Samples, weights: Tensor, train: bool,
                generator: torch.Generator | None = None) -> Samples:
        """The final intervals from a proposal pass's compositing ``weights`` (only if ``proposes``)."""

    def update(self, step: int, density_fn: DensityFn, generator: torch.Generator | None = None) -> None:
        """Training step ``step``: refresh the estimator's own state from the field's density."""

    def loss_terms(self, weights: Tensor) -> dict[str, Tensor]:
        """The estimator's own named losses for the training batch just rendered, given the final
        pass's compositing ``weights`` (the proposal estimator's proposal and distortion losses;
        {} for the others)."""

    def state_dict(self) -> dict | None:
        """The state to save in a checkpoint (None: nothing to save)."""

    def load_state_dict(self, state: dict | None) -> None:
        """Restore ``state_dict()``."""
