"""Shared pytest settings and fixtures: deterministic, one torch thread for the 2-core CI machine.

Two tiers, one folder each; ``python3 -m pytest -q`` (the README's command) runs both:

    tests/unit  each module's tests quick (< 90 s in all on 2 cores): ``python3 -m pytest -q tests/unit``
    tests/e2e   end-to-end runs: the CLIs (in process and as subprocesses), training runs, the browser,
                the real scenes in ../shared/data (skipped where absent), the GPU checks

Fixtures shared by both live here; helpers both import (``nerf_pytorch_llff``) live beside this
file (pyproject's pytest ``pythonpath``).

Tests run with the defaults users get: ``enerf train`` without ``--config`` fills what no flag
sets from the device's preset (``enerf.config.presets``; on a CPU the 10-minute settings of
configs/fern_cpu.txt). A test that trains a tiny network over the built-in defaults says so with
``--preset none`` beside its tiny flags, as a user would."""

import torch

# One thread in process, whatever the order the tests run in: the networks are tiny, and on a loaded
# 2-core machine two threads made them much slower (test_mesh's training: 160 s with two, 8.7 s with one).
torch.set_num_threads(1)

import os  # noqa: E402

# Under pytest-xdist (pyproject's addopts: two workers on 2 cores) the CLIs the tests start as subprocesses
# use one thread too, so that two of them at once do not oversubscribe the cores.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from enerf.download import NO_DOWNLOAD_ENV  # noqa: E402

# No test reaches the network: enerf's one download (LPIPS' AlexNet weights, enerf.download) is off for the
# whole session, in process and in every subprocess the tests start (tests/unit/test_download.py lifts it
# for its local server only).
os.environ[NO_DOWNLOAD_ENV] = "1"

# Real scenes (LLFF fern, Blender lego) live in ../shared/data beside the checkout (or where
# ENERF_SHARED_DATA points, e.g. from a git worktree elsewhere); a user's fresh clone has none,
# so every test that uses them skips.
SHARED_DATA = Path(os.environ.get("ENERF_SHARED_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (skips the test when it is absent)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} not found: real scenes are only beside the development checkout")
    return SHARED_DATA


def shared_scene(shared_data: Path, folder: str, marker: str) -> Path:
    """``shared_data / folder`` when it holds ``marker``, else the test is skipped."""
    path = shared_data / folder
    if not (path / marker).is_file():
        pytest.skip(f"{path} has no {marker}")
    return path


@pytest.fixture
def fern_dir(shared_data) -> Path:
    """The LLFF release's fern (``poses_bounds.npy``, ``images_4/``, ``images_8/``), or skip."""
    return shared_scene(shared_data, "nerf_llff_data/fern", "poses_bounds.npy")


@pytest.fixture
def fox_dir(shared_data) -> Path:
    """instant-ngp's fox capture (``transforms.json``, 50 of its 67 photos), or skip."""
    return shared_scene(shared_data, "nerfstudio/fox", "transforms.json")


# ----------------------------------------------------------------------------- tiny NeRF runs


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory) -> Path:
    """A tiny synthetic forward-facing scene (8 views of 40 x 30, seed 1), made once per module."""
    from enerf.synthetic.scene import make_synthetic_scene

    return make_synthetic_scene(tmp_path_factory.mktemp("scene") / "tiny", n_views=8, width=40, height=30, seed=1)


@pytest.fixture
def train_metrics():
    """``train_metrics(scene_dir, basedir, expname, iters, *flags)``: run ``enerf train`` in
    process and return the run's metrics.json as a dict."""
    import json

    from enerf.cli import main

    def train(scene_dir: Path, basedir: Path, expname: str, iters: int, *flags: str) -> dict:
        argv = ["train", "--preset", "none", "--datadir", str(scene_dir), "--basedir", str(basedir), "--expname", expname,
                "--iters", str(iters), *flags]
        assert main(argv) == 0
        return json.loads((basedir / expname / "metrics.json").read_text())

    return train


# ----------------------------------------------------------------------------- rays, grids, fields


@pytest.fixture
def random_rays():
    """``random_rays(n, seed)``: Rays [n] starting near z = -1.5 heading roughly +z through the
    box [-1, 1]^3 (NDC-like), near in [0, 0.2), far in [1.3, 1.5)."""
    from enerf.cameras.rays import Rays

    def make(n: int, seed: int) -> Rays:
        g = torch.Generator().manual_seed(seed)
        origins = torch.cat([torch.rand(n, 2, generator=g) * 1.6 - 0.8, torch.full((n, 1), -1.5)], dim=-1)
        directions = torch.cat([torch.randn(n, 2, generator=g) * 0.3, torch.full((n, 1), 2.0)], dim=-1)
        return Rays(
            origins=origins,
            directions=directions,
            viewdirs=directions / directions.norm(dim=-1, keepdim=True),
            near=torch.rand(n, 1, generator=g) * 0.2,
            far=1.3 + torch.rand(n, 1, generator=g) * 0.2,
        )

    return make


@pytest.fixture
def random_grid():
    """``random_grid(resolution, p, seed)``: an OccupancyGrid over [-1, 1]^3 whose cells are
    occupied with probability ``p``."""
    from enerf.render.occupancy_grid import OccupancyGrid

    def make(resolution, p: float, seed: int) -> OccupancyGrid:
        grid = OccupancyGrid([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0], resolution)
        g = torch.Generator().manual_seed(seed)
        grid.binaries = torch.rand(grid.binaries.shape, generator=g) < p
        return grid

    return make


@pytest.fixture
def smooth_field():
    """``smooth_field()``: the fields {"coarse": AnalyticField} of a smooth analytic field
    (softplus density, sigmoid colour)."""
    from enerf.fields import AnalyticField

    def make() -> dict:
        def sigma(points):
            return torch.nn.functional.softplus(4 * torch.sin(3 * points[..., 0]) + 3 * torch.cos(2 * points[..., 1]) - 1)

        return {"coarse": AnalyticField(sigma, lambda points, viewdirs: torch.sigmoid(2 * points + viewdirs))}

    return make


@pytest.fixture(scope="module")
def viewer_runs(tmp_path_factory):
    """Two tiny runs (vanilla, row) of one synthetic forward-facing scene, 32 x 24 pixels: {root, scene, a, b}
    (the viewer's tests and the camera path files')."""
    from enerf.synthetic.scene import make_synthetic_scene
    from helpers import train_tiny

    root = tmp_path_factory.mktemp("viewer")
    scene = make_synthetic_scene(root / "scene", n_views=8, width=32, height=24, seed=1)
    a = train_tiny(scene, root / "runs", "vanilla", 4)
    b = train_tiny(scene, root / "runs", "row", 4, "--conditioning", "row")
    return {"root": root, "scene": scene, "a": a, "b": b}
