"""Shared pytest settings: deterministic, small thread count for the 2-core CI machine."""

import torch

torch.set_num_threads(min(2, torch.get_num_threads()))

import os  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

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


@pytest.fixture
def fern_dir(shared_data) -> Path:
    """The LLFF release's fern (``poses_bounds.npy``, ``images_4/``, ``images_8/``), or skip."""
    path = shared_data / "nerf_llff_data" / "fern"
    if not (path / "poses_bounds.npy").is_file():
        pytest.skip(f"{path} has no poses_bounds.npy")
    return path
