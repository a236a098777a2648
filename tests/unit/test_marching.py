"""Occupancy-grid ray marching (torch_grid) against a brute-force lattice walk and analytic geometry."""

from __future__ import annotations

import math

import numpy as np
import torch

from enerf.cameras.rays import Rays
from enerf.render.marching import lattice_transmittance, march_rays
from enerf.render.occupancy_grid import OccupancyGrid, ray_aabb_intersect


def _brute_force_march(rays: Rays, grid: OccupancyGrid, dt: float) -> list[list[float]]:
    """Lattice t_k = near + k dt kept when the midpoint is in the box, in [near, far], in an occupied cell."""
    lo_box, hi_box = grid.aabb[:3].double().numpy(), grid.aabb[3:].double().numpy()
    res = grid.resolution.numpy()
    occ = grid.binaries.numpy()
    out = []
    for o, d, near, far in zip(*(t.double().numpy() for t in (rays.origins, rays.directions, rays.near, rays.far))):
        kept = []
        for k in range(int((far[0] - near[0]) / dt) + 2):
            t0 = near[0] + k * dt
            mid = t0 + 0.5 * dt
            if mid >= far[0]:
                break
            x = o + mid * d
            if np.all(x >= lo_box) and np.all(x < hi_box):
                ijk = np.minimum(((x - lo_box) / (hi_box - lo_box) * res).astype(int), res - 1)
                if occ[tuple(ijk)]:
                    kept.append(t0)
        out.append(kept)
    return out


def test_march_rays_matches_brute_force_lattice(random_rays, random_grid):
    rays = random_rays(40, seed=3)
    grid = random_grid((12, 10, 14), 0.3, seed=4)
    dt = 1 / 50
    ray_indices, t_starts, t_ends = march_rays(rays.origins, rays.directions, rays.near, rays.far, grid, dt)
    expected = _brute_force_march(rays, grid, dt)
    assert sum(map(len, expected)) > 100
    for r, kept in enumerate(expected):
        np.testing.assert_allclose(t_starts[ray_indices == r].numpy(), kept, atol=1e-5)
    np.testing.assert_allclose((t_ends - t_starts).numpy(), dt, rtol=1e-5)
    assert bool((ray_indices[1:] >= ray_indices[:-1]).all())


def test_lattice_transmittance_matches_brute_force(random_rays, random_grid):
    """Transmittance at every lattice step (occupied cell or not) = exp(-sum of the optical
    thickness of the ray's rendered samples in front of it), summed by hand per ray."""
    rays = random_rays(30, seed=7)
    grid = random_grid((9, 11, 10), 0.4, seed=8)
    dt = 1 / 40
    ray_indices, t_starts, _ = march_rays(rays.origins, rays.directions, rays.near, rays.far, grid, dt)
    thickness = torch.rand(ray_indices.shape[0], generator=torch.Generator().manual_seed(9)) * 0.5
    points, trans = lattice_transmittance(rays.origins, rays.directions, rays.near, rays.far, grid.aabb, dt, None,
                                          ray_indices, t_starts, thickness)
    lattice = _brute_force_march(rays, random_grid((9, 11, 10), 1.0, seed=0), dt)  # every step in the box
    expected_points, expected_trans = [], []
    for r, steps in enumerate(lattice):
        mine = ray_indices == r
        for t0 in steps:
            expected_points.append((rays.origins[r] + (t0 + dt / 2) * rays.directions[r]).numpy())
            expected_trans.append(math.exp(-float(thickness[mine & (t_starts < t0 - dt / 2)].sum())))
    assert len(expected_trans) > 300 and min(expected_trans) < 0.05 < 0.9 < max(expected_trans)
    np.testing.assert_allclose(points.numpy(), np.array(expected_points), atol=1e-5)
    np.testing.assert_allclose(trans.numpy(), expected_trans, rtol=1e-5, atol=1e-7)


def test_ray_aabb_intersect_hand_computed():
    aabb = torch.tensor([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0])
    origins = torch.tensor([[0.0, 0.0, -3.0], [0.5, 2.0, 0.0], [0.0, 0.0, 0.0]])
    directions = torch.tensor([[0.0, 0.0, 2.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    t_min, t_max, hit = ray_aabb_intersect(origins, directions, aabb)
    assert hit.tolist() == [True, False, True]
    np.testing.assert_allclose(t_min[[0, 2]].numpy(), [1.0, -1.0])
    np.testing.assert_allclose(t_max[[0, 2]].numpy(), [2.0, 1.0])
