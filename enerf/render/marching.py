"""Ray marching through an occupancy grid with early stop, in plain torch.

The algorithm is nerfacc's ``OccGridEstimator.sampling``, written with torch
ops so that it runs on CPU (and on CUDA without nerfacc's extension):

1. **March** (``march_rays``): each ray steps from its ``near`` in steps of ``step_size``
   (the lattice ``t_k = near + k * step_size``, shifted by one uniform jitter per ray while
   training); step k is kept when its midpoint lies inside the grid's box and ray range, in
   an occupied cell. Empty cells cost a grid lookup, never a network query.
2. **Early stop** (optional): samples behind transmittance ``< early_stop_eps`` (or with
   opacity ``< alpha_thre``) are dropped, either as nerfacc does (``visibility_mask``: one
   density pre-pass without gradients over all marched samples, then the rendering pass) or
   front to back (``visible_front_to_back``: density in rounds of growing size, stopping each
   ray at its early stop, so samples far behind it are never sent to the field).

Rendering the samples is the compositor's (``compositing.composite_packed``); its segment sums
(``exclusive_segment_sum``) also give the early stop its transmittance here.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import torch
from torch import Tensor

from .compositing import exclusive_segment_sum, packed_transmittance, segment_starts
from .occupancy_grid import OccupancyGrid, ray_aabb_intersect

__all__ = [
    "march_rays",
    "visibility_mask",
    "visible_front_to_back",
    "FrontToBack",
    "ray_lattice",
    "lattice_transmittance",
]

_LATTICE_BUDGET = 1 << 22  # candidate steps examined at once (rays are marched in slices)


@torch.no_grad()
def ray_lattice(
    origins: Tensor, directions: Tensor, near: Tensor, far: Tensor, aabb: Tensor, step_size: float, jitter: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """The marching lattice of each ray: steps ``[t_k, t_k + step_size)`` with
    ``t_k = start + k * step_size``, ``k = k_first ... k_first + count - 1`` (the steps whose
    midpoint lies inside ``aabb`` and the ray's [near, far]), occupied cells or not.

    Args: as ``march_rays`` (``aabb``: Tensor  # [6]).

    Returns:
        start: Tensor  # [n_rays] lattice origin (near, shifted by the jitter)
        k_first: Tensor  # [n_rays] float, index of the first step inside
        count: Tensor  # [n_rays] int64, steps inside (0 for rays that miss the box)
    """
    if step_size <= 0:
        raise ValueError(f"step_size must be positive, got {step_size}")
    near, far = near.reshape(-1), far.reshape(-1)
    t_min, t_max, hit = ray_aabb_intersect(origins, directions, aabb)
    lo = torch.maximum(t_min, near)
    hi = torch.minimum(t_max, far)
    start = near if jitter is None else near + jitter.to(near) * step_size
    # Step k is inside iff its midpoint start + (k + 1/2) dt lies in [lo, hi).
    k_first = torch.ceil((lo - start) / step_size - 0.5).clamp(min=0)
    k_end = torch.ceil((hi - start) / step_size - 0.5)
    count = torch.where(hit & (hi > lo), (k_end - k_first).clamp(min=0), torch.zeros_like(k_end)).long()
    return start, k_first, count


@torch.no_grad()
def march_rays(
    origins: Tensor,
    directions: Tensor,
    near: Tensor,
    far: Tensor,
    grid: OccupancyGrid,
    step_size: float,
    jitter: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Uniform steps along each ray that fall in occupied cells (nerfacc ``traverse_grids``).

    Args:
        origins, directions: Tensor  # [n_rays, 3]
        near, far: Tensor  # [n_rays, 1] ray range
        grid: occupancy grid; steps whose midpoint is outside its box are skipped.
        step_size: step in units of t.
        jitter: Tensor  # [n_rays] in [0, 1): shifts each ray's lattice start by
            ``jitter * step_size`` (nerfacc's ``stratified``); None: no shift.

    Returns:
        ray_indices: Tensor  # [n_samples] int64, non-decreasing
        t_starts: Tensor  # [n_samples] sorted within each ray
        t_ends: Tensor  # [n_samples] = t_starts + step_size
    """
    start, k_first, count = ray_lattice(origins, directions, near, far, grid.aabb, step_size, jitter)
    parts: list[tuple[Tensor, Tensor]] = []
    n_rays = origins.shape[0]
    max_count = int(count.max()) if n_rays else 0
    if max_count == 0:
        empty = origins.new_zeros(0)
        return torch.zeros(0, dtype=torch.long, device=origins.device), empty, empty
    rays_per_slice = max(1, _LATTICE_BUDGET // max_count)
    for first in range(0, n_rays, rays_per_slice):
        sl = slice(first, first + rays_per_slice)
        width = int(count[sl].max())
        if width == 0:
            continue
        steps = torch.arange(width, device=origins.device)
        valid = steps < count[sl, None]  # [r, width]
        ray_local, step = valid.nonzero(as_tuple=True)
        ray = ray_local + first
        t0 = start[ray] + (k_first[ray] + step) * step_size
        mids = origins[ray] + (t0 + 0.5 * step_size)[:, None] * directions[ray]
        keep = grid.occupied(mids)
        parts.append((ray[keep], t0[keep]))
    ray_indices = torch.cat([p[0] for p in parts]) if parts else torch.zeros(0, dtype=torch.long, device=origins.device)
    t_starts = torch.cat([p[1] for p in parts]) if parts else origins.new_zeros(0)
    return ray_indices, t_starts, t_starts + step_size


@torch.no_grad()
def lattice_transmittance(
    origins: Tensor,
    directions: Tensor,
    near: Tensor,
    far: Tensor,
    aabb: Tensor,
    step_size: float,
    jitter: Tensor | None,
    ray_indices: Tensor,
    t_starts: Tensor,
    sigma_delta: Tensor,
) -> tuple[Tensor, Tensor]:
    """Transmittance at the midpoint of every lattice step of every ray, in an occupied cell or not.

    The rays were marched with the same lattice (``march_rays`` with the same ``jitter``) and
    their samples in occupied cells were rendered; light is lost only in those samples, so
    before lattice step k the transmittance is ``exp(-sum sigma_delta)`` over the ray's
    rendered samples in front of k. Where a ray was not queried further (its samples behind
    an early stop) this is an upper bound, below the early stop already.

    Args:
        origins, directions, near, far, aabb, step_size, jitter: as ``ray_lattice``.
        ray_indices: Tensor  # [n_samples] the rendered samples (packed, sorted by ray and t)
        t_starts: Tensor  # [n_samples] their starts, on the lattice
        sigma_delta: Tensor  # [n_samples] their optical thickness sigma * delta * |direction|

    Returns:
        points: Tensor  # [m, 3] midpoints of all lattice steps
        trans: Tensor  # [m] transmittance in front of each
    """
    start, k_first, count = ray_lattice(origins, directions, near, far, aabb, step_size, jitter)
    width = int(count.max()) if count.numel() else 0
    valid = torch.arange(width, device=origins.device) < count[:, None]  # [n_rays, width]
    ray, col = valid.nonzero(as_tuple=True)
    thickness = torch.zeros(count.shape[0], width + 1, dtype=torch.float64, device=origins.device)
    if ray_indices.numel():
        sample_col = torch.round((t_starts - start[ray_indices]) / step_size - k_first[ray_indices]).long()
        thickness.index_put_((ray_indices, sample_col.clamp(0, width - 1) + 1), sigma_delta.double(), accumulate=True)
    before = torch.cumsum(thickness, dim=1)[:, :width]  # optical depth in front of each step
    t0 = start[ray] + (k_first[ray] + col) * step_size
    points = origins[ray] + (t0 + 0.5 * step_size)[:, None] * directions[ray]
    return points, torch.exp(-before[ray, col]).to(origins.dtype)


@torch.no_grad()
def visibility_mask(
    t_starts: Tensor,
    t_ends: Tensor,
    sigma: Tensor,
    ray_indices: Tensor,
    n_rays: int,
    dir_norm: Tensor,
    early_stop_eps: float,
    alpha_thre: float,
) -> Tensor:
    """nerfacc ``render_visibility_from_density``: ``T_i >= early_stop_eps`` and ``alpha_i >= alpha_thre``.

    Returns:
        Tensor  # [n_samples] bool
    """
    trans, alphas = packed_transmittance(t_starts, t_ends, sigma, ray_indices, n_rays, dir_norm)
    keep = trans >= early_stop_eps
    if alpha_thre > 0:
        keep &= alphas >= alpha_thre
    return keep


class FrontToBack(NamedTuple):
    """What ``visible_front_to_back`` returns.

    kept: Tensor  # [k] int64 indices of the visible samples, increasing (packed order)
    queried_index: Tensor  # [q] int64 indices of all samples whose density was read, increasing
    thickness: Tensor  # [q] their optical thickness sigma * delta * |direction|
    """

    kept: Tensor
    queried_index: Tensor
    thickness: Tensor

    @property
    def queried(self) -> int:
        """Points sent to the density function."""
        return int(self.queried_index.numel())


@torch.no_grad()
def visible_front_to_back(
    points: Tensor,
    t_starts: Tensor,
    t_ends: Tensor,
    ray_indices: Tensor,
    n_rays: int,
    dir_norm: Tensor,
    density_fn: Callable[[Tensor], Tensor],
    early_stop_eps: float,
    alpha_thre: float,
    block: int,
) -> FrontToBack:
    """The visible samples, found from the density alone, front to back in rounds.

    The density is read at the first ``block`` samples of every ray, then the next ``2 block``
    of the rays still visible (transmittance >= ``early_stop_eps``), then ``4 block``, and so
    on (few rounds: each one costs a pass of its own): samples well behind a ray's early stop
    are never sent to the field (Instant-NGP's compaction; a ray whose last visible sample is
    its L-th gets at most 2 L + ``block`` samples read). Transmittance only falls along a ray,
    so the samples kept are exactly those ``visibility_mask`` keeps given the same density.

    Args:
        points: Tensor  # [n_samples, 3] sample midpoints
        t_starts, t_ends: Tensor  # [n_samples]
        ray_indices: Tensor  # [n_samples] int64, non-decreasing
        dir_norm: Tensor  # [n_rays] |directions|
        density_fn: points [m, 3] -> density [m]
        block: samples per ray in the first round (>= 1); each later round doubles it

    Returns:
        FrontToBack: the visible samples (``kept``) and all samples read (``queried_index``,
        ``thickness``).
    """
    n = ray_indices.numel()
    if n == 0:
        empty = ray_indices.new_zeros(0)
        return FrontToBack(empty, empty, t_starts.new_zeros(0))
    starts, counts = segment_starts(ray_indices, n_rays)
    rank = torch.arange(n, device=ray_indices.device) - starts[ray_indices]  # position along the ray
    depth = torch.zeros(n_rays, dtype=torch.float64, device=ray_indices.device)  # optical depth so far
    alive = torch.ones(n_rays, dtype=torch.bool, device=ray_indices.device)
    stop_depth = -math.log(early_stop_eps) if early_stop_eps > 0 else math.inf
    rounds: list[tuple[Tensor, Tensor, Tensor]] = []  # index, visible, sigma_delta
    lo, size, most = 0, block, int(counts.max())
    while lo < most:
        index = torch.nonzero((rank >= lo) & (rank < lo + size) & alive[ray_indices])[:, 0]
        lo, size = lo + size, 2 * size
        if index.numel() == 0:
            break
        rays = ray_indices[index]
        sigma_delta = (density_fn(points[index]) * (t_ends[index] - t_starts[index]) * dir_norm[rays]).double()
        before = depth[rays] + exclusive_segment_sum(sigma_delta, rays, n_rays)
        visible = before <= stop_depth  # exp(-before) >= early_stop_eps
        if alpha_thre > 0:
            visible &= (1.0 - torch.exp(-sigma_delta)) >= alpha_thre
        depth.index_add_(0, rays, sigma_delta)
        alive &= depth <= stop_depth
        rounds.append((index, visible, sigma_delta))
    index, visible = torch.cat([r[0] for r in rounds]), torch.cat([r[1] for r in rounds])
    order = torch.argsort(index)  # all queried samples, in packed order
    thickness = torch.cat([r[2] for r in rounds])[order].to(t_starts.dtype)
    queried_index = index[order]
    return FrontToBack(queried_index[visible[order]], queried_index, thickness)
