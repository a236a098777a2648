"""Occupancy-grid estimators: the state and rules both grid renderers share, and ``torch_grid``.

``OccupancyGridEstimator`` holds what ``torch_grid`` and ``nerfacc`` have in common: an
``OccupancyGrid`` (their checkpoint state, the same for both), the occupancy a grid update
reads off the field, and the opacity threshold. ``TorchGridEstimator`` marches that grid in
plain torch (``marching.py``; CPU or CUDA); ``NerfaccEstimator`` (``nerfacc_backend.py``)
marches it with ``nerfacc.OccGridEstimator`` (CUDA).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..config import RenderConfig
from ..cameras.rays import Rays
from ..errors import CheckpointError, ConfigError
from .estimator import DensityFn, Samples, midpoints
from .marching import lattice_transmittance, march_rays, visibility_mask, visible_front_to_back
from .occupancy_grid import OccupancyGrid

__all__ = ["OccupancyGridEstimator", "TorchGridEstimator"]


class OccupancyGridEstimator:
    """What the grid estimators share (subclasses implement ``sample`` and ``update``).

    Args:
        cfg: step size, grid update rule, early stop, ...
        grid: the occupancy grid (its state is this estimator's state).
        occ_scale: |direction| the grid update multiplies density * step by, so a cell's
            occupancy is about the opacity of one marching step (mean |directions| of the
            training rays; NDC rays have |d| near 2).
    """

    name = "grid"
    proposes = False
    density_field = None
    culls_occluded = False  # whether ``--cull_occluded`` is implemented

    def __init__(self, cfg: RenderConfig, grid: OccupancyGrid, occ_scale: float = 1.0) -> None:
        if cfg.cull_occluded and not self.culls_occluded:  # auto resolved to nerfacc, which does not cull
            raise ConfigError(f"--cull_occluded needs --renderer torch_grid; {self.name} does not cull")
        self.cfg = cfg
        self.grid = grid
        self.occ_scale = float(occ_scale)
        self.update_queries = 0  # points sent to the field by grid updates so far

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        return {"grid": {k: v.detach().cpu().clone() for k, v in self.grid.state_dict().items()}, "occ_scale": self.occ_scale,
                "update_queries": self.update_queries}

    def load_state_dict(self, state: dict) -> None:
        grid_state = state["grid"]
        if tuple(grid_state["binaries"].shape) != tuple(self.grid.binaries.shape):
            raise CheckpointError(
                f"the checkpoint's occupancy grid is {list(grid_state['binaries'].shape)}, this run's "
                f"--grid_resolution gives {list(self.grid.binaries.shape)}; use the checkpoint's resolution"
            )
        self.grid.load_state_dict(grid_state)
        self.occ_scale = float(state.get("occ_scale", 1.0))
        self.update_queries = int(state.get("update_queries", 0))
        self.grid_changed()

    def grid_changed(self) -> None:
        """Hook: ``grid`` was written from outside (a loaded state, a read-off); default nothing."""

    # ---------------------------------------------------------------- updates
    def occ_eval_fn(self, density_fn: DensityFn) -> Callable[[Tensor], Tensor]:
        """points [n, 3] -> occupancy [n] = density * render_step_size * occ_scale (nerfacc's examples);
        counts the points in ``update_queries``."""
        scale = self.cfg.render_step_size * self.occ_scale

        def occupancy(points: Tensor) -> Tensor:
            self.update_queries += points.shape[0]
            return density_fn(points) * scale

        return occupancy

    @torch.no_grad()
    def read_off_field(self, density_fn: DensityFn) -> None:
        """Fill the grid from the field alone (one full-grid density pass): every cell is occupied
        where ``density * step * |d|`` exceeds ``min(occ_thre, mean)``, the rule a warm-up update applies."""
        cfg = self.cfg
        self.grid.update(0, self.occ_eval_fn(density_fn), cfg.occ_thre, cfg.grid_ema_decay, warmup_steps=1)
        self.grid_changed()

    # ---------------------------------------------------------------- sampling
    def alpha_thre(self) -> float:
        """As nerfacc: never threshold opacity above the grid's mean occupancy."""
        return min(self.cfg.alpha_thre, float(self.grid.occs.mean())) if self.cfg.alpha_thre > 0 else 0.0

    def early_stop(self) -> bool:
        """Whether samples behind the early stop (or below the opacity threshold) are dropped."""
        return self.cfg.early_stop_eps > 0 or self.cfg.alpha_thre > 0

    def sample(self, rays: Rays, density_fn: DensityFn, train: bool,
               generator: torch.Generator | None = None) -> Samples:
        raise NotImplementedError

    def propose(self, rays: Rays, samples: Samples, weights: Tensor, train: bool,
                generator: torch.Generator | None = None) -> Samples:
        raise NotImplementedError("grid estimators return their final samples from sample()")

    def update(self, step: int, density_fn: DensityFn, generator: torch.Generator | None = None) -> None:
        raise NotImplementedError

    def loss_terms(self, weights: Tensor) -> dict[str, Tensor]:
        return {}


class TorchGridEstimator(OccupancyGridEstimator):
    """Occupancy-grid marching in plain torch (``torch_grid``), with early stop and occlusion culling.

    Early stop (``early_stop_eps`` / ``alpha_thre``) drops occluded samples, found from the
    density alone: front to back (``early_stop_block > 0``) or with a density pre-pass over all
    marched samples (nerfacc's way).
    """

    name = "torch_grid"
    culls_occluded = True

    @torch.no_grad()
    def update(self, step: int, density_fn: DensityFn, generator: torch.Generator | None = None) -> None:
        """Every ``grid_update_every`` steps: re-estimate the grid from the field's density."""
        cfg = self.cfg
        occ_eval_fn = self.occ_eval_fn(density_fn)
        if step % cfg.grid_update_every == 0:
            self.grid.update(step, occ_eval_fn, cfg.occ_thre, cfg.grid_ema_decay, cfg.grid_warmup, generator,
                             visibility_eps=cfg.early_stop_eps if cfg.cull_occluded else 0.0)

    def _jitter(self, rays: Rays, train: bool, generator: torch.Generator | None) -> Tensor | None:
        """Tensor  # [n_rays] lattice shift of each ray while training (None: no jitter)."""
        if not (train and self.cfg.perturb):
            return None
        gen_device = generator.device if generator is not None else rays.origins.device
        return torch.rand(rays.origins.shape[0], generator=generator, device=gen_device).to(rays.origins.device)

    def _record_visibility(self, rays: Rays, jitter: Tensor | None, ray_indices: Tensor, t_starts: Tensor,
                           thickness: Tensor) -> None:
        """Occlusion culling: note the transmittance these training rays had along their whole lattice."""
        points, trans = lattice_transmittance(rays.origins, rays.directions, rays.near, rays.far, self.grid.aabb,
                                              self.cfg.render_step_size, jitter, ray_indices, t_starts, thickness)
        self.grid.record_visibility(points, trans)

    def sample(self, rays: Rays, density_fn: DensityFn, train: bool,
               generator: torch.Generator | None = None) -> Samples:
        """March ``rays`` [n_rays] through the occupied cells and drop the occluded samples.

        Returns:
            packed Samples (ray_indices, t_starts, t_ends [n]).
        """
        cfg = self.cfg
        n_rays = rays.origins.shape[0]
        dir_norm = rays.directions.norm(dim=-1)
        jitter = self._jitter(rays, train, generator)
        ray_indices, t_starts, t_ends = march_rays(rays.origins, rays.directions, rays.near, rays.far, self.grid,
                                                   cfg.render_step_size, jitter)
        if not self.early_stop() or ray_indices.numel() == 0:
            return Samples(ray_indices=ray_indices, t_starts=t_starts, t_ends=t_ends)
        cull = train and cfg.cull_occluded
        points = midpoints(rays, ray_indices, t_starts, t_ends)
        with torch.no_grad():
            if cfg.early_stop_block > 0:  # front to back: samples far behind the stop are never read
                found = visible_front_to_back(points, t_starts, t_ends, ray_indices, n_rays, dir_norm, density_fn,
                                              cfg.early_stop_eps, self.alpha_thre(), cfg.early_stop_block)
                keep, queried, read, thickness = found.kept, found.queried, found.queried_index, found.thickness
            else:  # nerfacc's way: a density pre-pass over all marched samples
                sigma = density_fn(points)
                thickness = sigma * (t_ends - t_starts) * dir_norm[ray_indices]
                keep = visibility_mask(t_starts, t_ends, sigma, ray_indices, n_rays, dir_norm, cfg.early_stop_eps,
                                       self.alpha_thre())
                queried, read = ray_indices.numel(), slice(None)
            if cull:
                self._record_visibility(rays, jitter, ray_indices[read], t_starts[read], thickness)
        return Samples(ray_indices=ray_indices[keep], t_starts=t_starts[keep], t_ends=t_ends[keep], n_queries=queried)
