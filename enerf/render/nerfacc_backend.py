"""The nerfacc estimator: ``nerfacc.OccGridEstimator`` marching and updates (CUDA only).

nerfacc is imported lazily, inside these functions: its CUDA extension JIT-compiles on first
use, which needs a CUDA device, the CUDA toolkit (``nvcc`` / ``CUDA_HOME``) and a compiler
setting nerfacc's sources accept. ``nerfacc_status`` tries that once per process and says
why it failed; ``auto`` (``AutoGridEstimator``) falls back to ``torch_grid`` then.

The estimator's state is enerf's ``OccupancyGrid`` itself (same cell layout: one level,
``binaries[0, ix, iy, iz]``; nerfacc's estimator holds the grid's tensors), so a grid trained
here renders with ``torch_grid`` on a CPU and the other way round. Its samples are composited by the one compositor
(``compositing.composite_packed``, nerfacc's ``rendering`` written in torch), as
``torch_grid``'s are: the two differ in their estimator alone.

Only ``enerf/render/`` imports nerfacc.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
from torch import Tensor

from ..config import RenderConfig
from ..cameras.rays import Rays
from ..errors import ConfigError
from .estimator import DensityFn, Samples
from .grid_estimator import OccupancyGridEstimator, TorchGridEstimator
from .occupancy_grid import OccupancyGrid

__all__ = ["nerfacc_status", "NerfaccEstimator", "AutoGridEstimator"]


def _build_failure_reason(exc: BaseException) -> str:
    """One line saying why nerfacc's extension did not build or load."""
    text = f"{type(exc).__name__}: {exc}"
    if "CUDA_HOME" in text:
        return "nerfacc's CUDA extension cannot build: CUDA_HOME is not set (install the CUDA toolkit or export CUDA_HOME)"
    if "lerp" in text:
        return (
            "nerfacc's CUDA extension failed to build: its lerp() clashes with std::lerp when torch "
            "compiles extensions as C++20"
        )
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return f"nerfacc's CUDA extension failed to build or load ({first[:300]})"


@functools.lru_cache(maxsize=None)
def _extension_status() -> tuple[bool, str]:
    try:
        import nerfacc  # noqa: F401
    except Exception as exc:  # ImportError, or anything its import runs into
        return False, f"nerfacc is not importable ({type(exc).__name__}: {exc})".splitlines()[0]
    try:
        from nerfacc.cuda import _backend  # JIT-compiles the extension on first import
    except Exception as exc:
        return False, _build_failure_reason(exc)
    if getattr(_backend, "_C", None) is None:
        return False, "nerfacc's CUDA extension is unavailable: no CUDA toolkit (nvcc) found; install it or set CUDA_HOME"
    return True, ""


def nerfacc_status(device: torch.device) -> tuple[bool, str]:
    """Whether nerfacc can render on ``device``, and if not, one line saying why.

    Building the extension is tried at most once per process (it takes minutes the first time).
    """
    if device.type != "cuda":
        return False, f"nerfacc needs a CUDA device (this run is on {device.type})"
    if not torch.cuda.is_available():
        return False, "nerfacc needs a CUDA device and torch sees none"
    return _extension_status()


