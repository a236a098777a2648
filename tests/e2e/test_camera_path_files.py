"""Camera path files: enerf's own (versions 1 and 2) read back as written, keyframe paths against scipy and
numpy, nerfstudio's camera_path.json both ways, ``enerf render --path FILE`` against render_camera, the
editor's keyframe list, and malformed files (one line)."""

from __future__ import annotations

import json
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from enerf.cameras.path_file import CameraPath, read_camera_path
from enerf.cli import main
from enerf.errors import ConfigError
from enerf.loaded_run import load_run
from enerf.viewer.render import focal_from_fov, render_camera
from helpers import camera_path_dict


def test_camera_path_file_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    keys = np.stack([np.concatenate([Rotation.from_rotvec(rng.normal(size=3)).as_matrix(), rng.normal(size=(3, 1))],
                                    axis=1) for _ in range(3)])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(camera_path_dict(keys, 3, 40, 30, 50.0)))
    cam = read_camera_path(path)
    np.testing.assert_allclose(cam.keyframes, keys)
    assert (cam.width, cam.height, cam.fov_y) == (40, 30, 50.0)
    np.testing.assert_allclose(cam.poses(), keys, atol=1e-6)  # frames = keyframes: the keyframes themselves
    path.write_text(json.dumps(camera_path_dict(keys, 9)))
    poses = read_camera_path(path).poses()
    assert poses.shape == (9, 3, 4)
    np.testing.assert_allclose(poses[[0, 4, 8]], keys, atol=1e-5)  # the spline passes through the keyframes


@pytest.mark.parametrize("text", ["not json", "[]", '{"format": "other"}',
                                  '{"format": "enerf-camera-path", "keyframes": [{"c2w": [[1, 0], [0, 1]]}]}'])
def test_malformed_camera_path_is_one_line(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError):
        read_camera_path(path)


def test_render_path_file_matches_render_camera(viewer_runs, tmp_path, capsys):
    """``enerf render --path FILE`` renders the file's cameras at its size and field of view:
    the frames equal render_camera's images of those cameras (to 8-bit rounding)."""
    run = load_run(viewer_runs["a"], task="nerf", data_root=Path("data"))
    keys = run.scene.poses[[0, 2]]
    width, height, fov = 24, 14, 40.0
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(camera_path_dict(keys, 2, width, height, fov)))
    assert main(["render", "--ckpt", str(viewer_runs["a"]), "--path", str(path), "--png", "--quiet",
                 "--out", str(tmp_path / "video")]) == 0
    focal = focal_from_fov(np.radians(fov), height)
    for k in range(2):
        frame = iio.imread(tmp_path / "video" / "frames" / f"rgb_{k:04d}.png").astype(np.float32) / 255
        expected = render_camera(run, keys[k], width, height, focal)
        assert frame.shape == (height, width, 3)
        assert np.abs(frame - expected).max() <= 0.5 / 255 + 1e-6
    assert main(["render", "--ckpt", str(viewer_runs["a"]), "--path", "nowhere.txt"]) == 2
    assert ".json file saved by enerf view" in capsys.readouterr().err
    assert main(["render", "--ckpt", str(viewer_runs["a"]), "--path", str(tmp_path / "missing.json")]) == 2


