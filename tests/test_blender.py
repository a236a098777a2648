"""The Blender (NeRF synthetic) loader: conventions on a tiny scene made here, the real lego from
``../shared/data`` (skipped when absent), broken folders, the orbit path, and the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import imageio.v2 as iio2
import imageio.v3 as iio
import numpy as np
import pytest
import torch
import trimesh
from skimage.transform import downscale_local_mean

from enerf.cli import main
from enerf.data.blender import BLENDER_AABB, load_blender, orbit_path
from enerf.errors import DataError
from enerf.train.components import dataset_type_of


def _look_at(position: np.ndarray) -> np.ndarray:
    """OpenGL camera-to-world at ``position`` looking at the origin, z up (independent of the loader)."""
    back = position / np.linalg.norm(position)
    right = np.cross([0.0, 0.0, 1.0], back)
    right /= np.linalg.norm(right)
    up = np.cross(back, right)
    c2w = np.eye(4)
    c2w[:3, :4] = np.stack([right, up, back, position], 1)
    return c2w


def _write_scene(root: Path, n_train=3, n_test=4, size=8, fov=0.7, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    frames = {}
    for split, n in (("train", n_train), ("val", 1), ("test", n_test)):
        (root / split).mkdir(parents=True, exist_ok=True)
        frames[split] = []
        for k in range(n):
            img = rng.integers(0, 256, size=(size, size, 4), dtype=np.uint8)
            iio.imwrite(root / split / f"r_{k}.png", img)
            angle = 2 * math.pi * k / max(n, 1)
            c2w = _look_at(np.array([4 * math.cos(angle), 4 * math.sin(angle), 1.5]))
            frames[split].append({"file_path": f"./{split}/r_{k}", "rotation": 0.1, "transform_matrix": c2w.tolist()})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": fov, "frames": frames[split]}))
    return frames


def test_conventions_on_a_tiny_scene(tmp_path):
    frames = _write_scene(tmp_path / "s", n_train=3, n_test=5, size=8, fov=0.7)
    scene = load_blender(tmp_path / "s", testskip=2, white_bkgd=True)
    assert scene.n_views == 3 + 3 and list(scene.i_train) == [0, 1, 2] and list(scene.i_test) == [3, 4, 5]
    assert scene.focal == pytest.approx(0.5 * 8 / math.tan(0.35))
    assert (scene.near, scene.far, scene.use_ndc, scene.aabb) == (2.0, 6.0, False, BLENDER_AABB)
    np.testing.assert_allclose(scene.poses[4], np.asarray(frames["test"][2]["transform_matrix"])[:3], atol=1e-6)
    rgba = iio.imread(tmp_path / "s" / "test" / "r_4.png").astype(np.float64) / 255
    white = rgba[..., :3] * rgba[..., 3:] + (1 - rgba[..., 3:])
    np.testing.assert_allclose(scene.images[5], white, atol=1e-6)
    black = load_blender(tmp_path / "s", white_bkgd=False).images[0]
    rgba0 = iio.imread(tmp_path / "s" / "train" / "r_0.png").astype(np.float64) / 255
    np.testing.assert_allclose(black, rgba0[..., :3] * rgba0[..., 3:], atol=1e-6)
    half = load_blender(tmp_path / "s", half_res=True, factor=2)
    assert (half.height, half.width) == (2, 2) and half.focal == pytest.approx(0.5 * 2 / math.tan(0.35))
    np.testing.assert_allclose(half.images[0], downscale_local_mean(rgba0[..., :3] * rgba0[..., 3:] + 1 - rgba0[..., 3:],
                                                                    (4, 4, 1)), atol=1e-6)
    assert dataset_type_of(tmp_path / "s", "auto") == "blender"


def test_orbit_path_circles_the_origin_at_elevation_minus_30():
    poses = orbit_path(40)
    assert poses.shape == (40, 3, 4)
    centres = poses[:, :, 3]
    np.testing.assert_allclose(np.linalg.norm(centres, axis=1), 4.0, rtol=1e-6)
    # elevation -30 degrees: z = 4 sin(30 deg) above the xy plane (nerf-pytorch's pose_spherical)
    np.testing.assert_allclose(centres[:, 2], 4 * math.sin(math.radians(30)), atol=1e-5)
    # the optical axis (-back) points at the origin
    np.testing.assert_allclose(-poses[:, :, 2], -centres / 4.0, atol=1e-5)
    azimuth = np.unwrap(np.arctan2(centres[:, 1], centres[:, 0]))
    np.testing.assert_allclose(np.abs(np.diff(azimuth)), 2 * math.pi / 40, atol=1e-5)


def test_real_lego_splits_size_focal_and_pose_convention(shared_data):
    lego = shared_data / "nerf_synthetic" / "lego"
    if not (lego / "transforms_train.json").is_file():
        pytest.skip(f"{lego} not found")
    meta = {s: json.loads((lego / f"transforms_{s}.json").read_text()) for s in ("train", "val", "test")}
    assert [len(meta[s]["frames"]) for s in ("train", "val", "test")] == [100, 100, 200]
    scene = load_blender(lego, factor=4, testskip=8)  # 100 x 100 keeps the test quick
    assert (scene.height, scene.width) == (100, 100) and len(scene.i_train) == 100 and len(scene.i_test) == 25
    assert scene.focal == pytest.approx(0.5 * 100 / math.tan(0.5 * meta["train"]["camera_angle_x"]))
    # The cameras look at the object: every central ray passes close to the origin.
    for view in [0, 50, int(scene.i_test[3])]:
        rays = scene.rays(view)
        o, d = rays.origins[50, 50].double().numpy(), rays.directions[50, 50].double().numpy()
        d = d / np.linalg.norm(d)
        closest = o - np.dot(o, d) * d
        assert np.linalg.norm(closest) < 0.1
    # Background pixels (alpha 0 in the file) are white after compositing.
    rgba = iio.imread(lego / "test" / "r_24.png")
    assert rgba[0, 0, 3] == 0 and np.allclose(load_blender(lego, testskip=8).images[100 + 3][0, 0], 1.0)


@pytest.mark.parametrize("case", ["no_json", "no_fov", "bad_matrix", "missing_frame", "mixed_size", "bad_json"])
def test_broken_folder_gives_one_line_naming_the_file(tmp_path, case, capsys):
    root = tmp_path / "s"
    _write_scene(root)
    train = root / "transforms_train.json"
    meta = json.loads(train.read_text())
    expected = train.name
    if case == "no_json":
        (root / "transforms_test.json").unlink()
        expected = "transforms_test.json"
    elif case == "no_fov":
        del meta["camera_angle_x"]
    elif case == "bad_matrix":
        meta["frames"][1]["transform_matrix"] = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    elif case == "missing_frame":
        (root / "train" / "r_2.png").unlink()
        expected = "r_2.png"
    elif case == "mixed_size":
        iio.imwrite(root / "test" / "r_1.png", np.zeros((6, 8, 4), np.uint8))
        expected = "r_1.png"
    elif case == "bad_json":
        train.write_text("{not json")
    if case in ("no_fov", "bad_matrix"):
        train.write_text(json.dumps(meta))
    with pytest.raises(DataError) as info:
        load_blender(root)
    assert expected in str(info.value) and "\n" not in str(info.value)
    code = main(["train", "--datadir", str(root), "--basedir", str(tmp_path / "runs"), "--iters", "1", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and expected in err[0]
    assert not (tmp_path / "runs").exists()


def test_tiny_lego_training_improves_with_the_grid_renderer(shared_data, tmp_path):
    lego = shared_data / "nerf_synthetic" / "lego"
    if not (lego / "transforms_train.json").is_file():
        pytest.skip(f"{lego} not found")
    torch.manual_seed(0)
    common = ["train", "--datadir", str(lego), "--factor", "8", "--testskip", "50", "--white_bkgd", "--renderer",
              "torch_grid", "--render_step_size", "0.02", "--grid_resolution", "32", "--netdepth", "2",
              "--netwidth", "32", "--view_width", "16", "--N_rand", "256", "--lrate", "5e-3", "--no_lpips", "--quiet",
              "--basedir", str(tmp_path), "--grid_warmup", "64", "--target_sample_batch_size", "-1"]
    assert main([*common, "--expname", "a", "--iters", "1"]) == 0
    assert main([*common, "--expname", "b", "--iters", "300"]) == 0
    first = json.loads((tmp_path / "a" / "metrics.json").read_text())
    last = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert len(last["per_image"]) == 4  # 200 test frames, every 50th
    assert last["psnr"] > first["psnr"] + 3.0
    occupied = last["grid_occupied"]
    assert 0.01 < occupied < 0.6  # the object fills part of its box, not all of it

    # The orbit video and a mesh from the checkpoint, on the object's box.
    ckpt = str(tmp_path / "b" / "checkpoints" / "latest.pt")
    assert main(["render", "--ckpt", ckpt, "--path", "orbit", "--frames", "3", "--out", str(tmp_path / "v"), "--quiet"]) == 0
    with iio2.get_reader(tmp_path / "v" / "rgb.mp4") as reader:
        frames = [np.asarray(f) for f in reader]
    assert len(frames) == 3 and frames[0].shape[:2] == (50, 50)
    assert main(["mesh", "--ckpt", ckpt, "--resolution", "32", "--threshold", "1", "--out", str(tmp_path / "m.ply")]) == 0
    vertices = np.asarray(trimesh.load(tmp_path / "m.ply").vertices)
    assert len(vertices) > 0 and np.all(np.abs(vertices) <= 1.5 + 1e-4)  # inside the object's box [-1.5, 1.5]^3
