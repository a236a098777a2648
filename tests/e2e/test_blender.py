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

from enerf.checkpoint import load_checkpoint
from enerf.cli import main
from enerf.config import DataConfig, FieldConfig, RenderConfig, run_config_from_dict
from enerf.cameras.paths import orbit_path
from enerf.data.blender import BLENDER_AABB, load_blender, read_rgba
from enerf.data.llff import load_llff
from enerf.data.resolve import LLFF_URL, resolve_scene_dir
from enerf.synthetic.scene import make_synthetic_scene
from enerf.errors import ConfigError, DataError
from enerf.data.camera_paths import camera_path
from enerf.render import build_renderer
from enerf.data.loaders import dataset_type_of, load_scene
from enerf.render.build import build_fields


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
    half = load_blender(tmp_path / "s", half_res=True, factor=2, white_bkgd=True)
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
    # As stored: 400 x 400, and test frame 24 (the 4th kept with testskip 8) is its RGBA file on white.
    full = load_blender(lego, testskip=8, white_bkgd=True)
    assert (full.height, full.width) == (400, 400)
    assert full.focal == pytest.approx(0.5 * 400 / math.tan(0.5 * meta["test"]["camera_angle_x"]))
    rgba = iio.imread(lego / "test" / "r_24.png").astype(np.float64) / 255
    assert rgba.shape == (400, 400, 4) and rgba[0, 0, 3] == 0 and 0 < rgba[..., 3].mean() < 1
    np.testing.assert_allclose(full.images[100 + 3], rgba[..., :3] * rgba[..., 3:] + 1 - rgba[..., 3:], atol=1e-6)


@pytest.mark.parametrize("case", ["no_train_json", "no_fov", "bad_matrix", "nan_matrix", "missing_frame",
                                  "mixed_size", "bad_json", "one_bit_frame", "fov_mismatch"])
