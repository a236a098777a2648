"""The sampling interface: an estimator decides where along the rays the field is rendered.

As nerfacc splits ``sampling`` (estimators) from ``rendering`` (the compositor), a renderer
here is an estimator plus the compositor (``compositing.py``), glued by ``Renderer``::

    samples = estimator.sample(rays, fns, train, generator)      # Samples
    rgb, sigma = field at samples (unless the estimator queried them already)
    out = composite_samples(samples, rgb, sigma, rays, white_bkgd)

Estimators (each in its own module):

* ``HierarchicalEstimator`` (``hierarchical.py``): NeRF's stratified + importance samples; dense.
* ``TorchGridEstimator`` (``grid_estimator.py``): occupancy-grid marching in torch; packed.
* ``NerfaccEstimator`` (``nerfacc_backend.py``): the same through ``nerfacc.OccGridEstimator``.

The field reaches them as callables (``FieldFns``), never as a network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import torch
from torch import Tensor

from ..config import RenderConfig
from ..data.rays import Rays

__all__ = ["RgbSigmaFn", "SigmaFn", "DensityFeaturesFn", "ColorFn", "TwoPassField", "FieldFns", "Samples", "Estimator",
           "midpoints"]

RgbSigmaFn = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]  # points [..., 3], viewdirs [..., 3] -> rgb [..., 3], sigma [...]
SigmaFn = Callable[[Tensor], Tensor]  # points [n, 3] -> density [n]
DensityFeaturesFn = Callable[[Tensor], tuple[Tensor, Tensor]]  # points [n, 3] -> density [n], features [n, F]
ColorFn = Callable[[Tensor, Tensor], Tensor]  # features [n, F], viewdirs [n, 3] -> rgb [n, 3]


@dataclass(frozen=True)
class TwoPassField:
    """The same field as an ``RgbSigmaFn``, in two passes: density (and the features colour is
    read from) at every point, then colour where the renderer asks for it (the points whose
    compositing weight counts; ``RenderConfig.rgb_weight_threshold``)."""

    density_and_features: DensityFeaturesFn
    color: ColorFn


@dataclass(frozen=True)
class FieldFns:
    """The field, as the callables a renderer needs.

    rgb_sigma: points [..., 3], viewdirs [..., 3] -> (rgb [..., 3], sigma [...]); the
        coarse (or only) field.
    sigma: points [n, 3] -> sigma [n]; density of the same field, used by the grid
        estimators for the early-stop pre-pass and grid updates (without gradients).
    fine_rgb_sigma: the fine field of the hierarchical estimator (None: reuse ``rgb_sigma``).
    two_pass, fine_two_pass: ``rgb_sigma`` and ``fine_rgb_sigma`` in two passes (None: the
        renderer queries colour at every point).
    """

    rgb_sigma: RgbSigmaFn
    sigma: SigmaFn | None = None
    fine_rgb_sigma: RgbSigmaFn | None = None
    two_pass: TwoPassField | None = None
    fine_two_pass: TwoPassField | None = None


@dataclass
class Samples:
    """Where an estimator wants a batch of rays [n_rays] rendered, dense or packed.

    Dense (the hierarchical estimator; ``t`` set): the field is queried at ``t``.
        t: Tensor  # [n_rays, n_samples] sorted along each ray
    Packed (the grid estimators; ``ray_indices`` set): the field is queried at the midpoints.
        ray_indices: Tensor  # [n] int64, non-decreasing
        t_starts, t_ends: Tensor  # [n] sorted within each ray
    rgb: Tensor  # [n, 3] and sigma: Tensor  # [n]: the field's values at the samples when the
        estimator has queried them already (front-to-back early stop), else None.
    n_queries: points the estimator itself sent to the field (a density pre-pass, the coarse
        pass, front-to-back rounds), not counting the renderer's own query.
    fine: query the fine field (``FieldFns.fine_rgb_sigma``, else ``rgb_sigma``).
    extras: outputs of the estimator's own rendering pass, returned beside the renderer's
        (``rgb_coarse``, ``depth_coarse``, ``acc_coarse`` [n_rays, ...]).
    """

    t: Tensor | None = None
    ray_indices: Tensor | None = None
    t_starts: Tensor | None = None
    t_ends: Tensor | None = None
    rgb: Tensor | None = None
    sigma: Tensor | None = None
    n_queries: int = 0
    fine: bool = False
    extras: dict[str, Tensor] = field(default_factory=dict)

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

    name: ``hierarchical``, ``torch_grid`` or ``nerfacc``.
    cfg: the render settings it was built with.
    grid: its occupancy grid (None: it keeps no grid).
    """

    name: str
    cfg: RenderConfig
    grid: object | None

    def sample(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> Samples:
        """Samples of ``rays`` [n_rays] (jittered iff ``train and cfg.perturb``)."""

    def update(self, step: int, fns: FieldFns, generator: torch.Generator | None = None) -> None:
        """Training step ``step``: refresh the estimator's own state from the field."""

    def state_dict(self) -> dict | None:
        """The state to save in a checkpoint (None: nothing to save)."""

    def load_state_dict(self, state: dict | None) -> None:
        """Restore ``state_dict()``."""
