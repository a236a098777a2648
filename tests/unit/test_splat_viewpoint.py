"""The one view a splat file without cameras opens at (``enerf.splats.viewpoint``), in the viewer and in
the page: against a plane fitted here with numpy's SVD, and the page's header against it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from enerf.splats.gaussians import Splats
from enerf.splats.html import write_html
from enerf.splats.viewpoint import default_view, view_c2w
from splat_page_data import read_page


def _tilted_layer(n: int = 3000, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """(centres [n, 3] spread 3 x 1.2 x 0.02 along the axes of a random rotation, shifted; that rotation [3, 3])."""
    rng = np.random.default_rng(seed)
    rot = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    local = rng.uniform(-1.0, 1.0, size=(n, 3)) * [3.0, 1.2, 0.02]
    return local @ rot.T + [0.5, -2.0, 4.0], rot


def _svd_view(centers: np.ndarray, fov: float, elevation: float) -> dict:
    """The view computed independently: the plane of the centres inside their 5-95 % box by SVD (its
    normal the last right-singular vector, turned toward +z; the widest direction the first), a camera
    ``elevation`` above that plane at the centres' median, across the middle direction."""
    middle = np.median(centers, axis=0)
    lo, hi = np.percentile(centers, [5, 95], axis=0)
    inner = centers[((centers >= lo) & (centers <= hi)).all(axis=1)]
    vt = np.linalg.svd(inner - inner.mean(0), full_matrices=False)[2]
    normal, middle_axis = vt[2] * np.sign(vt[2][2]), vt[1]
    radius = 0.5 * np.linalg.norm(hi - lo)
    dist = radius / math.tan(fov / 2) + radius
    return {"look_at": middle, "normal": normal, "middle_axis": middle_axis, "dist": dist}


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_the_view_looks_down_onto_the_plane_an_svd_fits(seed):
    centers, rot = _tilted_layer(seed=seed)
    view = default_view(centers)
    want = _svd_view(centers, math.radians(50.0), math.radians(30.0))
    assert view["fov"] == pytest.approx(math.radians(50.0))
    np.testing.assert_allclose(view["look_at"], want["look_at"], atol=1e-12)
    np.testing.assert_allclose(view["up"], want["normal"], atol=1e-6)  # the plane's normal, its +z side
    assert abs(want["normal"] @ rot[:, 2]) > 0.999  # the SVD finds the layer's own normal
    back = view["position"] - view["look_at"]  # from the centre toward the camera
    assert np.linalg.norm(back) == pytest.approx(want["dist"], rel=1e-9)
    back /= np.linalg.norm(back)
    assert back @ want["normal"] == pytest.approx(math.sin(math.radians(30.0)), abs=1e-6)  # 30 degrees above
    in_plane = back - (back @ want["normal"]) * want["normal"]
    assert abs(in_plane @ want["middle_axis"]) == pytest.approx(math.cos(math.radians(30.0)), abs=1e-6)
    # the camera-to-world: OpenGL axes, looking at the centre, its up axis in the plane of up and the view
    c2w = view_c2w(view)
    np.testing.assert_allclose(c2w[:3, :3].T @ c2w[:3, :3], np.eye(3), atol=1e-12)
    assert np.linalg.det(c2w[:3, :3]) == pytest.approx(1.0)
    np.testing.assert_allclose(c2w[:3, 3], view["position"])
    np.testing.assert_allclose(c2w[:3, 2], back, atol=1e-12)
    assert abs(c2w[:3, 0] @ want["normal"]) < 1e-9 and c2w[:3, 1] @ want["normal"] > 0
    np.testing.assert_array_equal(c2w[3], [0.0, 0.0, 0.0, 1.0])


def test_the_view_sees_a_cloud_whole():
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(500, 3)) * [1.0, 2.0, 0.5] + [3.0, -1.0, 2.0]
    view = default_view(centers)
    forward = view["look_at"] - view["position"]
    forward /= np.linalg.norm(forward)
    rel = centers - view["position"]
    angle = np.arccos(np.clip(rel @ forward / np.linalg.norm(rel, axis=1), -1, 1))
    assert np.mean(angle < 0.5 * view["fov"]) > 0.9 and np.all(rel @ forward > 0)
    np.testing.assert_allclose(view["look_at"], np.median(centers, axis=0))
    # up: the axis of least spread (z here, 0.5 against 1 and 2), seen from 30 degrees above the x-y plane,
    # across the middle axis (x), so the widest spread (y) runs across the picture
    np.testing.assert_allclose(view["up"], [0.0, 0.0, 1.0], atol=0.05)
    assert np.degrees(np.arcsin(-forward[2])) == pytest.approx(30.0, abs=3.0)
    assert abs(forward[1]) < 0.1


def test_few_or_no_centres_still_give_a_view():
    for centers in (np.zeros((0, 3)), np.array([[1.0, 2.0, 3.0]]), np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])):
        view = default_view(centers)
        c2w = view_c2w(view)
        assert np.isfinite(c2w).all() and np.linalg.norm(view["position"] - view["look_at"]) > 0
        np.testing.assert_allclose(view["up"], [0.0, 0.0, 1.0])


def test_the_page_without_cameras_opens_at_the_same_view(tmp_path):
    centers, _ = _tilted_layer(n=400, seed=6)
    g = torch.Generator().manual_seed(0)
    splats = Splats(torch.tensor(centers, dtype=torch.float32), torch.randn(400, 3, generator=g) - 4,
                    torch.randn(400, 4, generator=g), torch.randn(400, generator=g),
                    torch.randn(400, 4, 3, generator=g))
    write_html(splats, tmp_path / "p.html", "t")
    _, header, _ = read_page(tmp_path / "p.html")
    view = default_view(splats.means.double().numpy())
    assert len(header["cameras"]) == 1
    cam = header["cameras"][0]
    np.testing.assert_allclose(np.array(cam["c2w"]), view_c2w(view), atol=1e-7)
    assert cam["fov_y"] == 50.0
    np.testing.assert_allclose(header["up"], view["up"], atol=1e-12)
    depth = (centers - view["position"]) @ -view_c2w(view)[:3, 2]
    assert cam["distance"] == pytest.approx(np.median(depth[depth > 0]), rel=1e-5)
