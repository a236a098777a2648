"""Fixtures of the end-to-end tests that more than one module shares."""

from __future__ import annotations

import pytest

from helpers import train_tiny


@pytest.fixture(scope="module")
def viewer_runs(tmp_path_factory):
    """Two tiny runs (vanilla, row) of one synthetic forward-facing scene, 32 x 24 pixels: {root, scene, a, b}."""
    from enerf.synthetic.scene import make_synthetic_scene

    root = tmp_path_factory.mktemp("viewer")
    scene = make_synthetic_scene(root / "scene", n_views=8, width=32, height=24, seed=1)
    a = train_tiny(scene, root / "runs", "vanilla", 4)
    b = train_tiny(scene, root / "runs", "row", 4, "--conditioning", "row")
    return {"root": root, "scene": scene, "a": a, "b": b}