def test_broken_folder_gives_one_line_naming_the_file(tmp_path, case, capsys):
    root = tmp_path / "s"
    _write_scene(root)
    train = root / "transforms_train.json"
    meta = json.loads(train.read_text())
    expected = train.name
    # no transforms_test.json is not broken: every 8th train frame is held out (tests/unit/test_zeroconf.py)
    if case == "no_fov":
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
    elif case == "no_train_json":  # still a Blender folder (transforms_test.json): the missing file is named
        train.unlink()
    elif case == "nan_matrix":
        meta["frames"][0]["transform_matrix"][0][3] = float("nan")
    elif case == "one_bit_frame":  # a 1-bit PNG is neither grey, RGB nor RGBA
        from PIL import Image

        Image.fromarray(np.zeros((8, 8), np.uint8)).convert("1").save(root / "train" / "r_1.png")
        expected = "r_1.png"
    elif case == "fov_mismatch":
        test = json.loads((root / "transforms_test.json").read_text())
        test["camera_angle_x"] = 0.5
        (root / "transforms_test.json").write_text(json.dumps(test))
        expected = "transforms_test.json"
    if case in ("no_fov", "bad_matrix", "nan_matrix"):
        train.write_text(json.dumps(meta))
    with pytest.raises(DataError) as info:
        load_blender(root)
    assert expected in str(info.value) and "\n" not in str(info.value)
    # --preset none: testskip 1, every frame is read (the CPU preset's testskip 8 skips the broken test frame)
    code = main(["train", "--preset", "none", "--datadir", str(root), "--basedir", str(tmp_path / "runs"), "--iters",
                 "1", "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and expected in err[0]
    assert not (tmp_path / "runs").exists()


def _visual_hull(lego: Path, aabb, res: int, every: int = 4) -> np.ndarray:
    """Cells [res, res, res] (ij indexing, as the occupancy grid) whose centre projects onto the
    object (alpha > 0) in every ``every``-th training view: a silhouette carving from the files."""
    meta = json.loads((lego / "transforms_train.json").read_text())
    lo, hi = np.asarray(aabb[:3]), np.asarray(aabb[3:])
    axes = [lo[k] + (np.arange(res) + 0.5) / res * (hi[k] - lo[k]) for k in range(3)]
    centres = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    inside = np.ones(len(centres), bool)
    for frame in meta["frames"][::every]:
        alpha = iio.imread(lego / (frame["file_path"] + ".png"))[..., 3] > 0
        h, w = alpha.shape
        focal = 0.5 * w / math.tan(0.5 * meta["camera_angle_x"])
        c2w = np.asarray(frame["transform_matrix"])
        cam = (centres - c2w[:3, 3]) @ c2w[:3, :3]  # camera axes [right, up, back]
        col = focal * cam[:, 0] / -cam[:, 2] + 0.5 * w
        row = -focal * cam[:, 1] / -cam[:, 2] + 0.5 * h
        seen = (col >= 0) & (col < w) & (row >= 0) & (row < h)
        on_object = np.zeros(len(centres), bool)
        on_object[seen] = alpha[row[seen].astype(int), col[seen].astype(int)]
        inside &= on_object | ~seen
    return inside.reshape(res, res, res)


def test_tiny_lego_training_improves_with_the_grid_renderer(shared_data, tmp_path):
    lego = shared_data / "nerf_synthetic" / "lego"
    if not (lego / "transforms_train.json").is_file():
        pytest.skip(f"{lego} not found")
    torch.manual_seed(0)
    common = ["train", "--preset", "none", "--datadir", str(lego), "--factor", "8", "--testskip", "50", "--white_bkgd", "--renderer",
              "torch_grid", "--render_step_size", "0.02", "--grid_resolution", "32", "--netdepth", "2",
              "--netwidth", "32", "--view_width", "16", "--N_rand", "256", "--lrate", "5e-3", "--no_lpips", "--quiet",
              "--basedir", str(tmp_path), "--grid_warmup", "64", "--target_sample_batch_size", "-1"]
    assert main([*common, "--expname", "a", "--iters", "1"]) == 0
    assert main([*common, "--expname", "b", "--iters", "150"]) == 0
    first = json.loads((tmp_path / "a" / "metrics.json").read_text())
    last = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert len(last["per_image"]) == 4  # 200 test frames, every 50th
    # Measured after 150 steps: 11.6 -> 19.5 dB (seed 0), 10.7 -> 17.9 dB (seed 1).
    assert last["psnr"] > first["psnr"] + 4.0

    # The grid spans the object's box and keeps the object: nearly every cell of the visual hull
    # carved from the alpha masks is occupied (measured 0.98 for seeds 0, 1, 2; the hull is 5.5 % of
    # the box), while part of the box is emptied (occupied fraction 0.26 / 0.75 / 0.85 for seeds
    # 0 / 1 / 2 after 150 steps: this tiny, short run still keeps floaters).
    payload, _ = load_checkpoint(tmp_path / "b" / "checkpoints" / "latest.pt")
    grid = payload["extra"]["renderer"]["grid"]
    np.testing.assert_allclose(grid["aabb"].numpy(), BLENDER_AABB)
    binaries = grid["binaries"].numpy()
    hull = _visual_hull(lego, BLENDER_AABB, binaries.shape[0])
    assert 0.02 < hull.mean() < 0.2
    assert binaries[hull].mean() > 0.9
    assert last["grid_occupied"] == pytest.approx(binaries.mean()) and last["grid_occupied"] < 0.9

    # The orbit video and a mesh from the checkpoint, on the object's box.
    ckpt = str(tmp_path / "b" / "checkpoints" / "latest.pt")
    assert main(["render", "--ckpt", ckpt, "--path", "orbit", "--frames", "3", "--out", str(tmp_path / "v"), "--quiet"]) == 0
    with iio2.get_reader(tmp_path / "v" / "rgb.mp4") as reader:
        frames = [np.asarray(f) for f in reader]
    assert len(frames) == 3 and frames[0].shape[:2] == (50, 50)
    assert main(["mesh", "--ckpt", ckpt, "--resolution", "32", "--threshold", "1", "--out", str(tmp_path / "m.ply")]) == 0
    vertices = np.asarray(trimesh.load(tmp_path / "m.ply").vertices)
    assert len(vertices) > 0 and np.all(np.abs(vertices) <= 1.5 + 1e-4)  # inside the object's box [-1.5, 1.5]^3


def test_grey_grey_alpha_and_16_bit_frames_are_read_as_rgba(tmp_path):
    rng = np.random.default_rng(3)
    grey = rng.integers(0, 256, (5, 6), dtype=np.uint8)
    grey_alpha = rng.integers(0, 256, (5, 6, 2), dtype=np.uint8)
    grey16 = rng.integers(0, 65536, (5, 6), dtype=np.uint16)
    for name, arr in (("g", grey), ("ga", grey_alpha), ("g16", grey16)):
        iio.imwrite(tmp_path / f"{name}.png", arr)
    ones = np.ones((5, 6, 1))
    expect = {
        "g": np.concatenate([np.repeat(grey[..., None] / 255.0, 3, 2), ones], 2),
        "ga": np.concatenate([np.repeat(grey_alpha[..., :1] / 255.0, 3, 2), grey_alpha[..., 1:] / 255.0], 2),
        "g16": np.concatenate([np.repeat(grey16[..., None] / 65535.0, 3, 2), ones], 2),
    }
    for name, want in expect.items():
        np.testing.assert_allclose(read_rgba(tmp_path / f"{name}.png"), want, atol=1e-6)


def _tiny_llff(root: Path) -> Path:
    return make_synthetic_scene(root, n_views=3, width=48, height=32, seed=2)


def test_auto_detection_and_the_datasets_own_default_factor(tmp_path):
    _write_scene(tmp_path / "blender", size=8)
    blender = load_scene(DataConfig(datadir=str(tmp_path / "blender"), use_ndc=True), tmp_path, white_bkgd=True)
    assert (blender.height, blender.width, blender.use_ndc) == (8, 8, False)  # factor 0 -> 1; never NDC
    halved = load_scene(DataConfig(datadir=str(tmp_path / "blender"), factor=2), tmp_path)
    assert (halved.height, halved.width) == (4, 4)
    llff = load_scene(DataConfig(datadir=str(_tiny_llff(tmp_path / "llff"))), tmp_path)
    assert (llff.height, llff.width, llff.use_ndc, llff.aabb) == (32 // 8, 48 // 8, True, None)  # factor 0 -> 8
    with pytest.raises(DataError) as info:
        load_blender(tmp_path / "llff")  # an LLFF folder given to the Blender loader by hand
    assert "transforms_train.json" in str(info.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as info:
        load_scene(DataConfig(datadir=str(tmp_path / "empty")), tmp_path)
    assert "transforms_train.json" in str(info.value) and "poses_bounds.npy" in str(info.value)


def test_scene_names_resolve_in_either_release_folder(tmp_path, monkeypatch, capsys):
    root = tmp_path / "data"
    (root / "nerf_synthetic" / "lego").mkdir(parents=True)
    (root / "nerf_llff_data" / "fern").mkdir(parents=True)
    assert resolve_scene_dir("lego", "", root) == root / "nerf_synthetic" / "lego"
    assert resolve_scene_dir("fern", "", root) == root / "nerf_llff_data" / "fern"
    monkeypatch.chdir(tmp_path)  # the CLI's data root is ./data
    assert main(["train", "--scene", "chair", "--basedir", str(tmp_path / "runs"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nerf_llff_data/chair" in err[0] and "nerf_synthetic/chair" in err[0]
    assert LLFF_URL in err[0] and not (tmp_path / "runs").exists()


def test_a_nerf_pytorch_blender_config_file_is_accepted(tmp_path):
    _write_scene(tmp_path / "s", n_train=3, n_test=5, size=16)
    config = tmp_path / "config_lego.txt"  # nerf-pytorch's configs/lego.txt, with a tiny network
    config.write_text(
        f"expname = blender_paper_lego\nbasedir = {tmp_path}\ndatadir = {tmp_path / 's'}\ndataset_type = blender\n"
        "no_batching = True\nuse_viewdirs = True\nwhite_bkgd = True\nlrate_decay = 500\nN_samples = 8\n"
        "N_importance = 4\nN_rand = 32\nprecrop_iters = 500\nprecrop_frac = 0.5\nhalf_res = True\ntestskip = 2\n"
        "netdepth = 2\nnetwidth = 16\nmultires = 2\nmultires_views = 1\n"
    )
    assert main(["train", "--config", str(config), "--iters", "2", "--no_lpips", "--quiet"]) == 0
    saved = json.loads((tmp_path / "blender_paper_lego" / "config.json").read_text())
    assert (saved["data"]["dataset_type"], saved["data"]["half_res"], saved["data"]["testskip"]) == ("blender", True, 2)
    assert saved["render"]["white_bkgd"] is True
    metrics = json.loads((tmp_path / "blender_paper_lego" / "metrics.json").read_text())
    assert [p["view"] for p in metrics["per_image"]] == [3, 4, 5]  # test frames 0, 2, 4 after the 3 train frames
    scene = load_scene(run_config_from_dict(saved).data, tmp_path, white_bkgd=True)
    assert (scene.height, scene.width) == (8, 8)  # half_res halves the 16 x 16 frames


def test_video_paths_on_blender_and_ndc_scenes(tmp_path):
    _write_scene(tmp_path / "blender")
    blender = load_blender(tmp_path / "blender")
    np.testing.assert_allclose(camera_path(blender, "spiral", 7), orbit_path(7))
    np.testing.assert_allclose(camera_path(blender, "orbit", 40), blender.render_poses)
    llff = load_llff(_tiny_llff(tmp_path / "llff"), factor=8)
    with pytest.raises(ConfigError, match="orbit"):
        camera_path(llff, "orbit", 5)


def test_a_grid_read_off_the_field_uses_the_objects_box(tmp_path):
    """Rendering without the trained grid (an old checkpoint, ``render_scene_view`` without a renderer)
    reads the grid off the field over the scene's box, as training did, not over the rays' box."""
    _write_scene(tmp_path / "s", size=8)
    scene = load_blender(tmp_path / "s")
    cfg = RenderConfig(sampler="torch_grid", grid_resolution=8)
    fields = build_fields(FieldConfig(netdepth=1, netwidth=8, view_width=8, multires=2, multires_views=1),
                          torch.device("cpu"))
    rays = scene.rays(0)
    on_box = build_renderer(cfg, torch.device("cpu"), rays=rays, aabb=scene.aabb, read_off=fields["coarse"])
    np.testing.assert_allclose(on_box.estimator.grid.aabb.numpy(), BLENDER_AABB)
    on_rays = build_renderer(cfg, torch.device("cpu"), rays=rays, read_off=fields["coarse"])
    # The box of one view's rays from near 2 to far 6 (cameras at distance ~4.3) is much larger.
    assert float((on_rays.estimator.grid.aabb[3:] - on_rays.estimator.grid.aabb[:3]).min()) > 3.0