class NerfaccEstimator(OccupancyGridEstimator):
    """``nerfacc.OccGridEstimator`` marching this estimator's ``OccupancyGrid`` (``nerfacc``).

    One grid: nerfacc's estimator holds the grid's own tensors (its ``occs`` is the grid's, its
    ``binaries`` a view of the grid's), pointed at them again whenever the grid is written from
    outside (``grid_changed``); nerfacc's update writes ``occs`` in place and makes a new
    ``binaries``, which the grid then takes (a view, not a copy). No occlusion culling.

    Args: as ``OccupancyGridEstimator``.
    """

    name = "nerfacc"

    @classmethod
    def resolve(cls, device: torch.device, warn: Callable[[str], None], fallback: bool = False) -> type:
        """This class where nerfacc runs on ``device``; else ``torch_grid`` (the same grid state)
        with ``fallback`` (a trained checkpoint), a ConfigError saying why without."""
        ok, why = nerfacc_status(device)
        if ok:
            return cls
        if fallback:
            return TorchGridEstimator
        raise ConfigError(f"sampler nerfacc cannot run: {why}; use sampler torch_grid (the same algorithm in torch) "
                          "or auto", ("sampler",))

    def __init__(self, cfg: RenderConfig, grid: OccupancyGrid, occ_scale: float = 1.0) -> None:
        super().__init__(cfg, grid, occ_scale)
        import nerfacc

        self.estimator = nerfacc.OccGridEstimator(
            roi_aabb=grid.aabb.detach().cpu(), resolution=grid.resolution.tolist(), levels=1
        ).to(grid.occs.device)
        self.grid_changed()

    def grid_changed(self) -> None:
        """Point nerfacc's estimator at the grid's tensors (no copy)."""
        self.estimator.aabbs = self.grid.aabb.reshape(1, 6)
        self.estimator.occs = self.grid.occs
        self.estimator.binaries = self.grid.binaries.view(self.estimator.binaries.shape)

    @torch.no_grad()
    def update_grid(self, step: int, density_fn: DensityFn, generator: torch.Generator | None = None) -> None:
        """``OccGridEstimator.update_every_n_steps`` (random numbers from torch's generator of the
        grid's device, not ``generator``)."""
        cfg = self.cfg
        occ_eval_fn = self.occ_eval_fn(density_fn)
        self.estimator.train()
        self.estimator.update_every_n_steps(
            step=step,
            occ_eval_fn=lambda x: occ_eval_fn(x).reshape(-1, 1),
            occ_thre=cfg.occ_thre,
            ema_decay=cfg.grid_ema_decay,
            warmup_steps=cfg.grid_warmup,
            n=cfg.grid_update_every,
        )
        if step % cfg.grid_update_every == 0:  # nerfacc made a new binaries: the grid takes it
            self.grid.binaries = self.estimator.binaries.view(self.grid.binaries.shape)

    @torch.no_grad()
    def march(self, rays: Rays, density_fn: DensityFn, train: bool,
              generator: torch.Generator | None = None) -> Samples:
        """``OccGridEstimator.sampling`` over each ray's [near, far] (stratified iff ``train and cfg.perturb``).

        The density pre-pass (early stop / alpha threshold) queries ``density_fn`` at sample
        midpoints and scales it by ``|direction|``, as the torch path does. From the interval
        list on, rendering is the same code as ``torch_grid``'s (``Renderer``).

        Returns:
            packed Samples: ray_indices [n], t_starts [n], t_ends [n]; n_queries counts the
            points the pre-pass sent to ``density_fn``.
        """
        cfg = self.cfg
        origins, directions = rays.origins, rays.directions
        dir_norm = directions.norm(dim=-1)
        queried = [0]

        def nerfacc_sigma_fn(t_starts: Tensor, t_ends: Tensor, ray_indices: Tensor) -> Tensor:
            queried[0] += t_starts.shape[0]
            mids = origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * directions[ray_indices]
            return density_fn(mids) * dir_norm[ray_indices]

        prepass = self.early_stop()
        self.estimator.eval()
        ray_indices, t_starts, t_ends = self.estimator.sampling(
            origins.contiguous(),
            directions.contiguous(),
            sigma_fn=nerfacc_sigma_fn if prepass else None,
            t_min=rays.near.reshape(-1).contiguous(),
            t_max=rays.far.reshape(-1).contiguous(),
            render_step_size=cfg.render_step_size,
            early_stop_eps=cfg.early_stop_eps,
            alpha_thre=0.0,
            stratified=bool(train and cfg.perturb),
        )
        return Samples(ray_indices=ray_indices.long(), t_starts=t_starts, t_ends=t_ends, n_queries=queried[0])


class AutoGridEstimator(OccupancyGridEstimator):
    """``--sampler auto``: ``nerfacc`` when the run is on CUDA and nerfacc's extension builds,
    otherwise ``torch_grid`` (one warning line when a CUDA run's build failed, saying why)."""

    name = "auto"
    culls = True  # torch_grid culls; where auto means nerfacc, NerfaccEstimator refuses it

    @classmethod
    def resolve(cls, device: torch.device, warn: Callable[[str], None], fallback: bool = False) -> type:
        ok, why = nerfacc_status(device)
        if ok:
            return NerfaccEstimator
        if device.type == "cuda":  # on a CPU run torch_grid is simply what auto means
            warn(f"--sampler auto falls back to torch_grid: {why}")
        return TorchGridEstimator
