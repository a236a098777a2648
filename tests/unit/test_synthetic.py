"""The synthetic scene: loader rays mapped back to world re-render the stored pixels exactly."""

from __future__ import annotations

import json
import socket

import numpy as np
import pytest
from skimage.metrics import peak_signal_noise_ratio

from enerf.synthetic import scene as synthetic
from enerf.data.llff import load_llff
from enerf.synthetic.scene import build_texture, default_geometry, load_geometry, make_synthetic_scene, trace_rays
from enerf.errors import DataError


@pytest.fixture(scope="module")
def small_scene(tmp_path_factory):
    return make_synthetic_scene(tmp_path_factory.mktemp("syn") / "small", n_views=4, width=160, height=120, seed=3)


def _world_rays(scene, index):
    """Loader rays (non-NDC, scene space) of one view mapped to the poses_bounds.npy frame."""
    rays = scene.rays(index)
    o = rays.origins.reshape(-1, 3).double().numpy()
    d = rays.directions.reshape(-1, 3).double().numpy()
    S = scene.scene_to_world
    return o @ S[:3, :3].T + S[:3, 3], d @ S[:3, :3].T


def test_textures_load_without_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network disabled by test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for prim in default_geometry()["primitives"]:
        tex = build_texture(prim["texture"])
        assert tex.ndim == 3 and tex.shape[2] == 3 and tex.dtype == np.float32
        assert 0.0 <= tex.min() and tex.max() <= 1.0 and tex.std() > 0.02  # a real picture, not flat


def test_rerender_full_resolution_small_scene(small_scene):
    scene = load_llff(small_scene, factor=1, llffhold=0, use_ndc=False)
    geometry = load_geometry(small_scene)
    assert scene.images.shape == (4, 120, 160, 3)
    for index in range(scene.n_views):
        o, d = _world_rays(scene, index)
        rgb, t = trace_rays(geometry, o, d)
        assert np.isfinite(t).all()
        pred = rgb.reshape(scene.images[index].shape)
        psnr = peak_signal_noise_ratio(scene.images[index].astype(np.float64), pred, data_range=1.0)
        assert psnr >= 40.0, (index, psnr)


def test_rerender_default_size_random_pixels(tmp_path):
    scene_dir = make_synthetic_scene(tmp_path / "big", n_views=2, width=1008, height=756, seed=0)
    scene = load_llff(scene_dir, factor=1, llffhold=0, use_ndc=False)
    assert (scene.height, scene.width) == (756, 1008)
    rng = np.random.default_rng(0)
    geometry = load_geometry(scene_dir)
    for index in range(2):
        o, d = _world_rays(scene, index)
        pick = rng.choice(o.shape[0], 2000, replace=False)
        rgb, _ = trace_rays(geometry, o[pick], d[pick])
        stored = scene.images[index].reshape(-1, 3)[pick].astype(np.float64)
        assert peak_signal_noise_ratio(stored, rgb, data_range=1.0) >= 40.0


def test_hit_depths_match_analytic_geometry(small_scene):
    scene = load_llff(small_scene, factor=1, llffhold=0, use_ndc=False)
    geometry = load_geometry(small_scene)
    raw = np.load(small_scene / "poses_bounds.npy")
    spec = {p["name"]: p for p in default_geometry()["primitives"]}
    plane_z = spec["background"]["corner"][2]
    for index in range(scene.n_views):
        o, d = _world_rays(scene, index)
        _, t = trace_rays(geometry, o, d)
        hit = o + t[:, None] * d
        # background pixels: the hit lies on the plane, and t equals the analytic plane crossing
        # of the pixel ray built straight from poses_bounds.npy (columns [down, right, back, t, hwf])
        background = np.abs(hit[:, 2] - plane_z) < 1e-6
        assert background.mean() > 0.3
        mat = raw[index, :15].reshape(3, 5)
        rot = np.stack([mat[:, 1], -mat[:, 0], mat[:, 2]], 1)
        h, w, f = mat[:, 4]
        jj, ii = np.meshgrid(np.arange(int(h)) + 0.5, np.arange(int(w)) + 0.5, indexing="ij")
        cam = np.stack([(ii - w / 2) / f, -(jj - h / 2) / f, -np.ones_like(ii)], -1).reshape(-1, 3)
        d_raw = cam @ rot.T
        t_plane = (plane_z - mat[2, 3]) / d_raw[:, 2]  # = z-depth along the camera axis
        np.testing.assert_allclose(t[background] * np.linalg.norm(d[background], axis=1),
                                   t_plane[background] * np.linalg.norm(d_raw[background], axis=1), rtol=1e-5)
        # sphere pixels sit on the sphere surface
        ball = spec["astronaut_ball"]
        on_ball = np.abs(np.linalg.norm(hit - ball["center"], axis=1) - ball["radius"]) < 1e-6
        assert on_ball.sum() > 50
        # stored near / far bound every hit's z-depth (they are its min and max)
        z_depth = (hit - mat[:, 3]) @ -rot[:, 2]
        assert z_depth.min() == pytest.approx(raw[index, 15], rel=1e-4)
        assert z_depth.max() == pytest.approx(raw[index, 16], rel=1e-4)


