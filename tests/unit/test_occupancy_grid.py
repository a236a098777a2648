"""The occupancy grid: its update rule (against nerfacc's estimator) and occlusion culling."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from enerf.config import RenderConfig
from enerf.cameras.rays import Rays
from enerf.synthetic.scene import make_synthetic_scene
from enerf.errors import ConfigError
from enerf.fields import AnalyticField
from enerf.render import build_renderer
from enerf.render.occupancy_grid import OccupancyGrid

CPU = torch.device("cpu")


def test_grid_update_matches_nerfacc_estimator_rule():
    nerfacc = pytest.importorskip("nerfacc")
    aabb = [-1.0, -2.0, 0.0, 1.0, 2.0, 3.0]
    ours = OccupancyGrid(aabb, 8)
    theirs = nerfacc.OccGridEstimator(roi_aabb=aabb, resolution=8, levels=1)

    def occ_fn(points):
        """Constant in every cell of the 8^3 grid, so the jitter inside a cell does not matter."""
        lo, hi = torch.tensor(aabb[:3]), torch.tensor(aabb[3:])
        ijk = ((points - lo) / (hi - lo) * 8).floor().clamp(0, 7)
        return 0.02 * torch.sin(ijk @ torch.tensor([1.3, 0.7, 2.1])) ** 2

    for step, decay in ((0, 0.95), (1, 0.5)):
        scale = 1.0 if step == 0 else 0.3  # the second update lowers occupancy: the EMA must keep the max
        ours.update(step, lambda x: scale * occ_fn(x), occ_thre=0.01, ema_decay=decay, warmup_steps=10)
        theirs._update(step, lambda x: scale * occ_fn(x)[:, None], occ_thre=0.01, ema_decay=decay, warmup_steps=10)
        np.testing.assert_allclose(ours.occs.numpy(), theirs.occs.numpy(), rtol=1e-6)
        assert torch.equal(ours.binaries, theirs.binaries[0])
    assert 0 < int(ours.binaries.sum()) < 512


def test_grid_update_keeps_the_largest_value_of_a_cell_drawn_twice():
    """Past warm-up, cells are drawn at random (uniform ones plus occupied ones), so a cell can
    be drawn twice with different jitter: it keeps the larger of its values, recomputed here
    from the points the field was asked about (nerfacc keeps whichever write lands last, which
    on CPU changed from run to run)."""
    aabb = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    grid = OccupancyGrid(aabb, 4)
    grid.occs.fill_(0.5)
    grid.binaries.fill_(True)  # every cell occupied: the occupied draws overlap the uniform ones
    asked = []

    def occ_fn(points):
        asked.append(points.clone())
        return points[:, 0] * 3.0  # differs between two points of one cell

    before = grid.occs.clone()
    grid.update(10, occ_fn, occ_thre=0.01, ema_decay=0.5, warmup_steps=0, generator=torch.Generator().manual_seed(3))
    points = torch.cat(asked).numpy()
    cells = np.floor(points * 4).astype(int) @ np.array([16, 4, 1])  # x-major flat index of a 4^3 grid
    expected = before.numpy().copy()
    drawn = {}
    for cell, value in zip(cells, np.maximum(before.numpy()[cells] * 0.5, points[:, 0] * 3.0)):
        drawn.setdefault(cell, []).append(value)
    for cell, values in drawn.items():
        expected[cell] = max(values)
    assert any(len(v) > 1 and max(v) != v[-1] for v in drawn.values())  # the case that matters occurs
    np.testing.assert_allclose(grid.occs.numpy(), expected, rtol=1e-6)


def test_occlusion_culling_empties_the_cells_behind_an_opaque_wall():
    """Rays along +z through a box with a dense wall at z in [0, 0.25) (two cells deep; its first
    cell already absorbs all light): after a training render and a grid update with
    --cull_occluded, every cell behind the wall's first cell is empty (dense as it is), every
    cell up to it stays occupied; without culling all stay. Once the wall is gone, the next
    render and update bring the cells behind it back."""
    n = 16  # one ray through the middle of every (x, y) column of a 16^3 grid over [-1, 1]^3
    xy = (torch.stack(torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij"), -1).reshape(-1, 2) + 0.5) / n * 2 - 1
    origins = torch.cat([xy, torch.full((n * n, 1), -1.5)], dim=-1)
    directions = torch.tensor([[0.0, 0.0, 1.0]]).expand(n * n, 3)
    rays = Rays(origins=origins, directions=directions, viewdirs=directions, near=torch.zeros(n * n, 1),
                far=torch.full((n * n, 1), 3.0))
    wall = {"density": 1000.0}

    def sigma(points):  # 1 everywhere (occupied: 1 * step > occ_thre), the wall far denser
        inside = (points[..., 2] >= 0.0) & (points[..., 2] < 0.25)
        return torch.where(inside, wall["density"], 1.0)

    fns = {"coarse": AnalyticField(sigma, lambda p, v: torch.full(p.shape, 0.5))}
    behind = (torch.arange(n) + 0.5) / n * 2 - 1 > 0.125  # cells behind the wall's first cell (z in [0, 0.125))
    for cull in (True, False):
        cfg = RenderConfig(sampler="torch_grid", render_step_size=1 / 64, early_stop_eps=1e-2, cull_occluded=cull,
                           grid_warmup=100, occ_thre=0.01)
        renderer = build_renderer(cfg, CPU, grid=OccupancyGrid([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0], n).fill(True))
        wall["density"] = 1000.0
        renderer.render_rays(rays, fns, train=True, generator=torch.Generator().manual_seed(0))
        renderer.update(0, fns, torch.Generator().manual_seed(1))
        occupied = renderer.estimator.grid.binaries  # [x, y, z]
        assert bool(occupied[:, :, ~behind].all())  # in front of the wall and its first cell: reached
        assert bool((~occupied[:, :, behind]).all()) if cull else bool(occupied.all())
        renderer.update(16, fns, torch.Generator().manual_seed(2))  # no render in between: verdict kept
        assert bool((~renderer.estimator.grid.binaries[:, :, behind]).all()) if cull else bool(renderer.estimator.grid.binaries.all())
        wall["density"] = 1.0  # the wall is gone: rays reach the space behind it again
        renderer.render_rays(rays, fns, train=True, generator=torch.Generator().manual_seed(3))
        renderer.update(32, fns, torch.Generator().manual_seed(4))
        assert bool(renderer.estimator.grid.binaries.all())


def test_cull_occluded_needs_torch_grid_with_early_stop(random_grid):
    grid = random_grid(4, 1.0, seed=0)
    with pytest.raises(ConfigError, match="cull_occluded needs sampler torch_grid and early_stop_eps > 0"):
        build_renderer(RenderConfig(sampler="torch_grid", early_stop_eps=0.0, cull_occluded=True), CPU, grid=grid)


def test_cli_cull_occluded_without_early_stop_is_one_line_and_exit_2(tmp_path):
    scene = make_synthetic_scene(tmp_path / "s", n_views=3, width=16, height=12, seed=0)
    proc = subprocess.run(
        [sys.executable, "-m", "enerf.cli", "train", "--renderer", "torch_grid", "--cull_occluded", "--early_stop_eps", "0",
         "--device", "cpu", "--datadir", str(scene), "--basedir", str(tmp_path / "runs"), "--llffhold", "0", "--factor", "1"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--cull_occluded needs" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing half-written


def test_grid_state_saved_before_culling_loads_with_every_cell_visible(random_grid):
    grid = random_grid(4, 0.5, seed=1)
    old = {k: v for k, v in grid.state_dict().items() if k not in ("seen", "visible")}
    fresh = OccupancyGrid([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0], 4)
    fresh.visible.fill_(False)
    fresh.load_state_dict(old)
    assert bool(fresh.visible.all()) and torch.equal(fresh.binaries, grid.binaries)
