"""The viewer's splats (``enerf.viewer.splats``, ``splat_layer``): the arrays viser draws against
numpy and scipy, float16's range, the frame a file is brought into, and what each browser shows
(the splats while the camera moves, the field's frame once it rests) with stand-in browsers."""

from __future__ import annotations

import time
import types

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

import enerf.splats.files as splat_files
from enerf.errors import ConfigError, DataError
from enerf.splats.gaussians import SH_C0, Splats
from enerf.viewer.splats import (bake_hint, default_splats_file, node_scale, read_viewer_splats, scaled_for_viser,
                                 viewer_splats)
from viewer_splat_files import splat_modules, write_3dgs_ply


def _random_splats(n: int = 50, seed: int = 0, size: float = 0.01) -> dict:
    rng = np.random.default_rng(seed)
    return {"means": rng.normal(size=(n, 3)), "log_scales": np.log(size * rng.uniform(0.2, 3.0, size=(n, 3))),
            "quats": rng.normal(size=(n, 4)) * rng.uniform(0.5, 2.0, size=(n, 1)),  # not unit: normalised where used
            "opacity_logits": rng.normal(scale=3.0, size=n), "f_dc": rng.normal(scale=2.0, size=(n, 3))}


def _splats(p: dict) -> Splats:
    t = {k: torch.tensor(v, dtype=torch.float32) for k, v in p.items()}
    return Splats(t["means"], t["log_scales"], t["quats"], t["opacity_logits"], t["f_dc"][:, None, :])


def _expected_cov(p: dict) -> np.ndarray:
    rot = Rotation.from_quat(p["quats"][:, [1, 2, 3, 0]]).as_matrix()  # scipy: x-y-z-w, normalises
    var = np.exp(2.0 * p["log_scales"])
    return np.einsum("nij,nj,nkj->nik", rot, var, rot)


def test_covariances_colours_opacities_against_numpy():
    p = _random_splats()
    out = viewer_splats(_splats(p), "f.ply", "own")
    np.testing.assert_allclose(out.centers, p["means"], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out.covariances, _expected_cov(p), rtol=1e-4, atol=1e-11)
    np.testing.assert_allclose(out.covariances, np.transpose(out.covariances, (0, 2, 1)), atol=1e-12)
    np.testing.assert_allclose(out.rgbs, np.clip(SH_C0 * p["f_dc"] + 0.5, 0, 1), atol=1e-6)
    assert (out.rgbs == 0).any() and (out.rgbs == 1).any()  # the clamp was exercised
    np.testing.assert_allclose(out.opacities[:, 0], 1 / (1 + np.exp(-p["opacity_logits"])), rtol=1e-5)
    assert out.opacities.shape == (50, 1) and out.covariances.dtype == np.float32
    assert out.describe() == "50 splats from f.ply (own)"


def test_float16_covariances_keep_small_splats():
    """viser sends covariances as float16: scaled by a power of two they keep 3 digits; unscaled,
    splats of about 1e-3 (variances near 1e-6, below float16's normal range) would not."""
    p = _random_splats(size=0.001)
    out = viewer_splats(_splats(p), "", "")
    centers, cov, scale = scaled_for_viser(out)
    assert np.log2(scale) == round(np.log2(scale)) and 1e-4 < scale < 1e-2
    np.testing.assert_array_equal(centers * np.float32(scale), out.centers)  # a power of two: exact
    exact = _expected_cov(p)
    sent = cov.astype(np.float16).astype(np.float64) * scale**2
    raw = out.covariances.astype(np.float16).astype(np.float64)
    peak = np.abs(exact).max(axis=(1, 2), keepdims=True)
    assert np.abs(sent - exact).max(axis=(1, 2)).max() / peak.min() < 5e-3
    assert (np.abs(raw - exact) / peak).max() > 0.02  # what the scale avoids
    assert node_scale(np.zeros((0, 3, 3))) == 1.0
    huge = out.covariances.copy()
    huge[0] *= 1e12
    big = scaled_for_viser(types.SimpleNamespace(covariances=huge, centers=out.centers))[1][0]
    assert np.isfinite(big.astype(np.float16)).all() and np.abs(big).max() <= 6.0e4


@pytest.mark.parametrize("frame", ["world", None, "scene"])
def test_a_world_file_comes_into_the_run_scene_frame(tmp_path, monkeypatch, frame):
    p = _random_splats(n=20, seed=3, size=0.05)
    monkeypatch.setattr(splat_files, "read_splat_file", lambda path: (_splats(p), frame))
    path = tmp_path / "s.ply"
    path.write_bytes(b"stand-in")
    rot = Rotation.from_rotvec([0.3, -0.5, 0.9]).as_matrix()
    scene_to_world = np.eye(4)
    scene_to_world[:3, :3], scene_to_world[:3, 3] = 2.5 * rot, [1.0, -2.0, 0.5]
    out = read_viewer_splats(path, types.SimpleNamespace(scene_to_world=scene_to_world))
    if frame == "scene":
        np.testing.assert_allclose(out.centers, p["means"], atol=1e-5)
        assert out.frame == "scene frame"
        return
    linear = np.linalg.inv(scene_to_world)[:3, :3]  # rotation / 2.5
    np.testing.assert_allclose(out.centers, (p["means"] - [1.0, -2.0, 0.5]) @ linear.T, atol=1e-5)
    np.testing.assert_allclose(out.covariances, linear @ _expected_cov(p) @ linear.T, rtol=1e-3, atol=1e-8)
    assert out.frame == ("world -> scene" if frame == "world" else "taken as world -> scene")
    alone = read_viewer_splats(path)  # no run: its own frame
    np.testing.assert_allclose(alone.centers, p["means"], atol=1e-5)


