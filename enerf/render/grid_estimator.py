"""Occupancy-grid estimators: the state and rules both grid renderers share, and ``torch_grid``.

``OccupancyGridEstimator`` holds what ``torch_grid`` and ``nerfacc`` have in common: an
``OccupancyGrid`` (their checkpoint state, the same for both), the occupancy a grid update
reads off the field, and the opacity threshold. ``TorchGridEstimator`` marches that grid in
plain torch (``marching.py``; CPU or CUDA); ``NerfaccEstimator`` (``nerfacc_backend.py``)
marches it with ``nerfacc.OccGridEstimator`` (CUDA).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

import torch
from torch import Tensor

from ..config import RenderConfig
from ..cameras.rays import Rays
from ..errors import CheckpointError, ConfigError
from ..distributed import all_reduce_max_, broadcast_buffers, world_size
from .estimator import DensityFn, Estimator, RadianceField, Samples, Setup, density_fn, midpoints
from .marching import lattice_transmittance, march_rays, visibility_mask, visible_front_to_back
from .occupancy_grid import OccupancyGrid

__all__ = ["OccupancyGridEstimator", "TorchGridEstimator"]


_DRAFT_EARLY_STOP = 1e-3  # a draft ray stops at this transmittance (or the run's, if larger)


class OccupancyGridEstimator(Estimator):
    """What the grid estimators share (subclasses implement ``march`` and ``update_grid``).

    Args:
        cfg: step size, grid update rule, early stop, ...
        grid: the occupancy grid (its state is this estimator's state).
        occ_scale: |direction| the grid update multiplies density * step by, so a cell's
            occupancy is about the opacity of one marching step (mean |directions| of the
            training rays; NDC rays have |d| near 2).
    """

    name = "grid"
    stateful = True  # a trained run's grid is in its checkpoint
    batch_by_samples = True  # samples per ray vary with the grid
    culls_occluded = False  # whether ``--cull_occluded`` is implemented

    def __init__(self, cfg: RenderConfig, grid: OccupancyGrid, occ_scale: float = 1.0) -> None:
        if cfg.cull_occluded and not self.culls_occluded:  # auto resolved to nerfacc, which does not cull
            raise ConfigError(f"--cull_occluded needs --sampler torch_grid; {self.name} does not cull")
        super().__init__(cfg)
        self.grid = grid
        self.occ_scale = float(occ_scale)
        self.update_queries = 0  # points sent to the field by grid updates so far

    @classmethod
    def build(cls, cfg: RenderConfig, setup: Setup) -> "OccupancyGridEstimator":
        """The grid comes from ``setup.grid`` (shared), else ``setup.state`` (restored), else a new
        empty grid over ``setup.aabb`` or the box of the rays' [near, far] segments
        (``setup.extent()``, whose mean |direction| is then ``occ_scale``); ``setup.read_off``
        fills it from that field alone (``read_off_field``).

        Raises:
            ValueError: neither ``grid``, ``state`` nor ``extent``.
        """
        grid, state = setup.grid, setup.state
        seen = setup.extent() if setup.extent is not None and state is None else None
        if grid is None:
            if state is not None:
                box = state["grid"]["aabb"]
            elif setup.aabb is not None and seen is not None:
                box = torch.tensor(setup.aabb, dtype=torch.float32)
            elif seen is not None:
                pad = (seen.hi - seen.lo) * 0.02  # rays_aabb's margin
                box = torch.cat([seen.lo - pad, seen.hi + pad]).float()
            else:
                raise ValueError("a grid renderer needs a saved state or the training rays to size its grid")
            grid = OccupancyGrid(box, cfg.grid_resolution).to(setup.device)
        estimator = cls(cfg, grid)
        if state is not None:
            estimator.load_state_dict(state)
        elif seen is not None:
            estimator.occ_scale = seen.mean_direction_norm
        if setup.read_off is not None:
            estimator.read_off_field(density_fn(setup.read_off))
        return estimator

    @classmethod
    def draft_config(cls, cfg: RenderConfig, fraction: float) -> RenderConfig:
        """A marching step ``1 / fraction`` times as long (the same grid: empty space is skipped as
        in the exact frame), early stop at transmittance ``_DRAFT_EARLY_STOP``."""
        cfg = super().draft_config(cfg, fraction)
        return dataclasses.replace(cfg, render_step_size=cfg.render_step_size / fraction,
                                   early_stop_eps=max(cfg.early_stop_eps, _DRAFT_EARLY_STOP))

    def draft(self, fraction: float) -> "OccupancyGridEstimator":
        """A cheaper copy marching this one's grid (read, never written)."""
        return type(self)(self.draft_config(self.cfg, fraction), self.grid, self.occ_scale)

    def record(self, n_rays: int) -> dict:
        """The fraction of occupied cells, and the points grid updates have sent to the field per
        training ray so far (not part of ``queries_per_ray``)."""
        return {"grid_occupied": float(self.grid.binaries.float().mean()),
                "grid_update_queries_per_ray": self.update_queries / max(n_rays, 1)}

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
    def early_stop(self) -> bool:
        """Whether samples behind the early stop are dropped (no opacity threshold: nerfacc's
        ``alpha_thre`` is 0 here)."""
        return self.cfg.early_stop_eps > 0

    def sample(self, rays: Rays, fields: Mapping[str, RadianceField], train: bool,
               generator: torch.Generator | None = None) -> Samples:
        """March ``rays`` [n_rays] through the grid, reading the coarse field's density (``march``)."""
        return self.march(rays, self.density(fields, train), train, generator)

    def march(self, rays: Rays, density_fn: DensityFn, train: bool,
              generator: torch.Generator | None = None) -> Samples:
        raise NotImplementedError

    @torch.no_grad()
    def update(self, step: int, fields: Mapping[str, RadianceField], generator: torch.Generator | None = None) -> None:
        """``update_grid`` from the coarse field's density, with the grid kept the same on every
        rank of a run on several processes (``enerf.distributed``): the visibility the rays
        of every rank saw is pooled before an update (``--cull_occluded``), and every rank takes
        rank 0's grid after it (nerfacc draws its update points from each rank's own CUDA generator)."""
        cfg = self.cfg
        shared = world_size() > 1 and step % cfg.grid_update_every == 0
        if shared and cfg.cull_occluded:
            all_reduce_max_(self.grid.seen)
        self.update_grid(step, self.density(fields, train=True), generator)
        if shared and broadcast_buffers(self.grid):
            self.grid_changed()

    def update_grid(self, step: int, density_fn: DensityFn, generator: torch.Generator | None = None) -> None:
        """Training step ``step``: the grid's own update rule (every ``grid_update_every`` steps)."""
        raise NotImplementedError


class TorchGridEstimator(OccupancyGridEstimator):
    """Occupancy-grid marching in plain torch (``torch_grid``), with early stop and occlusion culling.

    Early stop (``early_stop_eps`` / ``alpha_thre``) drops occluded samples, found from the
    density alone: front to back (``early_stop_block > 0``) or with a density pre-pass over all
    marched samples (nerfacc's way).
    """

    name = "torch_grid"
    culls = True  # --cull_occluded
    culls_occluded = True

    @torch.no_grad()
    def update_grid(self, step: int, density_fn: DensityFn, generator: torch.Generator | None = None) -> None:
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

    def march(self, rays: Rays, density_fn: DensityFn, train: bool,
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
                                              cfg.early_stop_eps, 0.0, cfg.early_stop_block)
                keep, queried, read, thickness = found.kept, found.queried, found.queried_index, found.thickness
            else:  # nerfacc's way: a density pre-pass over all marched samples
                sigma = density_fn(points)
                thickness = sigma * (t_ends - t_starts) * dir_norm[ray_indices]
                keep = visibility_mask(t_starts, t_ends, sigma, ray_indices, n_rays, dir_norm, cfg.early_stop_eps,
                                       0.0)
                queried, read = ray_indices.numel(), slice(None)
            if cull:
                self._record_visibility(rays, jitter, ray_indices[read], t_starts[read], thickness)
        return Samples(ray_indices=ray_indices[keep], t_starts=t_starts[keep], t_ends=t_ends[keep], n_queries=queried)
