"""A binary occupancy grid over the scene box, kept up to date from the field's density.

This is the state of nerfacc's ``OccGridEstimator`` (one level) in plain torch, with the same
update rule (Instant-NGP's, via nerfacc ``_update``):

* every ``n`` steps, evaluate ``occ_eval_fn`` at one random point inside each chosen cell;
  during the first ``warmup_steps`` steps the chosen cells are all cells, afterwards
  ``n_cells // 4`` uniformly drawn cells plus up to ``n_cells // 4`` of the occupied ones;
* ``occs[cell] = max(occs[cell] * ema_decay, occ)`` (an exponential moving maximum);
* ``binaries = occs > min(mean(occs), occ_thre)``;
* optionally (occlusion culling, not in nerfacc) ``binaries &= visible``, where a cell is
  visible when some training ray since the last update reached it with transmittance at least
  the early-stop threshold (``record_visibility``; cells no ray crossed keep their verdict).

Cells are indexed ``[ix, iy, iz]`` with ``ix = floor((x - xmin) / (xmax - xmin) * res_x)``,
as nerfacc's ``binaries[level, ix, iy, iz]``, so a grid converts to and from an
``OccGridEstimator`` by copying ``occs`` and ``binaries`` (see ``nerfacc_backend``).

The scene box for forward-facing (NDC) scenes is the NDC box the training rays sweep
(about [-1, 1]^3); for world-space scenes it is the box of the training rays' [near, far]
segments (``rays_aabb``).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor, nn

__all__ = ["OccupancyGrid", "ray_aabb_intersect", "rays_aabb", "OccEvalFn"]

OccEvalFn = Callable[[Tensor], Tensor]  # points [n, 3] -> occupancy [n] (density * step)

_EVAL_CHUNK = 1 << 16  # points per occ_eval_fn call during updates


def ray_aabb_intersect(origins: Tensor, directions: Tensor, aabb: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Slab test of rays against one box (nerfacc ``_ray_aabb_intersect`` for a single box).

    Args:
        origins: Tensor  # [n_rays, 3]
        directions: Tensor  # [n_rays, 3] (any length; t is in units of |directions|)
        aabb: Tensor  # [6] xmin, ymin, zmin, xmax, ymax, zmax

    Returns:
        t_min: Tensor  # [n_rays] entry parameter (may be negative when the origin is inside)
        t_max: Tensor  # [n_rays] exit parameter
        hit: Tensor  # [n_rays] bool, t_max > t_min and t_max > 0
    """
    # Directions parallel to a slab give +-inf for its two planes, which the min/max handle.
    with torch.no_grad():
        inv = 1.0 / directions
        t1 = (aabb[:3] - origins) * inv
        t2 = (aabb[3:] - origins) * inv
        lo = torch.minimum(t1, t2).nan_to_num(nan=-float("inf"))
        hi = torch.maximum(t1, t2).nan_to_num(nan=float("inf"))
        t_min = lo.max(dim=-1).values
        t_max = hi.min(dim=-1).values
        hit = (t_max > t_min) & (t_max > 0)
    return t_min, t_max, hit


def rays_aabb(origins: Tensor, directions: Tensor, near: Tensor, far: Tensor, margin: float = 0.0) -> Tensor:
    """The box spanned by the ray segments ``origins + t * directions``, t in [near, far].

    Segments are straight, so the box of their end points is the box of the segments.

    Args:
        origins, directions: Tensor  # [n_rays, 3]
        near, far: Tensor  # [n_rays, 1]
        margin: grow every side by this fraction of the box's extent.

    Returns:
        aabb: Tensor  # [6] xmin, ymin, zmin, xmax, ymax, zmax
    """
    with torch.no_grad():
        ends = torch.cat([origins + near * directions, origins + far * directions], dim=0)
        lo, hi = ends.min(dim=0).values, ends.max(dim=0).values
        pad = (hi - lo) * margin
        return torch.cat([lo - pad, hi + pad]).float()