def test_layout_and_metadata(small_scene):
    names = sorted(p.name for p in (small_scene / "images").iterdir())
    assert names == ["000.png", "001.png", "002.png", "003.png"]
    raw = np.load(small_scene / "poses_bounds.npy")
    assert raw.shape == (4, 17)
    np.testing.assert_allclose(raw[:, [4, 9, 14]], np.tile([120, 160, 0.8 * 160], (4, 1)))
    assert 2.0 < raw[:, 15].min() and raw[:, 16].max() < 12.0  # content at depths ~2.5 to ~10
    meta = json.loads((small_scene / "scene.json").read_text())
    assert meta["params"] == {"n_views": 4, "width": 160, "height": 120, "seed": 3}
    # cameras look roughly down -z: back axis within 15 degrees of +z
    back = np.array(meta["c2w"])[:, :, 2]
    assert np.all(back[:, 2] > np.cos(np.radians(15)))
    scene = load_llff(small_scene, factor=1, llffhold=2)  # NDC: all content beyond the z = -1 plane
    assert scene.bounds.min() == pytest.approx(1 / 0.75, rel=1e-6)


def test_creation_is_idempotent_and_atomic(tmp_path, monkeypatch):
    out = tmp_path / "scene"
    make_synthetic_scene(out, n_views=2, width=24, height=18)
    stamp = (out / "poses_bounds.npy").stat().st_mtime_ns
    assert make_synthetic_scene(out, n_views=2, width=24, height=18) == out  # same parameters: untouched
    assert (out / "poses_bounds.npy").stat().st_mtime_ns == stamp
    with pytest.raises(DataError, match="overwrite"):
        make_synthetic_scene(out, n_views=3, width=24, height=18)
    make_synthetic_scene(out, n_views=3, width=24, height=18, overwrite=True)
    assert np.load(out / "poses_bounds.npy").shape == (3, 17)
    (tmp_path / "other").mkdir()
    with pytest.raises(DataError, match="not a synthetic scene"):
        make_synthetic_scene(tmp_path / "other", n_views=2, width=24, height=18)

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(synthetic, "_write_scene", boom)
    with pytest.raises(RuntimeError):
        make_synthetic_scene(tmp_path / "failed", n_views=2, width=24, height=18)
    with pytest.raises(RuntimeError):
        make_synthetic_scene(out, n_views=4, width=24, height=18, overwrite=True)
    assert not (tmp_path / "failed").exists()
    assert np.load(out / "poses_bounds.npy").shape == (3, 17)  # a failed overwrite keeps the old scene
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other", "scene"]  # no temp folders left


def test_seed_changes_cameras_only(tmp_path):
    a = make_synthetic_scene(tmp_path / "a", n_views=2, width=24, height=18, seed=0)
    b = make_synthetic_scene(tmp_path / "b", n_views=2, width=24, height=18, seed=1)
    pa, pb = np.load(a / "poses_bounds.npy"), np.load(b / "poses_bounds.npy")
    assert not np.allclose(pa, pb)
    geometry = [json.loads((p / "scene.json").read_text())["geometry"] for p in (a, b)]
    assert geometry[0] == geometry[1]