def _random_poses(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([np.concatenate([Rotation.from_rotvec(rng.normal(size=3)).as_matrix(), rng.normal(size=(3, 1))],
                                    axis=1) for _ in range(n)])


def test_keyframe_path_against_scipy_and_numpy():
    """``keyframe_path``: smoothness 0 moves the camera along straight lines at constant speed per
    segment (numpy's interp over the keyframes' times), smoothness 1 is the Catmull-Rom spline
    (scipy's cubic Hermite spline with tangents (P[k+1] - P[k-1]) / 2 per second of an even
    path), keyframe k is reached at the sum of the seconds before it, and the field of view follows."""
    from scipy.interpolate import CubicHermiteSpline

    from enerf.cameras.paths import keyframe_path

    keys = _random_poses(4, 3)
    fovs = np.array([30.0, 60.0, 45.0, 50.0])
    seconds = np.array([1.0, 2.0, 0.5, 9.0])  # the last is not used
    times = np.linspace(0.0, 3.5, 15)  # 4 frames a second: every keyframe is a frame (0, 1, 3, 3.5 s)
    frames, frame_fovs = keyframe_path(keys, 15, seconds, fovs, smoothness=0.0)
    starts = np.array([0.0, 1.0, 3.0, 3.5])
    for axis in range(3):
        np.testing.assert_allclose(frames[:, axis, 3], np.interp(times, starts, keys[:, axis, 3]), atol=1e-12)
    np.testing.assert_allclose(frame_fovs, np.interp(times, starts, fovs), atol=1e-12)
    np.testing.assert_allclose(frames[[0, 4, 12, 14]], keys, atol=1e-9)  # orthonormal keyframes come back as they are
    rot = frames[:, :, :3]
    np.testing.assert_allclose(rot @ rot.transpose(0, 2, 1), np.broadcast_to(np.eye(3), rot.shape), atol=1e-9)
    # smoothness 1, even seconds: Catmull-Rom; its tangents at the ends repeat the end points
    even, _ = keyframe_path(keys, 13, np.full(4, 2.0), None, smoothness=1.0)
    pos = keys[:, :, 3]
    padded = np.concatenate([pos[:1], pos, pos[-1:]])
    slopes = (padded[2:] - padded[:-2]) / 2.0 / 2.0  # per second: 2 s per keyframe
    spline = CubicHermiteSpline(np.arange(4) * 2.0, pos, slopes)
    np.testing.assert_allclose(even[:, :, 3], spline(np.linspace(0.0, 6.0, 13)), atol=1e-12)


def test_camera_path_v2_file_round_trip(tmp_path):
    """A version-2 file (per-keyframe fov and seconds, smoothness) reads back as written, its
    frames and fields of view are keyframe_path's, and a version-1 file reads as before."""
    from enerf.cameras.path_file import CameraPath
    from enerf.cameras.paths import keyframe_path

    keys = _random_poses(3, 4)
    cam = CameraPath(keys, 11, 40, 30, 50.0, 5.0, np.array([50.0, 20.0, 70.0]), np.array([0.4, 1.6, 1.0]), 0.25)
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(cam.to_dict()))
    back = read_camera_path(path)
    np.testing.assert_allclose(back.keyframes, keys)
    np.testing.assert_allclose(back.fovs, cam.fovs)
    np.testing.assert_allclose(back.seconds, cam.seconds)
    assert (back.frames, back.width, back.height, back.fps, back.smoothness) == (11, 40, 30, 5.0, 0.25)
    frames, fovs = keyframe_path(keys, 11, [0.4, 1.6], [50.0, 20.0, 70.0], 0.25)
    np.testing.assert_allclose(back.poses(), frames, atol=1e-6)
    np.testing.assert_allclose(back.frame_fovs(), fovs)
    bad = cam.to_dict()
    bad["keyframes"][1]["fov_y"] = 190.0
    path.write_text(json.dumps(bad))
    with pytest.raises(ConfigError):
        read_camera_path(path)


NERFSTUDIO_PATH = {  # written by hand in nerfstudio's format (render_panel.py / get_path_from_json)
    "camera_type": "perspective", "render_height": 12, "render_width": 16, "fps": 2, "seconds": 1.0,
    "smoothness_value": 0.0, "is_cycle": False, "default_fov": 45.0, "default_transition_sec": 1.0,
    "keyframes": [
        {"matrix": [1, 0, 0, 0.1, 0, 1, 0, 0.0, 0, 0, 1, 2.0, 0, 0, 0, 1], "fov": 45.0, "aspect": 1.333,
         "override_transition_enabled": False, "override_transition_sec": None},
        {"matrix": [0, 0, 1, 1.0, 0, 1, 0, 0.2, -1, 0, 0, 1.0, 0, 0, 0, 1], "fov": 30.0, "aspect": 1.333,
         "override_transition_enabled": False, "override_transition_sec": None}],
    "camera_path": [
        {"camera_to_world": [1, 0, 0, 0.1, 0, 1, 0, 0.0, 0, 0, 1, 2.0, 0, 0, 0, 1], "fov": 45.0, "aspect": 1.333},
        {"camera_to_world": [0.6, 0, 0.8, 0.5, 0, 1, 0, 0.1, -0.8, 0, 0.6, 1.5, 0, 0, 0, 1], "fov": 37.5,
         "aspect": 1.333},
        {"camera_to_world": [0, 0, 1, 1.0, 0, 1, 0, 0.2, -1, 0, 0, 1.0, 0, 0, 0, 1], "fov": 30.0, "aspect": 1.333}],
}


