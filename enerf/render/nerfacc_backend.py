"""The nerfacc path: ``nerfacc.OccGridEstimator`` marching and ``nerfacc.rendering`` (CUDA only).

nerfacc is imported lazily, inside these functions: its CUDA extension JIT-compiles on first
use, which needs a CUDA device, the CUDA toolkit (``nvcc`` / ``CUDA_HOME``) and a compiler
setting nerfacc's sources accept. ``nerfacc_status`` tries that once per process and says
why it failed; the dispatcher (``renderer.py``) falls back to ``torch_grid`` under ``auto``.

The estimator's state is kept in enerf's ``OccupancyGrid`` (same cell layout: one level,
``binaries[0, ix, iy, iz]``), so a grid trained here renders with ``torch_grid`` on a CPU
and the other way round.

Only ``enerf/render/`` imports nerfacc.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from .marching import SigmaFn
from .occupancy_grid import OccEvalFn, OccupancyGrid

__all__ = ["nerfacc_status", "NerfaccGrid"]


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


class NerfaccGrid:
    """An ``OccGridEstimator`` mirroring an ``OccupancyGrid`` (marching + updates on CUDA).

    Args:
        grid: the state; read at construction and written back after every update.
    """

    def __init__(self, grid: OccupancyGrid) -> None:
        import nerfacc

        self.grid = grid
        self.estimator = nerfacc.OccGridEstimator(
            roi_aabb=grid.aabb.detach().cpu(), resolution=grid.resolution.tolist(), levels=1
        ).to(grid.occs.device)
        self.load_from_grid()

    def load_from_grid(self) -> None:
        """Copy the grid's occupancy into the estimator."""
        self.estimator.aabbs.copy_(self.grid.aabb.reshape(1, 6))
        self.estimator.occs.copy_(self.grid.occs)
        self.estimator.binaries = self.grid.binaries.reshape(self.estimator.binaries.shape).clone()

    def _store_to_grid(self) -> None:
        self.grid.occs.copy_(self.estimator.occs)
        self.grid.binaries = self.estimator.binaries.reshape(self.grid.binaries.shape).clone()

    @torch.no_grad()
    def update(self, step: int, occ_eval_fn: OccEvalFn, occ_thre: float, ema_decay: float, warmup_steps: int, n: int) -> None:
        """``OccGridEstimator.update_every_n_steps`` (random numbers from torch's CUDA generator)."""
        self.estimator.train()
        self.estimator.update_every_n_steps(
            step=step,
            occ_eval_fn=lambda x: occ_eval_fn(x).reshape(-1, 1),
            occ_thre=occ_thre,
            ema_decay=ema_decay,
            warmup_steps=warmup_steps,
            n=n,
        )
        if step % n == 0:
            self._store_to_grid()

    @torch.no_grad()
    def sample(
        self,
        origins: Tensor,
        directions: Tensor,
        near: Tensor,
        far: Tensor,
        dir_norm: Tensor,
        sigma_fn: SigmaFn | None,
        step_size: float,
        early_stop_eps: float,
        alpha_thre: float,
        stratified: bool,
    ) -> tuple[Tensor, Tensor, Tensor, int]:
        """``OccGridEstimator.sampling`` over each ray's [near, far].

        The density pre-pass (early stop / alpha threshold) queries ``sigma_fn`` at sample
        midpoints and scales it by ``|direction|``, as the torch path does.

        Returns:
            ray_indices [n], t_starts [n], t_ends [n], and the number of points the
            pre-pass sent to ``sigma_fn``.
        """
        queried = [0]

        def nerfacc_sigma_fn(t_starts: Tensor, t_ends: Tensor, ray_indices: Tensor) -> Tensor:
            queried[0] += t_starts.shape[0]
            mids = origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * directions[ray_indices]
            return sigma_fn(mids) * dir_norm[ray_indices]

        self.estimator.eval()
        ray_indices, t_starts, t_ends = self.estimator.sampling(
            origins.contiguous(),
            directions.contiguous(),
            sigma_fn=nerfacc_sigma_fn if sigma_fn is not None and (early_stop_eps > 0 or alpha_thre > 0) else None,
            t_min=near.reshape(-1).contiguous(),
            t_max=far.reshape(-1).contiguous(),
            render_step_size=step_size,
            early_stop_eps=early_stop_eps,
            alpha_thre=alpha_thre,
            stratified=stratified,
        )
        return ray_indices.long(), t_starts, t_ends, queried[0]

    @staticmethod
    def render(
        t_starts: Tensor,
        t_ends: Tensor,
        ray_indices: Tensor,
        n_rays: int,
        rgb_sigma: tuple[Tensor, Tensor],
        dir_norm: Tensor,
        white_bkgd: bool,
    ) -> dict[str, Tensor]:
        """``nerfacc.rendering`` of already-queried samples.

        Returns:
            dict with rgb [n_rays, 3], depth [n_rays] (sum of w_i * t_mid_i, as the torch
            path), acc [n_rays] and weights [n_samples].
        """
        import nerfacc

        rgb, sigma = rgb_sigma
        scaled = sigma * dir_norm[ray_indices]
        colors, opacities, _, extras = nerfacc.rendering(
            t_starts,
            t_ends,
            ray_indices=ray_indices,
            n_rays=n_rays,
            rgb_sigma_fn=lambda *_: (rgb, scaled),
            render_bkgd=torch.ones(3, device=rgb.device, dtype=rgb.dtype) if white_bkgd else None,
        )
        t_mid = (0.5 * (t_starts + t_ends))[:, None]
        depth = nerfacc.accumulate_along_rays(extras["weights"], t_mid, ray_indices=ray_indices, n_rays=n_rays)
        return {"rgb": colors, "depth": depth[:, 0], "acc": opacities[:, 0], "weights": extras["weights"]}
