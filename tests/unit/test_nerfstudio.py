"""The nerfstudio / instant-ngp ``transforms.json`` loader: intrinsics / pose / split parsing against hand
values, normalisation, the writer round trip, bad input through the CLI, and the instant-ngp fox from
``../shared/data`` (skipped when absent). Lens models and undistortion: test_lens_models.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation
from skimage.transform import downscale_local_mean

from enerf.cli import main
from enerf.cameras.lens import Camera, pinhole_canvas
from enerf.data.loaders import dataset_type_of
from enerf.data.nerfstudio import CAPTURE_BOX, load_nerfstudio
from enerf.data.transforms_writer import colmap_camera_fields, transforms_meta, write_transforms
from enerf.cameras.normalize import orient_and_center, rotation_between, transform_record
from enerf.cameras.rays import pixel_rays
from enerf.errors import DataError
from helpers import capture_cameras, look_at, write_capture

FOX_CAMERA = Camera("OPENCV", 1080, 1920, 1375.52, 1374.49, 554.558, 965.268, k1=0.0578421, k2=-0.0805099,
                    p1=-0.000980296, p2=0.00015575)


# ----------------------------------------------------------------------------- synthetic captures


def test_auto_detects_the_single_file_layout(tmp_path):
    scene = write_capture(tmp_path / "cap")
    assert dataset_type_of(scene, "auto") == "nerfstudio"
    (scene / "transforms_train.json").write_text("{}")  # Blender's split files win
    assert dataset_type_of(scene, "auto") == "blender"


def test_pinhole_capture_poses_focal_and_rays_through_known_points(tmp_path):
    """Rays of the loaded scene through a pixel pass through the point a hand-made pinhole
    projection puts at that pixel, once mapped into scene space by the inverse of scene_to_world."""
    scene_dir = write_capture(tmp_path / "cap", n=6, size=(32, 24), meta_extra={"fl_x": 30.0, "fl_y": 30.0})
    scene = load_nerfstudio(scene_dir, llffhold=0)
    assert (scene.width, scene.height, scene.focal, scene.n_views) == (32, 24, 30.0, 6)
    world_to_scene = np.linalg.inv(scene.scene_to_world)
    rng = np.random.default_rng(3)
    checked = 0
    for k, c2w in enumerate(capture_cameras(6)):
        point = np.array([0.2, -0.1, 0.3]) + rng.normal(0, 0.3, 3)
        cam = np.linalg.inv(c2w) @ np.append(point, 1.0)  # OpenGL camera axes: looking down -z
        col, row = 16 + 30.0 * cam[0] / -cam[2], 12 - 30.0 * cam[1] / -cam[2]
        i, j = int(col), int(row)
        if not (0 <= i < 32 and 0 <= j < 24):
            continue
        shift = np.array([col - (i + 0.5), row - (j + 0.5)])  # point -> one at the pixel centre, same depth
        cam_c = cam[:3] + np.array([-shift[0], shift[1], 0.0]) * -cam[2] / 30.0
        target = (world_to_scene @ (c2w @ np.append(cam_c, 1.0)))[:3]
        origins, dirs = pixel_rays(24, 32, scene.focal, torch.tensor(scene.poses[k]))
        o, d = origins[j, i].double().numpy(), dirs[j, i].double().numpy()
        s = (target - o) @ d / (d @ d)
        assert np.linalg.norm(o + s * d - target) < 1e-5 and s > 0
        checked += 1
    assert checked >= 4


def test_intrinsics_per_frame_camera_angle_and_missing_size(tmp_path):
    fov = 2 * math.atan(12 / 30.0)  # focal 30 px at width 24
    scene_dir = write_capture(tmp_path / "cap", n=4, meta_extra={"camera_angle_x": fov})
    meta = json.loads((scene_dir / "transforms.json").read_text())
    for key in ("fl_x", "fl_y", "cx", "cy", "w", "h"):
        del meta[key]  # w, h from the images, focal from the field of view
    (scene_dir / "transforms.json").write_text(json.dumps(meta))
    assert load_nerfstudio(scene_dir, llffhold=0).focal == pytest.approx(30.0)
    for frame in meta["frames"]:
        frame.update(fl_x=25.0, fl_y=25.0)  # per frame wins over camera_angle_x
    (scene_dir / "transforms.json").write_text(json.dumps(meta))
    assert load_nerfstudio(scene_dir, llffhold=0).focal == pytest.approx(25.0)


def test_extensionless_paths_sorting_and_every_eighth_frame_held_out(tmp_path):
    scene_dir = write_capture(tmp_path / "cap", n=18, listed_ext=False)
    meta = json.loads((scene_dir / "transforms.json").read_text())
    meta["frames"] = meta["frames"][::-1]  # listed in reverse: the loader sorts by name
    (scene_dir / "transforms.json").write_text(json.dumps(meta))
    scene = load_nerfstudio(scene_dir)
    assert scene.i_test.tolist() == [0, 8, 16] and scene.i_train.tolist() == [k for k in range(18) if k % 8]
    first = iio.imread(scene_dir / "images" / "f_00.png").astype(np.float32) / 255
    np.testing.assert_allclose(scene.images[0], first, atol=1e-6)


def test_split_lists_are_honoured(tmp_path):
    scene_dir = write_capture(tmp_path / "cap", n=6, meta_extra={"train_filenames": ["images/f_01.png", "images/f_03",
                                                                                 "./images/f_05.png"],
                                                             "test_filenames": ["images/f_00.png", "images/f_02.png"]})
    scene = load_nerfstudio(scene_dir)
    assert scene.i_train.tolist() == [1, 3, 5] and scene.i_test.tolist() == [0, 2]


def test_missing_images_warn_once_with_the_count(tmp_path, capsys):
    scene_dir = write_capture(tmp_path / "cap", n=9, missing=(2, 5, 6))
    scene = load_nerfstudio(scene_dir)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3 of 9 frames have no image and are skipped; 6 are used" in err[0]
    assert scene.n_views == 6 and scene.i_test.tolist() == [0]
    first_kept = iio.imread(scene_dir / "images" / "f_03.png").astype(np.float32) / 255
    np.testing.assert_allclose(scene.images[2], first_kept, atol=1e-6)  # f_00, f_01, f_03, ...


def test_factor_block_averages_or_reads_images_f(tmp_path):
    scene_dir = write_capture(tmp_path / "cap", n=3, size=(24, 16))
    scene = load_nerfstudio(scene_dir, factor=4, llffhold=0)
    full = iio.imread(scene_dir / "images" / "f_01.png").astype(np.float64) / 255
    assert (scene.width, scene.height, scene.focal) == (6, 4, 5.0)
    # kept as 8-bit codes (3 bytes a pixel): the block means rounded to the nearest code
    assert scene.images.data.dtype == np.uint8
    assert np.abs(scene.images[1] - downscale_local_mean(full, (4, 4, 1))).max() <= 0.5 / 255 + 1e-6
    (scene_dir / "images_4").mkdir()
    for k in range(3):  # ns-process-data's copies, here plain grey so the test sees which was read
        iio.imwrite(scene_dir / "images_4" / f"f_{k:02d}.png", np.full((4, 6, 3), 10 * k, np.uint8))
    scene = load_nerfstudio(scene_dir, factor=4, llffhold=0)
    assert (scene.width, scene.height, scene.focal) == (6, 4, 5.0)
    np.testing.assert_allclose(scene.images[2], 20 / 255, atol=1e-6)


def test_normalisation_up_centre_scale_and_the_transform_round_trip(tmp_path):
    tilt = np.eye(4)
    tilt[:3, :3] = Rotation.from_rotvec([0.4, -0.2, 0.7]).as_matrix()  # the capture's frame is tilted
    tilt[:3, 3] = [3.0, -1.0, 2.0]
    scene_dir = write_capture(tmp_path / "cap", n=7)
    meta = json.loads((scene_dir / "transforms.json").read_text())
    original = np.array([tilt @ np.asarray(f["transform_matrix"]) for f in meta["frames"]])
    for frame, c2w in zip(meta["frames"], original):
        frame["transform_matrix"] = c2w.tolist()
    (scene_dir / "transforms.json").write_text(json.dumps(meta))
    scene = load_nerfstudio(scene_dir, llffhold=0)
    centres = scene.poses[:, :3, 3]
    assert np.abs(centres).max() == pytest.approx(1.0, abs=1e-6)  # scaled into [-1, 1]^3, touching it
    np.testing.assert_allclose(centres.mean(0), 0.0, atol=1e-6)
    up = scene.poses[:, :3, 1].mean(0)
    np.testing.assert_allclose(up / np.linalg.norm(up), [0, 0, 1], atol=1e-6)  # mean up axis is +z
    back = scene.scene_to_world @ np.concatenate([scene.poses, np.tile([0, 0, 0, 1.0], (7, 1, 1))], 1)
    scale = np.cbrt(np.linalg.det(scene.scene_to_world[:3, :3]))
    back[:, :3, :3] /= scale
    np.testing.assert_allclose(back, original, atol=1e-5)  # scene_to_world maps the cameras back
    record = transform_record(scene.scene_to_world)
    p = np.array([0.3, 0.1, -2.0])
    np.testing.assert_allclose(record["scale"] * (np.asarray(record["transform"]) @ np.append(p, 1.0)),
                               (np.linalg.inv(scene.scene_to_world) @ np.append(p, 1.0))[:3], atol=1e-9)
    assert scene.aabb == (-CAPTURE_BOX,) * 3 + (CAPTURE_BOX,) * 3
    corners = np.array([[x, y, z] for x in (-3, 3) for y in (-3, 3) for z in (-3, 3)])
    assert scene.far == pytest.approx(np.linalg.norm(centres[:, None] - corners[None], axis=-1).max(), rel=1e-5)


def test_applied_transform_maps_back_to_the_frame_before_it(tmp_path):
    applied = np.array([[1.0, 0, 0, 0.5], [0, 0, 1, -1.0], [0, -1, 0, 2.0]])  # turn + shift, as 3 x 4
    plain = load_nerfstudio(write_capture(tmp_path / "a", n=5), llffhold=0)
    scene_dir = write_capture(tmp_path / "b", n=5, meta_extra={"applied_transform": applied.tolist()})
    scene = load_nerfstudio(scene_dir, llffhold=0)
    np.testing.assert_allclose(scene.poses, plain.poses, atol=1e-6)  # the poses as stored are used
    # scene_to_world = (plain's scene_to_world, into the json's frame) followed by the inverse of applied
    applied4 = np.vstack([applied, [0, 0, 0, 1]])
    np.testing.assert_allclose(scene.scene_to_world, np.linalg.inv(applied4) @ plain.scene_to_world, atol=1e-9)


def test_rotation_between_is_the_smallest_turn():
    rng = np.random.default_rng(4)
    for _ in range(5):
        a, b = rng.normal(size=3), rng.normal(size=3)
        rot = rotation_between(a, b)
        np.testing.assert_allclose(rot @ (a / np.linalg.norm(a)), b / np.linalg.norm(b), atol=1e-12)
        axis = np.cross(a, b)
        np.testing.assert_allclose(rot @ axis, axis, atol=1e-12)  # turns about a x b
        angle = Rotation.from_matrix(rot).magnitude()
        assert angle == pytest.approx(math.acos(a @ b / np.linalg.norm(a) / np.linalg.norm(b)))
    np.testing.assert_allclose(rotation_between([0, 0, -1.0], [0, 0, 1.0]) @ [0, 0, -1.0], [0, 0, 1.0], atol=1e-12)


def test_pca_orientation_puts_the_camera_plane_flat():
    poses = np.stack([look_at([4 * math.cos(a), 2 * math.sin(a), 0.0], up=(0, 0, 1)) for a in np.linspace(0, 6, 12)])
    turn = Rotation.from_rotvec([0.5, 0.3, -0.2]).as_matrix()
    moved = poses[:, :3, :4].copy()
    moved[:, :, :3] = turn @ moved[:, :, :3]
    moved[:, :, 3] = moved[:, :, 3] @ turn.T
    oriented, _ = orient_and_center(moved, "pca")
    np.testing.assert_allclose(oriented[:, 2, 3], 0.0, atol=1e-9)  # centres in the z = 0 plane
    assert oriented[:, :3, 1].mean(0)[2] > 0.99  # cameras upright


# ----------------------------------------------------------------------------- writer round trip


def test_colmap_camera_fields_follow_nerfstudio():
    assert colmap_camera_fields("SIMPLE_RADIAL", [500.0, 320.0, 240.0, -0.03], 640, 480) == pytest.approx(
        {"w": 640, "h": 480, "fl_x": 500.0, "fl_y": 500.0, "cx": 320.0, "cy": 240.0, "k1": -0.03, "k2": 0.0,
         "p1": 0.0, "p2": 0.0, "camera_model": "OPENCV", "camera_angle_x": 2 * math.atan(320 / 500)})
    fields = colmap_camera_fields("OPENCV", [500, 501, 320, 240, 0.1, 0.2, 0.3, 0.4], 640, 480)
    assert [fields[k] for k in ("fl_x", "fl_y", "cx", "cy", "k1", "k2", "p1", "p2")] == [500, 501, 320, 240, .1, .2,
                                                                                          .3, .4]
    assert colmap_camera_fields("PINHOLE", [500, 501, 320, 240], 640, 480)["camera_model"] == "PINHOLE"
    fisheye = colmap_camera_fields("RADIAL_FISHEYE", [500, 320, 240, 0.1, 0.2], 640, 480)
    assert fisheye["camera_model"] == "OPENCV_FISHEYE" and (fisheye["k1"], fisheye["k2"], fisheye["k4"]) == (.1, .2, 0)
    with pytest.raises(DataError, match="FULL_OPENCV"):
        colmap_camera_fields("FULL_OPENCV", [0] * 12, 640, 480)


def test_written_transforms_read_back_with_the_same_poses(tmp_path):
    (tmp_path / "images").mkdir()
    c2ws = capture_cameras(5, seed=2)
    frames = []
    for k, c2w in enumerate(c2ws):
        iio.imwrite(tmp_path / "images" / f"p{k}.png", np.zeros((30, 40, 3), np.uint8))
        frames.append({"file_path": f"images/p{k}.png", "transform_matrix": c2w})
    camera = colmap_camera_fields("PINHOLE", [35.0, 35.0, 20.0, 15.0], 40, 30)
    applied = np.array([[1.0, 0, 0, 0], [0, 0, 1, 0], [0, -1, 0, 0]])
    write_transforms(tmp_path / "transforms.json", transforms_meta(camera, frames, applied))
    scene = load_nerfstudio(tmp_path, llffhold=0)
    assert scene.focal == 35.0 and (scene.width, scene.height) == (40, 30)
    to_world = scene.scene_to_world
    scale = np.cbrt(np.linalg.det(to_world[:3, :3]))
    for k, c2w in enumerate(c2ws):  # scene_to_world leads to the frame before applied_transform
        back = to_world @ np.vstack([scene.poses[k], [0, 0, 0, 1]])
        back[:3, :3] /= scale
        np.testing.assert_allclose(np.vstack([applied, [0, 0, 0, 1]]) @ back, c2w, atol=1e-6)


# ----------------------------------------------------------------------------- bad input


def _fails(capsys, tmp_path, scene_dir, *words):
    basedir = tmp_path / "runs"
    code = main(["train", "--datadir", str(scene_dir), "--basedir", str(basedir), "--expname", "e", "--iters", "1",
                 "--quiet", "--no_lpips", "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err
    assert not basedir.exists()
    return err


def _edit(scene_dir: Path, change) -> Path:
    meta = json.loads((scene_dir / "transforms.json").read_text())
    change(meta)
    (scene_dir / "transforms.json").write_text(json.dumps(meta))
    return scene_dir


def test_bad_captures_are_one_line_naming_the_file(tmp_path, capsys):
    def cap(name, **kw):
        return write_capture(tmp_path / name, n=3, **kw)

    def drop(meta, key):
        del meta["frames"][1][key]

    _fails(capsys, tmp_path, _edit(cap("nomatrix"), lambda m: drop(m, "transform_matrix")),
           "transforms.json: frame 1", "no transform_matrix")
    _fails(capsys, tmp_path, _edit(cap("matrix3"), lambda m: m["frames"][0].update(transform_matrix=[[1, 0, 0]] * 3)),
           "transforms.json: frame 0", "4 x 4", "(3, 3)")

    def no_intrinsics(meta):
        for key in ("fl_x", "fl_y", "cx", "cy"):
            del meta[key]

    _fails(capsys, tmp_path, _edit(cap("nointr"), no_intrinsics), "transforms.json", "no intrinsics", "fl_x")
    _fails(capsys, tmp_path, _edit(cap("model"), lambda m: m.update(camera_model="EQUIRECTANGULAR")),
           "camera_model 'EQUIRECTANGULAR'", "OPENCV_FISHEYE")
    _fails(capsys, tmp_path, _edit(cap("size"), lambda m: m.update(w=30)), "f_00.png", "24x16", "w = 30")
    _fails(capsys, tmp_path, cap("none", missing=(0, 1, 2)), "transforms.json", "none of the 3 frames has its image")
    _fails(capsys, tmp_path, _edit(cap("outside"), lambda m: m["frames"][2].update(file_path="../elsewhere/x.png")),
           "transforms.json: frame 2", "outside")
    _fails(capsys, tmp_path, _edit(cap("split"), lambda m: m.update(test_filenames=["images/nope.png"])),
           "test_filenames", "nope.png")
    (tmp_path / "notjson").mkdir()
    (tmp_path / "notjson" / "transforms.json").write_text("{not json")
    _fails(capsys, tmp_path, tmp_path / "notjson", "transforms.json", "not valid JSON")


# ----------------------------------------------------------------------------- the fox


def test_fox_loads_its_50_present_frames(fox_dir):
    messages = []
    scene = load_nerfstudio(fox_dir, factor=8, say=messages.append)
    assert len(messages) == 1 and "17 of 67 frames have no image" in messages[0]
    assert scene.n_views == 50 and scene.i_test.tolist() == [0, 8, 16, 24, 32, 40, 48]
    expected = pinhole_canvas([FOX_CAMERA.downscaled(8)], FOX_CAMERA.downscaled(8).fx)
    assert (scene.width, scene.height) == expected and scene.focal == pytest.approx(1375.52 / 8)
    assert scene.width >= 120 and scene.height >= 225  # of 135 x 240: the crop is small
    meta = json.loads((fox_dir / "transforms.json").read_text())
    names = sorted(f["file_path"] for f in meta["frames"] if (fox_dir / f["file_path"]).is_file())
    listed = {f["file_path"]: np.asarray(f["transform_matrix"]) for f in meta["frames"]}
    scale = np.cbrt(np.linalg.det(scene.scene_to_world[:3, :3]))
    for k in (0, 17, 49):  # cameras mapped back to the json's frame
        back = scene.scene_to_world @ np.vstack([scene.poses[k], [0, 0, 0, 1]])
        back[:3, :3] /= scale
        np.testing.assert_allclose(back, listed[names[k]], atol=1e-4)
    assert np.abs(scene.poses[:, :3, 3]).max() == pytest.approx(1.0, abs=1e-6)


def test_enerf_train_on_a_capture_stores_the_scene_transform(tmp_path, capsys):
    """``enerf train --datadir`` on a written capture (auto-detected): trains, scores the held-out
    frames, and the checkpoint carries the transform back to the capture's frame."""
    from enerf.checkpoint import load_checkpoint

    scene_dir = write_capture(tmp_path / "cap", n=9, size=(16, 12), missing=(4,))
    basedir = tmp_path / "runs"
    code = main(["train", "--preset", "none", "--datadir", str(scene_dir), "--basedir", str(basedir), "--expname", "cap", "--iters", "3",
                 "--netdepth", "2", "--netwidth", "16", "--view_width", "8", "--multires", "2", "--multires_views", "1",
                 "--N_samples", "8", "--N_rand", "64", "--kappa_every", "0", "--no_lpips", "--quiet",
                 "--device", "cpu"])
    assert code == 0
    metrics = json.loads((basedir / "cap" / "metrics.json").read_text())
    assert len(metrics["per_image"]) == 1 and metrics["steps"] == 3  # 8 present frames: frame 0 held out
    payload, cfg = load_checkpoint(basedir / "cap" / "checkpoints" / "latest.pt")
    assert cfg.data.dataset_type == "auto"
    stored = payload["extra"]["scene_transform"]
    scene = load_nerfstudio(scene_dir, say=lambda _: None)
    np.testing.assert_allclose(stored["scene_to_world"], scene.scene_to_world, atol=1e-12)
    assert stored["scale"] == pytest.approx(1.0 / np.cbrt(np.linalg.det(scene.scene_to_world[:3, :3])))