class OccupancyGrid(nn.Module):
    """Binary occupancy over an axis-aligned box, as buffers (so it travels in a state_dict).

    Args:
        aabb: the box, [6] xmin, ymin, zmin, xmax, ymax, zmax.
        resolution: cells per axis (int: the same on all three).

    Buffers:
        aabb: Tensor  # [6]
        resolution: Tensor  # [3] int64
        occs: Tensor  # [n_cells] running occupancy (flattened [ix, iy, iz], C order)
        binaries: Tensor  # [res_x, res_y, res_z] bool, True where occupied
        seen: Tensor  # [n_cells] most transmittance a training ray had in the cell since the last
            update (-1: none crossed it); only written with occlusion culling
        visible: Tensor  # [n_cells] bool, some training ray reached the cell (occlusion culling)
    """

    def __init__(self, aabb: Tensor | Sequence[float], resolution: int | Sequence[int] = 64) -> None:
        super().__init__()
        res = [int(resolution)] * 3 if isinstance(resolution, int) else [int(r) for r in resolution]
        if len(res) != 3 or min(res) < 1:
            raise ValueError(f"resolution must be a positive int or three positive ints, got {resolution}")
        aabb = torch.as_tensor(aabb, dtype=torch.float32).reshape(6)
        if not bool((aabb[3:] > aabb[:3]).all()):
            raise ValueError(f"aabb must have max > min on every axis, got {aabb.tolist()}")
        self.register_buffer("aabb", aabb.clone())
        self.register_buffer("resolution", torch.tensor(res, dtype=torch.int64))
        n_cells = res[0] * res[1] * res[2]
        self.register_buffer("occs", torch.zeros(n_cells))
        self.register_buffer("binaries", torch.zeros(res, dtype=torch.bool))
        # Occlusion culling (update's visibility_eps): the most transmittance any training ray had
        # in each cell since the last update (-1: no ray crossed it), and whether a ray reached it.
        self.register_buffer("seen", torch.full((n_cells,), -1.0))
        self.register_buffer("visible", torch.ones(n_cells, dtype=torch.bool))

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """As ``nn.Module``'s; a state saved before occlusion culling existed has every cell visible."""
        state = dict(state_dict)
        state.setdefault("seen", torch.full_like(self.seen, -1.0))
        state.setdefault("visible", torch.ones_like(self.visible))
        return super().load_state_dict(state, strict=strict, assign=assign)

    @property
    def n_cells(self) -> int:
        return self.occs.numel()

    def fill(self, occupied: bool = True) -> "OccupancyGrid":
        """Mark every cell occupied (or empty); returns self."""
        self.binaries.fill_(bool(occupied))
        return self

    def cell_coords(self, flat: Tensor) -> Tensor:
        """Flat cell indices [n] -> integer cell coordinates [n, 3] (ix, iy, iz)."""
        ry, rz = int(self.resolution[1]), int(self.resolution[2])
        return torch.stack([flat // (ry * rz), (flat // rz) % ry, flat % rz], dim=-1)

    def cell_index(self, points: Tensor) -> tuple[Tensor, Tensor]:
        """Flat index of the cell holding each point, and whether the point is inside the box.

        Args:
            points: Tensor  # [n, 3]

        Returns:
            index: Tensor  # [n] int64 (clamped into the grid for points outside)
            inside: Tensor  # [n] bool
        """
        lo, hi = self.aabb[:3], self.aabb[3:]
        res = self.resolution.to(points.device)
        unit = (points - lo) / (hi - lo)
        inside = ((unit >= 0) & (unit < 1)).all(dim=-1)
        ijk = torch.minimum((unit * res).floor().clamp(min=0).long(), res - 1)
        index = (ijk[:, 0] * res[1] + ijk[:, 1]) * res[2] + ijk[:, 2]
        return index, inside

    def occupied(self, points: Tensor) -> Tensor:
        """Tensor  # [n] bool: the point lies inside the box in an occupied cell."""
        index, inside = self.cell_index(points)
        return self.binaries.reshape(-1)[index] & inside

    @torch.no_grad()
    def record_visibility(self, points: Tensor, trans: Tensor) -> None:
        """Note the transmittance training rays had at ``points`` [m, 3] (``trans`` [m]); the next
        ``update`` with ``visibility_eps > 0`` empties the cells no ray reached with at least that."""
        index, inside = self.cell_index(points)
        self.seen.scatter_reduce_(0, index[inside], trans[inside].to(self.seen.dtype), reduce="amax")

    def cell_points(self, flat: Tensor, jitter: Tensor) -> Tensor:
        """Points inside cells: ``aabb_min + (ijk + jitter) / res * extent``; jitter [n, 3] in [0, 1)."""
        res = self.resolution.to(jitter.device).to(jitter.dtype)
        unit = (self.cell_coords(flat).to(jitter.dtype) + jitter) / res
        return self.aabb[:3] + unit * (self.aabb[3:] - self.aabb[:3])

    @torch.no_grad()
    def update(
        self,
        step: int,
        occ_eval_fn: OccEvalFn,
        occ_thre: float = 0.01,
        ema_decay: float = 0.95,
        warmup_steps: int = 256,
        generator: torch.Generator | None = None,
        visibility_eps: float = 0.0,
    ) -> None:
        """One update of the occupancy (nerfacc ``OccGridEstimator._update``, one level).

        Args:
            step: training step (all cells are re-evaluated while ``step < warmup_steps``).
            occ_eval_fn: points [n, 3] -> occupancy [n] (nerfacc's examples: density * step size).
            generator: source of the cell choice and the jitter (default: torch's global one);
                numbers are drawn on the generator's device and moved to the grid's.
            visibility_eps: > 0: occlusion culling. A cell some training ray crossed since the
                last update (``record_visibility``) is visible iff one had transmittance >=
                ``visibility_eps`` there; cells no ray crossed keep their last verdict; only
                visible cells can be occupied. 0: every cell counts as visible.
        """
        device = self.occs.device
        gen_device = generator.device if generator is not None else device
        n_cells = self.n_cells
        if step < warmup_steps:
            cells = torch.arange(n_cells, device=device)
        else:
            n = n_cells // 4
            uniform = torch.randint(n_cells, (n,), generator=generator, device=gen_device).to(device)
            occupied = torch.nonzero(self.binaries.reshape(-1))[:, 0]
            if n < occupied.numel():
                pick = torch.randint(occupied.numel(), (n,), generator=generator, device=gen_device).to(device)
                occupied = occupied[pick]
            cells = torch.cat([uniform, occupied])
        cells = cells[self.occs[cells] >= 0.0]  # cells marked -1 (never seen) are left alone
        jitter = torch.rand((cells.numel(), 3), generator=generator, device=gen_device).to(device)
        points = self.cell_points(cells, jitter)
        occ = torch.cat(
            [occ_eval_fn(points[i : i + _EVAL_CHUNK]).reshape(-1) for i in range(0, points.shape[0], _EVAL_CHUNK)]
        ) if points.shape[0] else points.new_zeros(0)
        # nerfacc assigns by index, so a cell drawn twice keeps whichever of its values the write
        # order leaves (on CPU it changes from run to run: training was not reproducible); here
        # it keeps the larger one, one of nerfacc's outcomes, the same every run.
        updated = torch.maximum(self.occs[cells] * ema_decay, occ.to(self.occs.dtype))
        self.occs.scatter_reduce_(0, cells, updated, reduce="amax", include_self=False)
        seen = self.occs[self.occs >= 0]
        thre = torch.clamp(seen.mean(), max=occ_thre) if seen.numel() else self.occs.new_tensor(occ_thre)
        binaries = self.occs > thre
        if visibility_eps > 0:
            crossed = self.seen >= 0
            self.visible[crossed] = self.seen[crossed] >= visibility_eps
            self.seen.fill_(-1.0)
            binaries &= self.visible
        self.binaries = binaries.reshape(self.binaries.shape)

    def extra_repr(self) -> str:
        return f"resolution={self.resolution.tolist()}, aabb={[round(v, 4) for v in self.aabb.tolist()]}"
