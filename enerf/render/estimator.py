"""The sampling interface (nerfacc's contract): an estimator gets rays and the run's fields and
returns intervals; the final colour is none of its business.

A renderer (``renderer.py``) is an estimator plus one shading step::

    samples = estimator.sample(rays, fields, train, generator)       # Samples: intervals
    out = shade(samples, rays, fields[samples.field], ...)           # the one query of the field
    losses = samples.losses(out["weights"])                          # the estimator's own, if any

Estimators (each in its own module, by name in ``registry.ESTIMATORS``):

* ``HierarchicalEstimator`` (``hierarchical.py``): NeRF's stratified samples; with importance
  samples it shades its coarse pass itself and returns the fine samples; dense.
* ``ProposalEstimator`` (``proposal.py``): nerfacto's proposal networks; packed.
* ``TorchGridEstimator`` (``grid_estimator.py``): occupancy-grid marching in torch; packed.
* ``NerfaccEstimator`` (``nerfacc_backend.py``): the same through ``nerfacc.OccGridEstimator``.

The field reaches the renderer as a module with the methods of ``RadianceField``
(``enerf.fields.nerf.NeRFField``); a grid estimator sees only its density, as a ``DensityFn``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Mapping, Protocol

import torch
from torch import Tensor, nn

from ..config import FieldConfig, RenderConfig
from ..errors import ConfigError
from ..cameras.rays import RayExtent, Rays

__all__ = ["DensityFn", "RadianceField", "Samples", "Estimator", "Setup", "density_fn", "midpoints", "draft_count",
           "DRAFT_MIN_SAMPLES", "DRAFT_RGB_THRESHOLD"]

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
    per_ray: k > 0 when packed samples come in rows: every ray has exactly k, ray r's are
        r k .. r k + k - 1 (the proposal sampler's); points and compositing then use rows of
        [n_rays, k] instead of gathers by ``ray_indices`` (``compositing.composite_rows``).
    n_queries: points the estimator itself sent to its density functions (a density pre-pass,
        front-to-back rounds, proposal passes), not counting the points it shaded.
    field: the name of the field in ``fields`` the renderer shades them with.
    shaded: what the estimator shaded itself on the way (the hierarchical coarse pass): outputs
        (e.g. rgb_coarse [n_rays, 3]) the renderer returns beside its own, and the counts
        ``n_samples`` (points rendered with gradients) and ``n_colour_skipped``.
    losses: the estimator's own loss terms from the final pass's compositing ``weights`` (the
        proposal estimator's; None: none).
    """

    t: Tensor | None = None
    ray_indices: Tensor | None = None
    t_starts: Tensor | None = None
    t_ends: Tensor | None = None
    per_ray: int = 0
    n_queries: int = 0
    field: str = "coarse"
    shaded: dict = dataclasses.field(default_factory=dict)
    losses: Callable[[Tensor], dict[str, Tensor]] | None = None

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
        if self.per_ray:
            k = self.per_ray
            t_mid = (0.5 * (self.t_starts + self.t_ends)).view(-1, k, 1)
            points = rays.origins[:, None, :] + t_mid * rays.directions[:, None, :]
            return points.view(-1, 3), rays.viewdirs[:, None, :].expand(-1, k, 3).reshape(-1, 3)
        if self.packed:
            return midpoints(rays, self.ray_indices, self.t_starts, self.t_ends), rays.viewdirs[self.ray_indices]
        points = rays.origins[:, None, :] + rays.directions[:, None, :] * self.t[..., None]
        return points, rays.viewdirs[:, None, :].expand(points.shape)

    def distances(self, rays: Rays) -> Tensor:
        """The distance of every sample from its ray's origin (the midpoint of a packed interval):
        Tensor  # [n] (packed) or [n_rays, n_samples], in the units of the rays' space."""
        norm = rays.directions.norm(dim=-1)
        if self.packed:
            return 0.5 * (self.t_starts + self.t_ends) * norm[self.ray_indices]
        return self.t * norm[:, None]


def density_fn(field: RadianceField, noise_std: float = 0.0) -> DensityFn:
    """The density an estimator sees (no gradients): points [n, 3] -> the field's mean density [n]
    under noise ``noise_std`` (so a ReLU head gone negative does not empty a grid for good)."""

    @torch.no_grad()
    def sigma(points: Tensor) -> Tensor:
        return field.mean_density(points, noise_std)

    return sigma


def midpoints(rays: Rays, ray_indices: Tensor, t_starts: Tensor, t_ends: Tensor) -> Tensor:
    """Tensor  # [n, 3] the midpoints of packed intervals of ``rays``."""
    return rays.origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * rays.directions[ray_indices]