def test_nerfstudio_camera_path_both_ways(viewer_runs, tmp_path):
    """nerfstudio's camera_path.json: its frames are rendered as they are (each 4 x 4 read row by
    row, each with its own fov: ``enerf render --path`` equals render_camera at focal
    h / 2 / tan(fov / 2)); its keyframes load into the editor's list (fov, transition seconds,
    smoothness) and are written back the same; the frames written are keyframe_path's."""
    from enerf.cameras.nerfstudio_path import from_nerfstudio, to_nerfstudio
    from enerf.viewer.keyframes import KeyframeList

    path = tmp_path / "camera_path.json"
    path.write_text(json.dumps(NERFSTUDIO_PATH))
    cam = read_camera_path(path)
    expected = np.stack([np.reshape(c["camera_to_world"], (4, 4))[:3] for c in NERFSTUDIO_PATH["camera_path"]])
    np.testing.assert_allclose(cam.poses(), expected, atol=1e-7)
    np.testing.assert_allclose(cam.frame_fovs(), [45.0, 37.5, 30.0])
    assert main(["render", "--ckpt", str(viewer_runs["a"]), "--path", str(path), "--png", "--quiet",
                 "--out", str(tmp_path / "video")]) == 0
    run = load_run(viewer_runs["a"], task="nerf", data_root=Path("data"))
    for k, fov in enumerate((45.0, 37.5, 30.0)):
        frame = iio.imread(tmp_path / "video" / "frames" / f"rgb_{k:04d}.png").astype(np.float32) / 255
        focal = 12 / 2 / np.tan(np.radians(fov) / 2)
        assert np.abs(frame - render_camera(run, expected[k], 16, 12, focal)).max() <= 0.5 / 255 + 1e-6
    keys = KeyframeList()
    keys.load(path, 50.0, (32, 24))
    np.testing.assert_allclose([k.c2w for k in keys.keys], expected[[0, 2]], atol=1e-12)
    assert [k.fov for k in keys.keys] == [45.0, 30.0] and [k.seconds for k in keys.keys] == [1.0, 1.0]
    assert (keys.size, keys.fps, keys.smoothness, keys.frames()) == ((16, 12), 2.0, 0.0, 3)
    written = to_nerfstudio(keys.camera_path(), 16, 12, 45.0)
    again = CameraPath(**from_nerfstudio(written, keyframes=True))
    np.testing.assert_allclose(again.keyframes, expected[[0, 2]], atol=1e-12)
    np.testing.assert_allclose(again.fovs, [45.0, 30.0])
    assert again.smoothness == 0.0 and again.fps == 2.0
    frames = np.stack([np.reshape(c["camera_to_world"], (4, 4)) for c in written["camera_path"]])
    np.testing.assert_allclose(frames[:, 3], np.broadcast_to([0, 0, 0, 1], (3, 4)))
    # straight lines at smoothness 0: the middle frame's position is the keyframes' mean, its fov too
    np.testing.assert_allclose(frames[1, :3, 3], expected[[0, 2], :, 3].mean(0), atol=1e-12)
    assert written["camera_path"][1]["fov"] == pytest.approx(37.5)
    bad = dict(NERFSTUDIO_PATH, camera_path=[{"camera_to_world": [1, 0, 0], "fov": 40}])
    path.write_text(json.dumps(bad))
    with pytest.raises(ConfigError):
        read_camera_path(path)


def test_keyframe_list_edits():
    """Add, delete, move (clamped at the ends) and the frame count of the editor's list."""
    from enerf.viewer.keyframes import KeyframeList

    keys = _random_poses(4, 5)
    kl = KeyframeList(fps=10.0)
    for k in range(4):
        kl.add(keys[k], 40.0 + k, 0.5 * (k + 1), (64, 48))
    kl.delete(1)
    assert kl.move(2, 1) == 2 and kl.move(2, -5) == 0  # the last stays last, then goes first
    np.testing.assert_allclose([k.c2w for k in kl.keys], keys[[3, 0, 2]])
    assert [k.fov for k in kl.keys] == [43.0, 40.0, 42.0]
    assert kl.seconds() == 2.0 + 0.5 and kl.frames() == 26
    with pytest.raises(ConfigError):
        kl.delete(5)
