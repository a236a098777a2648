"""Pick and run a renderer: ``hierarchical``, ``torch_grid``, ``nerfacc`` or ``auto``.

* ``hierarchical``: NeRF's stratified (+ importance) sampling, ``volume.py``.
* ``torch_grid``: occupancy-grid ray marching with empty-space skipping and early stop,
  packed rendering, all in plain torch (``occupancy_grid.py``, ``marching.py``); CPU or CUDA.
* ``nerfacc``: the same algorithm through ``nerfacc.OccGridEstimator`` and
  ``nerfacc.rendering`` (``nerfacc_backend.py``); needs CUDA and nerfacc's extension.
* ``auto``: ``nerfacc`` when the run is on CUDA and nerfacc's extension builds, otherwise
  ``torch_grid`` (one warning line on stderr when the build failed, saying why).

Every renderer takes the field as callables (``FieldFns``), renders training batches
(``render_rays``) and whole images (``render_image``), updates its estimator during training
(``update``; the grid renderers' occupancy grid) and saves / restores that state
(``state_dict`` / ``load_state_dict``; None for ``hierarchical``). Both grid renderers store
the same ``OccupancyGrid`` state, so a checkpoint trained with one renders with the other.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from ..config import RENDERERS, RenderConfig
from ..data.rays import Rays, flatten_rays, index_rays
from ..errors import CheckpointError, ConfigError
from .marching import SigmaFn, composite_packed, lattice_transmittance, march_rays, query_front_to_back, visibility_mask
from .occupancy_grid import OccupancyGrid, rays_aabb
from .volume import RgbSigmaFn, render_image, render_rays

__all__ = [
    "RENDERERS",
    "FieldFns",
    "resolve_renderer",
    "make_renderer",
    "grid_from_field",
    "HierarchicalRenderer",
    "GridRenderer",
    "Renderer",
]

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"enerf: warning: {message}", file=sys.stderr)


@dataclass(frozen=True)
class FieldFns:
    """The field, as the callables a renderer needs.

    rgb_sigma: points [..., 3], viewdirs [..., 3] -> (rgb [..., 3], sigma [...]); the
        coarse (or only) field.
    sigma: points [n, 3] -> sigma [n]; density of the same field, used by the grid
        renderers for the early-stop pre-pass and grid updates (without gradients).
    fine_rgb_sigma: the fine field of the hierarchical renderer (None: reuse ``rgb_sigma``).
    """

    rgb_sigma: RgbSigmaFn
    sigma: SigmaFn | None = None
    fine_rgb_sigma: RgbSigmaFn | None = None


def resolve_renderer(name: str, device: torch.device, warn: Callable[[str], None] = _warn_once) -> str:
    """The renderer that ``name`` means on ``device``: hierarchical, torch_grid or nerfacc.

    Raises:
        ConfigError: ``nerfacc`` was asked for and cannot run here (the message says why).
    """
    if name not in RENDERERS:
        raise ConfigError(f"renderer {name!r} is not one of {', '.join(RENDERERS)}", ("renderer",))
    if name in ("hierarchical", "torch_grid"):
        return name
    from .nerfacc_backend import nerfacc_status

    ok, why = nerfacc_status(device)
    if name == "nerfacc":
        if not ok:
            raise ConfigError(f"renderer nerfacc cannot run: {why}; use renderer torch_grid (the same algorithm in torch) or auto", ("renderer",))
        return "nerfacc"
    if ok:
        return "nerfacc"
    if device.type == "cuda":  # on a CPU run torch_grid is simply what auto means
        warn(f"--renderer auto falls back to torch_grid: {why}")
    return "torch_grid"


class HierarchicalRenderer:
    """NeRF's coarse + fine sampler (``volume.render_rays``); no estimator state."""

    name = "hierarchical"
    grid = None

    def __init__(self, cfg: RenderConfig) -> None:
        self.cfg = cfg

    def render_rays(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> dict:
        out = render_rays(rays, fns.rgb_sigma, fns.fine_rgb_sigma, self.cfg, train, generator)
        out["n_samples"] = out["n_queries"]
        return out

    def render_image(self, rays: Rays, fns: FieldFns, chunk: int | None = None) -> dict[str, Tensor]:
        return render_image(rays, fns.rgb_sigma, fns.fine_rgb_sigma, self.cfg, chunk)

    def update(self, step: int, fns: FieldFns, generator: torch.Generator | None = None) -> None:
        return None

    def state_dict(self) -> dict | None:
        return None

    def load_state_dict(self, state: dict | None) -> None:
        return None


class GridRenderer:
    """Occupancy-grid ray marching (``torch_grid``, or ``nerfacc`` when ``use_nerfacc``).

    Args:
        cfg: step size, grid update rule, early stop, ...
        grid: the occupancy grid (its state is this renderer's state).
        occ_scale: |direction| the grid update multiplies density * step by, so a cell's
            occupancy is about the opacity of one marching step (mean |directions| of the
            training rays; NDC rays have |d| near 2).
        use_nerfacc: march and render with nerfacc (CUDA) instead of torch ops.
    """

    def __init__(self, cfg: RenderConfig, grid: OccupancyGrid, occ_scale: float = 1.0, use_nerfacc: bool = False) -> None:
        if cfg.n_importance > 0:
            raise ConfigError(
                f"--renderer {cfg.renderer} renders one field; --N_importance {cfg.n_importance} asks for a fine "
                "network: set --N_importance 0 or use --renderer hierarchical"
            )
        if cfg.cull_occluded and (use_nerfacc or cfg.early_stop_eps <= 0):
            raise ConfigError(
                "--cull_occluded needs --renderer torch_grid and --early_stop_eps > 0 (it empties the cells no "
                "training ray reaches with transmittance above it)"
            )
        self.cfg = cfg
        self.grid = grid
        self.occ_scale = float(occ_scale)
        self.name = "nerfacc" if use_nerfacc else "torch_grid"
        self.update_queries = 0  # points sent to the field by grid updates so far
        self._nerfacc = None
        if use_nerfacc:
            from .nerfacc_backend import NerfaccGrid

            self._nerfacc = NerfaccGrid(grid)

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
        if self._nerfacc is not None:
            self._nerfacc.load_from_grid()

    # ---------------------------------------------------------------- updates
    def occ_eval_fn(self, fns: FieldFns) -> Callable[[Tensor], Tensor]:
        """points [n, 3] -> occupancy [n] = density * render_step_size * occ_scale (nerfacc's examples);
        counts the points in ``update_queries``."""
        scale = self.cfg.render_step_size * self.occ_scale

        def occupancy(points: Tensor) -> Tensor:
            self.update_queries += points.shape[0]
            return fns.sigma(points) * scale

        return occupancy

    @torch.no_grad()
    def update(self, step: int, fns: FieldFns, generator: torch.Generator | None = None) -> None:
        """Every ``grid_update_every`` steps: re-estimate the grid from the field's density."""
        cfg = self.cfg
        if fns.sigma is None:
            raise ValueError("grid renderers need FieldFns.sigma to update their grid")
        if self._nerfacc is not None:
            self._nerfacc.update(step, self.occ_eval_fn(fns), cfg.occ_thre, cfg.grid_ema_decay, cfg.grid_warmup, cfg.grid_update_every)
        elif step % cfg.grid_update_every == 0:
            self.grid.update(step, self.occ_eval_fn(fns), cfg.occ_thre, cfg.grid_ema_decay, cfg.grid_warmup, generator,
                             visibility_eps=cfg.early_stop_eps if cfg.cull_occluded else 0.0)

    # -------------------------------------------------------------- rendering
    def _alpha_thre(self) -> float:
        """As nerfacc: never threshold opacity above the grid's mean occupancy."""
        return min(self.cfg.alpha_thre, float(self.grid.occs.mean())) if self.cfg.alpha_thre > 0 else 0.0

    def _early_stop(self, fns: FieldFns) -> bool:
        return fns.sigma is not None and (self.cfg.early_stop_eps > 0 or self.cfg.alpha_thre > 0)

    def _front_to_back(self, fns: FieldFns) -> bool:
        """torch_grid with ``early_stop_block > 0``: early stop while rendering, no pre-pass."""
        return self._nerfacc is None and self.cfg.early_stop_block > 0 and self._early_stop(fns)

    def _jitter(self, rays: Rays, train: bool, generator: torch.Generator | None) -> Tensor | None:
        """Tensor  # [n_rays] lattice shift of each ray while training (None: no jitter)."""
        if not (train and self.cfg.perturb):
            return None
        gen_device = generator.device if generator is not None else rays.origins.device
        return torch.rand(rays.origins.shape[0], generator=generator, device=gen_device).to(rays.origins.device)

    def _march(self, rays: Rays, jitter: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """torch_grid's marching: ray_indices, t_starts, t_ends of the steps in occupied cells."""
        return march_rays(rays.origins, rays.directions, rays.near, rays.far, self.grid, self.cfg.render_step_size, jitter)

    def _record_visibility(self, rays: Rays, jitter: Tensor | None, ray_indices: Tensor, t_starts: Tensor,
                           thickness: Tensor) -> None:
        """Occlusion culling: note the transmittance these training rays had along their whole lattice."""
        points, trans = lattice_transmittance(rays.origins, rays.directions, rays.near, rays.far, self.grid.aabb,
                                              self.cfg.render_step_size, jitter, ray_indices, t_starts, thickness)
        self.grid.record_visibility(points, trans)

    def sample(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor, Tensor, int]:
        """March ``rays`` and drop occluded samples with a density pre-pass over all of them (nerfacc's way).

        Returns ray_indices, t_starts, t_ends and the pre-pass queries.
        """
        cfg = self.cfg
        n_rays = rays.origins.shape[0]
        dir_norm = rays.directions.norm(dim=-1)
        prepass = self._early_stop(fns)
        if self._nerfacc is not None:
            return self._nerfacc.sample(
                rays.origins, rays.directions, rays.near, rays.far, dir_norm, fns.sigma if prepass else None,
                cfg.render_step_size, cfg.early_stop_eps, self._alpha_thre(), bool(train and cfg.perturb),
            )
        jitter = self._jitter(rays, train, generator)
        ray_indices, t_starts, t_ends = self._march(rays, jitter)
        if not prepass or ray_indices.numel() == 0:
            return ray_indices, t_starts, t_ends, 0
        with torch.no_grad():
            sigma = fns.sigma(_midpoints(rays, ray_indices, t_starts, t_ends))
            if train and cfg.cull_occluded:
                thickness = sigma * (t_ends - t_starts) * dir_norm[ray_indices]
                self._record_visibility(rays, jitter, ray_indices, t_starts, thickness)
            keep = visibility_mask(t_starts, t_ends, sigma, ray_indices, n_rays, dir_norm, cfg.early_stop_eps,
                                   self._alpha_thre())
        return ray_indices[keep], t_starts[keep], t_ends[keep], ray_indices.numel()

    def render_rays(self, rays: Rays, fns: FieldFns, train: bool, generator: torch.Generator | None = None) -> dict:
        """Render a batch of rays [n_rays].

        Returns:
            dict with rgb [n_rays, 3], depth [n_rays], acc [n_rays]; n_samples (int, points
            rendered with gradients) and n_queries (int, all points sent to the field,
            including a density pre-pass's).
        """
        n_rays = rays.origins.shape[0]
        dir_norm = rays.directions.norm(dim=-1)
        if self._front_to_back(fns):
            jitter = self._jitter(rays, train, generator)
            ray_indices, t_starts, t_ends = self._march(rays, jitter)
            found = query_front_to_back(
                _midpoints(rays, ray_indices, t_starts, t_ends), rays.viewdirs[ray_indices], t_starts, t_ends,
                ray_indices, n_rays, dir_norm, fns.rgb_sigma, self.cfg.early_stop_eps, self._alpha_thre(),
                self.cfg.early_stop_block,
            )
            if train and self.cfg.cull_occluded:
                self._record_visibility(rays, jitter, ray_indices[found.queried_index], t_starts[found.queried_index],
                                        found.thickness)
            kept, rgb, sigma, queried = found.kept, found.rgb, found.sigma, found.queried
            ray_indices, t_starts, t_ends = ray_indices[kept], t_starts[kept], t_ends[kept]
        else:
            ray_indices, t_starts, t_ends, prepass = self.sample(rays, fns, train, generator)
            rgb, sigma = fns.rgb_sigma(_midpoints(rays, ray_indices, t_starts, t_ends), rays.viewdirs[ray_indices])
            queried = ray_indices.numel() + prepass
        if self._nerfacc is not None:
            from .nerfacc_backend import NerfaccGrid

            out = NerfaccGrid.render(t_starts, t_ends, ray_indices, n_rays, (rgb, sigma), dir_norm, self.cfg.white_bkgd)
        else:
            out = composite_packed(rgb, sigma, t_starts, t_ends, ray_indices, n_rays, dir_norm, self.cfg.white_bkgd)
        return {"rgb": out["rgb"], "depth": out["depth"], "acc": out["acc"], "n_samples": int(ray_indices.numel()),
                "n_queries": int(queried)}

    @torch.no_grad()
    def render_image(self, rays: Rays, fns: FieldFns, chunk: int | None = None) -> dict[str, Tensor]:
        """Render whole-image rays (leading shape [H, W]) ``chunk`` rays at a time, no jitter.

        Returns:
            dict of CPU tensors: rgb [H, W, 3], depth [H, W], acc [H, W].
        """
        shape = rays.origins.shape[:-1]
        flat = flatten_rays(rays)
        chunk = int(chunk or self.cfg.chunk)
        if chunk <= 0:
            raise ValueError(f"chunk must be positive, got {chunk}")
        parts: dict[str, list[Tensor]] = {"rgb": [], "depth": [], "acc": []}
        for start in range(0, flat.origins.shape[0], chunk):
            out = self.render_rays(index_rays(flat, slice(start, start + chunk)), fns, train=False)
            for key in parts:
                parts[key].append(out[key].cpu())
        return {key: torch.cat(values).reshape(*shape, *values[0].shape[1:]) for key, values in parts.items()}


Renderer = HierarchicalRenderer | GridRenderer


def _midpoints(rays: Rays, ray_indices: Tensor, t_starts: Tensor, t_ends: Tensor) -> Tensor:
    """Tensor  # [n_samples, 3] the midpoints of packed intervals."""
    return rays.origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * rays.directions[ray_indices]


def make_renderer(
    cfg: RenderConfig,
    device: torch.device,
    state: dict | None = None,
    training_rays: Rays | None = None,
    aabb: tuple[float, ...] | None = None,
) -> Renderer:
    """Build the renderer ``cfg.renderer`` resolves to on ``device``.

    Grid renderers take their grid from ``state`` (a ``state_dict()``, e.g. from a
    checkpoint) or, for a new run, make an empty one over ``aabb`` (the scene's content box,
    e.g. a Blender object's) or else the box of ``training_rays`` (Rays [n, ...], flattened),
    with ``occ_scale`` their mean |direction|.
    """
    name = resolve_renderer(cfg.renderer, device)
    if name == "hierarchical":
        return HierarchicalRenderer(cfg)
    if state is not None:
        aabb = state["grid"]["aabb"]
    elif aabb is not None and training_rays is not None:
        aabb = torch.tensor(aabb, dtype=torch.float32)
    elif training_rays is not None:
        aabb = rays_aabb(training_rays.origins, training_rays.directions, training_rays.near, training_rays.far, margin=0.02)
    else:
        raise ValueError("a grid renderer needs a saved state or the training rays to size its grid")
    grid = OccupancyGrid(aabb, cfg.grid_resolution).to(device)
    renderer = GridRenderer(cfg, grid, use_nerfacc=name == "nerfacc")
    if state is not None:
        renderer.load_state_dict(state)
    else:
        renderer.occ_scale = float(training_rays.directions.norm(dim=-1).mean())
    return renderer


@torch.no_grad()
def grid_from_field(
    cfg: RenderConfig, device: torch.device, rays: Rays, fns: FieldFns, aabb: tuple[float, ...] | None = None
) -> Renderer:
    """A grid renderer whose grid is read off the field alone (one full-grid density pass).

    For rendering a field without its trained grid: the box is ``aabb`` (the scene's content
    box, as training used) or else that of ``rays``, and every cell is occupied where
    ``density * step * |d|`` exceeds ``min(occ_thre, mean)``, the rule a warm-up update applies.
    """
    flat = flatten_rays(rays)
    renderer = make_renderer(cfg, device, training_rays=flat, aabb=aabb)
    if isinstance(renderer, GridRenderer):
        renderer.grid.update(0, renderer.occ_eval_fn(fns), cfg.occ_thre, cfg.grid_ema_decay, warmup_steps=1)
        if renderer._nerfacc is not None:
            renderer._nerfacc.load_from_grid()
    return renderer