class Estimator:
    """What a renderer asks of an estimator, and the defaults of what a simple one need not say.

    The contract (``Renderer`` calls nothing else while rendering or training):

    * ``sample(rays, fields, train, generator) -> Samples``: where to render ``rays``, reading
      whichever of the run's ``fields`` it needs (the radiance field's density through
      ``density(fields, train)``, its own networks such as ``fields["proposal"]``);
    * ``update(step, fields, generator)``: training step ``step``, before the batch is drawn:
      refresh its own state (an occupancy grid, a proposal annealing); default nothing.

    Around it, each with a default for a stateless estimator:

    * ``check(cfg)`` (class): a ConfigError (one line) for options it cannot honour, before a run
      builds anything (no sampler name is written in enerf/config);
    * ``build(cfg, setup)`` (class): the estimator ``--sampler NAME`` means, from what a run or a
      checkpoint has (``Setup``); ``resolve(device, warn, fallback)`` (class): the class that runs
      on ``device`` (``auto``: nerfacc or torch_grid);
    * ``networks(cfg, field, device)`` (static): networks of its own the run trains beside the
      radiance field (the proposal networks), by name in ``fields``;
    * ``draft(fraction)``: a cheaper copy for the viewer's draft frames (``draft_config``);
    * ``state_dict`` / ``load_state_dict``: what a checkpoint keeps (``stateful``: a trained
      run's estimator cannot be rebuilt without it);
    * ``record(n_rays)``: its own figures for metrics.json;
    * ``batch_by_samples``: samples per ray vary, so a training batch is sized by samples.

    A new sampler subclasses this class in a file of its own and adds one line to
    ``registry.ESTIMATORS`` (docs/api.md shows one).
    """

    name: str = ""
    stateful: bool = False
    batch_by_samples: bool = False

    def __init__(self, cfg: RenderConfig) -> None:
        self.cfg = cfg

    # -------------------------------------------------------------- building
    fine_network: bool = False  # whether --N_importance > 0 (a fine network) is its own option
    culls: bool = False  # whether --cull_occluded is its own option

    @classmethod
    def check(cls, cfg: RenderConfig) -> None:
        """Refuse the options of ``cfg`` this sampler cannot honour (default: a fine network and
        occlusion culling belong to the samplers that say so).

        Raises:
            ConfigError: naming the options and the sampler that has them.
        """
        if cfg.n_importance > 0 and not cls.fine_network:
            raise ConfigError(f"n_importance must be 0 with sampler {cfg.sampler} (one field), got {cfg.n_importance}; "
                              "use sampler hierarchical for a fine network", fields=("n_importance", "sampler"))
        if cfg.cull_occluded and (not cls.culls or cfg.early_stop_eps <= 0):
            raise ConfigError("cull_occluded needs sampler torch_grid and early_stop_eps > 0 (it empties the cells "
                              "no training ray reaches with transmittance above it)",
                              fields=("cull_occluded", "early_stop_eps", "sampler"))

    @classmethod
    def resolve(cls, device: torch.device, warn: Callable[[str], None], fallback: bool = False) -> type:
        """The estimator class that runs on ``device`` in place of ``cls`` (default ``cls``)."""
        return cls

    @classmethod
    def build(cls, cfg: RenderConfig, setup: "Setup") -> "Estimator":
        """The estimator of a run or a checkpoint (default: ``cls(cfg)``, its state restored)."""
        estimator = cls(cfg)
        if setup.state is not None:
            estimator.load_state_dict(setup.state)
        return estimator

    @staticmethod
    def networks(cfg: RenderConfig, field: FieldConfig, device: torch.device) -> dict[str, nn.Module]:
        """Networks of the estimator's own the run trains and saves beside the radiance field."""
        return {}

    # ------------------------------------------------------------- the contract
    def density(self, fields: Mapping[str, RadianceField], train: bool) -> DensityFn:
        """The coarse field's density as estimators read it (noise ``raw_noise_std`` while training)."""
        return density_fn(fields["coarse"], self.cfg.raw_noise_std if train else 0.0)

    def sample(self, rays: Rays, fields: Mapping[str, RadianceField], train: bool,
               generator: torch.Generator | None = None) -> Samples:
        """Intervals of ``rays`` [n_rays] (jittered iff ``train and cfg.perturb``)."""
        raise NotImplementedError

    def update(self, step: int, fields: Mapping[str, RadianceField], generator: torch.Generator | None = None) -> None:
        """Training step ``step``: refresh the estimator's own state (default nothing)."""
        return None

    # ---------------------------------------------------------------- the rest
    @classmethod
    def draft_config(cls, cfg: RenderConfig, fraction: float) -> RenderConfig:
        """``cfg`` for a draft with ``fraction`` of the samples (in (0, 1)); every estimator: colour
        only where the compositing weight exceeds ``DRAFT_RGB_THRESHOLD``."""
        return dataclasses.replace(cfg, rgb_weight_threshold=max(cfg.rgb_weight_threshold, DRAFT_RGB_THRESHOLD))

    def draft(self, fraction: float) -> "Estimator":
        """A cheaper copy with ``fraction`` (in (0, 1)) of the samples per ray, sharing this one's state."""
        return type(self)(self.draft_config(self.cfg, fraction))

    def record(self, n_rays: int) -> dict:
        """Figures of its own for metrics.json after ``n_rays`` training rays ({}: none)."""
        return {}

    def state_dict(self) -> dict | None:
        """The state to save in a checkpoint (None: nothing to save)."""
        return None

    def load_state_dict(self, state: dict | None) -> None:
        """Restore ``state_dict()``."""
        return None


@dataclass
class Setup:
    """What ``Estimator.build`` may use (``build.build_renderer``'s arguments; see there)."""

    device: torch.device
    state: dict | None = None
    extent: Callable[[], RayExtent] | None = None
    aabb: tuple[float, ...] | None = None
    read_off: RadianceField | None = None
    grid: object | None = None


DRAFT_MIN_SAMPLES = 8  # a draft never has fewer samples (or proposal intervals) per ray than this
DRAFT_RGB_THRESHOLD = 1e-3  # a draft colours only where the compositing weight exceeds this (or the run's threshold)


def draft_count(n: int, fraction: float) -> int:
    """``fraction`` of ``n`` samples, at least ``DRAFT_MIN_SAMPLES`` (or ``n`` when smaller)."""
    return max(min(DRAFT_MIN_SAMPLES, n), int(round(n * fraction)))