def test_reading_a_3dgs_file(tmp_path, monkeypatch):
    """The layout written with numpy reads back (with enerf's reader, or the tests' plyfile stand-in)."""
    splat_modules(monkeypatch)
    p = _random_splats(n=30, seed=5)
    path = write_3dgs_ply(tmp_path / "s.ply", **p)
    out = read_viewer_splats(path)
    np.testing.assert_allclose(out.centers, p["means"], atol=1e-6)
    np.testing.assert_allclose(out.covariances, _expected_cov(p), rtol=1e-3, atol=1e-10)


def test_missing_and_empty_files(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="no such file"):
        read_viewer_splats(tmp_path / "nope.ply")
    empty = _splats({k: v[:0] for k, v in _random_splats().items()})
    monkeypatch.setattr(splat_files, "read_splat_file", lambda path: (empty, "world"))
    (tmp_path / "e.ply").write_bytes(b"")
    with pytest.raises(DataError, match="no splats"):
        read_viewer_splats(tmp_path / "e.ply")
    assert default_splats_file(tmp_path) == tmp_path / "splats.ply"
    assert bake_hint("r/checkpoints/latest.pt", "r") == \
        f"no splats: enerf export splats --ckpt r/checkpoints/latest.pt --out {default_splats_file('r')}"


# ----------------------------------------------------------------------------- what each browser shows


class _Node:
    def __init__(self, visible):
        self.visible = visible


class _Client:
    def __init__(self):
        self.calls, self.scene = [], self

    def add_gaussian_splats(self, name, centers, covariances, rgbs, opacities, scale, visible):
        self.calls.append(("splats", name, len(centers), scale))
        self.node = _Node(visible)
        return self.node

    def set_background_image(self, image, format="png", jpeg_quality=None):  # noqa: A002 (viser's name)
        self.calls.append(("background", image))


def _layer(runs: int = 1, moving: str = "splats", output: str = "rgb", rest: float = 0.05):
    from enerf.config import ViewerConfig
    from enerf.viewer.session import Browser
    from enerf.viewer.splat_layer import SplatLayer

    viewer = types.SimpleNamespace(cfg=ViewerConfig(port=0, moving=moving, rest_seconds=rest), runs=[object()] * runs,
                                   output=output, browsers=dict, _changed=lambda: None)
    layer = SplatLayer(viewer, viewer_splats(_splats(_random_splats(n=10))))
    browser = Browser(_Client())
    layer.connect(browser)
    return layer, browser


def test_splats_while_moving_then_the_field_frame():
    layer, browser = _layer()
    client = browser.client
    assert client.calls[0][:3] == ("splats", "/splats", 10) and client.node.visible  # the splats show first
    assert layer.stands_in() and not layer.only
    assert layer.send(browser, 0, lambda: client.set_background_image("frame 0"))
    assert not client.node.visible and client.calls[-1] == ("background", "frame 0")
    browser.version = 1
    layer.moved(browser)  # the camera moves: the field frame goes, the splats show
    assert client.node.visible and client.calls[-1] == ("background", None)
    assert not layer.ready(browser)  # not rested yet
    time.sleep(0.06)
    assert layer.ready(browser)
    browser.version = 2  # it moved on while frame 1 rendered: frame 1 is dropped, the splats stay
    assert not layer.send(browser, 1, lambda: client.set_background_image("frame 1"))
    assert client.node.visible and ("background", "frame 1") not in client.calls
    assert layer.send(browser, 2, lambda: client.set_background_image("frame 2")) and not client.node.visible


@pytest.mark.parametrize("case", ["draft", "two runs", "depth"])
def test_no_stand_in(case):
    layer, browser = _layer(runs=2 if case == "two runs" else 1, moving="draft" if case == "draft" else "splats",
                            output="depth" if case == "depth" else "rgb")
    assert not layer.stands_in() and not browser.client.node.visible
    browser.version = 5
    layer.moved(browser)
    assert not browser.client.node.visible and layer.ready(browser)
    assert layer.send(browser, 4, lambda: None)  # as without splats: even a frame of an older camera is sent


def test_splats_alone():
    layer, browser = _layer(runs=0)
    assert layer.only and browser.client.node.visible
    layer, browser = _layer(runs=1)
    layer.show = "splats"
    assert layer.only
