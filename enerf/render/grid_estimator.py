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
from ..data.rays import Rays
from ..distributed import all_reduce_max_, broadcast_buffers
from ..errors import CheckpointError, ConfigError
from .estimator import FieldFns, Samples, midpoints
from .marching import lattice_transmittance, march_rays, query_front_to_back, visibility_mask
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
    culls_occluded = False  # whether ``--cull_occluded`` is implemented

    def __init__(self, cfg: RenderConfig, grid: OccupancyGrid, occ_scale: float = 1.0) -> None:
        if cfg.n_importance > 0:
            raise ConfigError(
                f"--renderer {cfg.renderer} renders one field; --N_importance {cfg.n_importance} asks for a fine "
                "network: set --N_importance 0 or use --renderer hierarchical"
            )
        if cfg.cull_occluded and (not self.culls_occluded or cfg.early_stop_eps <= 0):
            raise ConfigError(
                "--cull_occluded needs --renderer torch_grid and --early_stop_eps > 0 (it empties the cells no "
                "training ray reaches with transmittance above it)"
            )
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
    def occ_eval_fn(self, fns: FieldFns) -> Callable[[Tensor], Tensor]:
        """points [n, 3] -> occupancy [n] = density * render_step_size * occ_scale (nerfacc's examples);
        counts the points in ``update_queries``."""
        if fns.sigma is None:
            raise ValueError("grid renderers need FieldFns.sigma to update their grid")
        scale = self.cfg.render_step_size * self.occ_scale

        def occupancy(points: Tensor) -> Tensor:
            self.update_queries += points.shape[0]
            return fns.sigma(points) * scale

        return occupancy

    @torch.no_grad()
    def read_off_field(self, fns: FieldFns) -> None:
        """Fill the grid from the field alone (one full-grid density pass): every cell is occupied
        where ``density * step * |d|`` exceeds ``min(occ_thre, mean)``, the rule a warm-up update applies."""
        cfg = self.cfg
        self.grid.update(0, self.occ_eval_fn(fns), cfg.occ_thre, cfg.grid_ema_decay, warmup_steps=1)
        self.grid_changed()

    # ---------------------------------------------------------------- sampling
    def alpha_thre(self) -> float:
        """As nerfacc: never threshold opacity above the grid's mean occupancy."""
        return min(self.cfg.alpha_thre, float(self.grid.occs.mean())) if self.cfg.alpha_thre > 0 else 0.0

    def early_stop(self, fns: FieldFns) -> bool:
        """Whether samples behind the early stop (or below the opacity threshold) are dropped."""
        return fns.sigma is not None and (self.cfg.early_stop_eps > 0 or self.cfg.alpha_thre > 0)

    def sample(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> Samples:
        raise NotImplementedError

    def update(self, step: int, fns: FieldFns, generator: torch.Generator | None = None) -> None:
        raise NotImplementedError


class TorchGridEstimator(OccupancyGridEstimator):
    """Occupancy-grid marching in plain torch (``torch_grid``), with early stop and occlusion culling.

    Early stop (``early_stop_eps`` / ``alpha_thre``) drops occluded samples front to back
    (``early_stop_block > 0``: the colour queries of the kept samples come back in
    ``Samples.rgb`` / ``sigma``) or with a density pre-pass over all marched samples (nerfacc's way).
    """

    name = "torch_grid"
    culls_occluded = True

    @torch.no_grad()
    def update(self, step: int, fns: FieldFns, generator: torch.Generator | None = None) -> None:
        """Every ``grid_update_every`` steps: re-estimate the grid from the field's density."""
        cfg = self.cfg
        occ_eval_fn = self.occ_eval_fn(fns)
        if step % cfg.grid_update_every == 0:
            if cfg.cull_occluded:
                all_reduce_max_(self.grid.seen)  # distributed: what the rays of every rank saw
            self.grid.update(step, occ_eval_fn, cfg.occ_thre, cfg.grid_ema_decay, cfg.grid_warmup, generator,
                             visibility_eps=cfg.early_stop_eps if cfg.cull_occluded else 0.0)
            broadcast_buffers(self.grid)  # distributed: every rank keeps rank 0's grid (the same numbers)

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

    def sample(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> Samples:
        """March ``rays`` [n_rays] through the occupied cells and drop the occluded samples.

        Returns:
            packed Samples (ray_indices, t_starts, t_ends [n]); with front-to-back early stop
            also rgb [n, 3] and sigma [n] of the kept samples.
        """
        cfg = self.cfg
        n_rays = rays.origins.shape[0]
        dir_norm = rays.directions.norm(dim=-1)
        early_stop = self.early_stop(fns)
        jitter = self._jitter(rays, train, generator)
        ray_indices, t_starts, t_ends = march_rays(rays.origins, rays.directions, rays.near, rays.far, self.grid,
                                                   cfg.render_step_size, jitter)
        cull = train and cfg.cull_occluded
        if early_stop and cfg.early_stop_block > 0:  # front to back: every sample queried once
            found = query_front_to_back(
                midpoints(rays, ray_indices, t_starts, t_ends), rays.viewdirs[ray_indices], t_starts, t_ends,
                ray_indices, n_rays, dir_norm, fns.rgb_sigma, cfg.early_stop_eps, self.alpha_thre(), cfg.early_stop_block,
            )
            if cull:
                self._record_visibility(rays, jitter, ray_indices[found.queried_index], t_starts[found.queried_index],
                                        found.thickness)
            kept = found.kept
            return Samples(ray_indices=ray_indices[kept], t_starts=t_starts[kept], t_ends=t_ends[kept],
                           rgb=found.rgb, sigma=found.sigma, n_queries=found.queried)
        if not early_stop or ray_indices.numel() == 0:
            return Samples(ray_indices=ray_indices, t_starts=t_starts, t_ends=t_ends)
        with torch.no_grad():  # nerfacc's way: a density pre-pass over all marched samples
            sigma = fns.sigma(midpoints(rays, ray_indices, t_starts, t_ends))
            if cull:
                thickness = sigma * (t_ends - t_starts) * dir_norm[ray_indices]
                self._record_visibility(rays, jitter, ray_indices, t_starts, thickness)
            keep = visibility_mask(t_starts, t_ends, sigma, ray_indices, n_rays, dir_norm, cfg.early_stop_eps,
                                   self.alpha_thre())
        return Samples(ray_indices=ray_indices[keep], t_starts=t_starts[keep], t_ends=t_ends[keep],
                       n_queries=ray_indices.numel())
