"""``enerf data colmap``: pose conventions (against LLFF's own construction, enerf's rays and the
published fern poses), bad input through the CLI, and fern's photos posed again by pycolmap."""

import importlib.util
import json

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from enerf.cli import main
from enerf.ingest.colmap_poses import (
    depth_bounds,
    llff_pose_from_cam_from_world,
    opengl_c2w_from_cam_from_world,
    pose_errors,
    poses_bounds_rows,
    similarity_align,
)
from helpers import cam_from_world_from_llff_pose
from enerf.data.llff import load_llff, read_poses_bounds
from enerf.data.nerfstudio import load_nerfstudio
from enerf.cameras.rays import pixel_rays

HAS_PYCOLMAP = importlib.util.find_spec("pycolmap") is not None
needs_pycolmap = pytest.mark.skipif(not HAS_PYCOLMAP, reason='pycolmap not installed (pip install -e ".[colmap]")')


def _random_cameras(n, seed=0):
    """n cam_from_world transforms (R, t) of cameras about 4 units from the origin, looking near it."""
    rng = np.random.default_rng(seed)
    cams = []
    for k in range(n):
        rot = Rotation.from_rotvec(rng.normal(0, 0.3, 3)).as_matrix()
        cams.append((rot, np.array([0.2, -0.1, 4.0]) + rng.normal(0, 0.3, 3)))
    return cams


def _imgs2poses_llff(rotation, translation, hwf):
    """LLFF's imgs2poses.py: inv([R t; 0 1])[:3, :4] then the column order [y, x, -z, t], hwf appended."""
    w2c = np.eye(4)
    w2c[:3, :3], w2c[:3, 3] = rotation, translation
    c2w = np.linalg.inv(w2c)[:3, :4]
    pose = np.concatenate([c2w, np.array(hwf, dtype=np.float64)[:, None]], 1)
    return np.concatenate([pose[:, 1:2], pose[:, 0:1], -pose[:, 2:3], pose[:, 3:5]], 1)


def test_llff_pose_matches_imgs2poses_and_inverts():
    hwf = (30.0, 40.0, 35.0)
    for rot, t in _random_cameras(5):
        pose = llff_pose_from_cam_from_world(rot, t, hwf)
        np.testing.assert_allclose(pose, _imgs2poses_llff(rot, t, hwf), atol=1e-12)
        rot_back, t_back = cam_from_world_from_llff_pose(pose)
        np.testing.assert_allclose(rot_back, rot, atol=1e-12)
        np.testing.assert_allclose(t_back, t, atol=1e-12)


def _pixel_point(rot, t, height, width, focal, col, row, depth):
    """The world point COLMAP's pinhole (OpenCV axes, principal point at the centre) images at the
    centre of pixel (col, row), ``depth`` in front of the camera."""
    x_cam = depth * np.array([(col + 0.5 - width / 2) / focal, (row + 0.5 - height / 2) / focal, 1.0])
    return rot.T @ (x_cam - t)


def _ray_hits(origin, direction, point):
    """Distance from ``point`` to the ray and the ray parameter of the closest approach."""
    s = float(np.dot(point - origin, direction) / np.dot(direction, direction))
    return float(np.linalg.norm(origin + s * direction - point)), s


def test_written_poses_give_enerf_rays_through_the_colmap_projections(tmp_path):
    height, width, focal = 30, 40, 35.0
    cams = _random_cameras(4, seed=1)
    (tmp_path / "images").mkdir()
    for k in range(len(cams)):
        iio.imwrite(tmp_path / "images" / f"{k:03d}.png", np.zeros((height, width, 3), np.uint8))
    poses = np.stack([llff_pose_from_cam_from_world(r, t, (height, width, focal)) for r, t in cams])
    np.save(tmp_path / "poses_bounds.npy", poses_bounds_rows(poses, np.tile([1.0, 10.0], (len(cams), 1))))
    scene = load_llff(tmp_path, factor=1, recenter=False, bd_factor=None, use_ndc=False, llffhold=0)
    assert scene.focal == focal
    rng = np.random.default_rng(2)
    for k, (rot, t) in enumerate(cams):
        for c2w in (scene.poses[k], opengl_c2w_from_cam_from_world(rot, t)[:3]):
            origins, dirs = pixel_rays(height, width, focal, torch.tensor(c2w, dtype=torch.float32))
            for _ in range(5):
                col, row, depth = rng.integers(width), rng.integers(height), rng.uniform(1, 8)
                point = _pixel_point(rot, t, height, width, focal, col, row, depth)
                miss, s = _ray_hits(origins[row, col].double().numpy(), dirs[row, col].double().numpy(), point)
                assert miss < 1e-4 and s == pytest.approx(depth, rel=1e-4)  # enerf's dirs have camera z = -1


def test_published_fern_poses_round_trip_and_are_rotations(fern_dir):
    poses, _ = read_poses_bounds(fern_dir / "poses_bounds.npy")
    for pose in poses:
        rot, t = cam_from_world_from_llff_pose(pose)
        np.testing.assert_allclose(rot @ rot.T, np.eye(3), atol=1e-5)
        assert np.linalg.det(rot) == pytest.approx(1.0, abs=1e-5)  # [down, right, back] read as LLFF's order
        np.testing.assert_allclose(llff_pose_from_cam_from_world(rot, t, pose[:, 4]), pose, atol=1e-9)


@pytest.mark.parametrize("n_points, percent", [(6000, 0.1), (600, 0.5)])
def test_depth_bounds_are_the_percentiles_of_known_depths(n_points, percent):
    """LLFF's 0.1 / 99.9 percentiles with thousands of points; 3 points beyond each bound with fewer."""
    rng = np.random.default_rng(3)
    rot, t = _random_cameras(1, seed=4)[0]
    depths = rng.uniform(2.0, 50.0, n_points)
    x_cam = np.stack([rng.uniform(-1, 1, n_points) * depths, rng.uniform(-1, 1, n_points) * depths, depths], 1)
    points = (x_cam - t) @ rot  # rot.T @ (x - t) per row
    near, far = depth_bounds(points, rot, t)
    assert near == pytest.approx(np.percentile(depths, percent), rel=1e-9)
    assert far == pytest.approx(np.percentile(depths, 100 - percent), rel=1e-9)
    assert np.sum(depths < near) == np.sum(depths > far) == int(n_points * percent / 100)


def _photos(folder, sizes, seed=0):
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for k, (w, h) in enumerate(sizes):
        iio.imwrite(folder / f"p{k}.png", rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    return folder


def _fails(capsys, argv, out, *words, action="colmap"):
    """``enerf data ACTION ARGV`` exits 2 with one line on stderr holding ``words``, leaving no
    ``out`` and no hidden build folder beside it; returns what it printed on stdout."""
    code = main(["data", action, *argv])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    assert not out.exists() and [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")] == []
    return captured.out


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "scene"
    two = _photos(tmp_path / "two", [(40, 30)] * 2)
    (two / "notes.txt").write_text("not a photo")
    _fails(capsys, ["--images", str(two), "--out", str(out)], out, "2 png / jpg photo(s)", "at least 3")
    mixed = _photos(tmp_path / "mixed", [(40, 30), (40, 30), (30, 40)])
    _fails(capsys, ["--images", str(mixed), "--out", str(out)], out, "different sizes", "p2.png is 30x40")
    broken = _photos(tmp_path / "broken", [(40, 30)] * 3)
    (broken / "p1.png").write_bytes(b"not a png")
    _fails(capsys, ["--images", str(broken), "--out", str(out)], out, "p1.png", "unreadable")
    _fails(capsys, ["--images", str(tmp_path / "nowhere"), "--out", str(out)], out, "not found")
    small = _photos(tmp_path / "small", [(6, 5)] * 3)
    _fails(capsys, ["--images", str(small), "--out", str(out), "--factors", "8"], out, "smaller than factor 8")
    out.mkdir()
    code = main(["data", "colmap", "--images", str(mixed), "--out", str(out)])
    assert code == 2 and "already exists" in capsys.readouterr().err and list(out.iterdir()) == []
    inside = _photos(out / "images", [(40, 30)] * 3)
    code = main(["data", "colmap", "--images", str(inside), "--out", str(out), "--overwrite"])
    assert code == 2 and "inside --out" in capsys.readouterr().err and len(list(inside.iterdir())) == 3


def test_missing_pycolmap_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pycolmap", None)  # import pycolmap -> ImportError
    photos = _photos(tmp_path / "photos", [(40, 30)] * 3)
    _fails(capsys, ["--images", str(photos), "--out", str(tmp_path / "scene")], tmp_path / "scene",
           'pip install -e ".[colmap]"')


@needs_pycolmap
def test_photos_that_do_not_register_leave_nothing(tmp_path, capsys):
    photos = _photos(tmp_path / "noise", [(160, 120)] * 4)  # independent noise: no pair verifies
    (photos / "notes.txt").write_text("not a photo")
    out = tmp_path / "scene"
    printed = _fails(capsys, ["--images", str(photos), "--out", str(out)], out, "registered")
    assert "photos: 4 of 160x120" in printed and "skipped 1 other file(s): notes.txt" in printed


def test_alignment_recovers_a_known_similarity_and_its_pose_errors():
    rng = np.random.default_rng(5)
    rot = Rotation.from_rotvec([0.3, -0.2, 1.0]).as_matrix()
    poses = np.stack([llff_pose_from_cam_from_world(r, t, (30, 40, 35)) for r, t in _random_cameras(6, seed=6)])
    moved = poses.copy()
    moved[:, :, :3] = rot @ poses[:, :, :3]
    moved[:, :, 3] = 2.5 * poses[:, :, 3] @ rot.T + [1.0, 2.0, 3.0]
    s, r, t = similarity_align(poses[:, :, 3], moved[:, :, 3])
    assert s == pytest.approx(2.5) and np.allclose(r, rot) and np.allclose(t, [1.0, 2.0, 3.0])
    tilt = Rotation.from_rotvec([0.0, 0.0, np.radians(2.0)]).as_matrix()
    moved[0, :, :3] = moved[0, :, :3] @ tilt  # camera 0 turned 2 degrees about its own axis
    errors = pose_errors(poses, moved)
    assert errors["scale"] == pytest.approx(2.5) and np.allclose(errors["centre"], 0, atol=1e-9)
    np.testing.assert_allclose(errors["degrees"], [2.0, 0, 0, 0, 0, 0], atol=1e-5)


@needs_pycolmap
def test_fern_photos_posed_again_match_the_published_poses(fern_dir, tmp_path, capsys):
    """fern's images_8/ (20 photos, 504 x 378) through the whole command (about 10 s on 2 cores)."""
    out = tmp_path / "fern"
    assert main(["data", "colmap", "--images", str(fern_dir / "images_8"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "20 of 20 images registered" in printed and "extraction:" in printed and "mapping:" in printed
    ours, our_bounds = read_poses_bounds(out / "poses_bounds.npy")
    theirs, their_bounds = read_poses_bounds(fern_dir / "poses_bounds.npy")
    errors = pose_errors(ours, theirs)
    assert np.median(errors["centre"]) <= 0.01 and np.median(errors["degrees"]) <= 1.0
    np.testing.assert_allclose(errors["scale"] * our_bounds, their_bounds, rtol=0.2)
    assert ours[0, :2, 4].tolist() == [378, 504]
    assert ours[0, 2, 4] == pytest.approx(theirs[0, 2, 4] / 8, rel=0.05)  # the release's focal is for 4032 x 3024
    scene = load_llff(out, factor=8)  # images_8/ of the new scene: 63 x 47
    assert (scene.height, scene.width, scene.n_views) == (47, 63, 20)
    np.testing.assert_allclose(iio.imread(out / "images" / "image005.png"), iio.imread(fern_dir / "images_8" / "image005.png"))
    assert {"cameras.bin", "images.bin", "points3D.bin"} <= {p.name for p in (out / "sparse" / "0").iterdir()}


@needs_pycolmap
def test_blender_layout_writes_transforms_json(fern_dir, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    for k in range(0, 20, 4):  # every 4th of fern's photos at 1/8 scale: 5 photos
        (photos / f"image{k:03d}.png").write_bytes((fern_dir / "images_8" / f"image{k:03d}.png").read_bytes())
    noise = np.random.default_rng(7).integers(0, 256, (378, 504, 3), dtype=np.uint8)
    iio.imwrite(photos / "noise.png", noise)  # does not register; the other 5 make the scene
    out = tmp_path / "fern"
    assert main(["data", "colmap", "--images", str(photos), "--out", str(out), "--layout", "blender",
                 "--factors"]) == 0
    assert "5 of 6 images registered (83 %); 1 did not register and were left out: noise.png" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "images").iterdir()) == [f"image{k:03d}.png" for k in range(0, 20, 4)]
    meta = json.loads((out / "transforms.json").read_text())
    assert not (out / "poses_bounds.npy").exists() and not list(out.glob("images_*"))
    assert len(meta["frames"]) == 5 and (meta["w"], meta["h"]) == (504, 378)
    assert meta["camera_angle_x"] == pytest.approx(2 * np.arctan(252 / meta["fl_x"]))
    rotation = np.array([f["transform_matrix"] for f in meta["frames"]])[:, :3, :3]
    np.testing.assert_allclose(rotation @ rotation.transpose(0, 2, 1), np.tile(np.eye(3), (5, 1, 1)), atol=1e-9)
    assert (out / "images" / meta["frames"][0]["file_path"].split("/")[-1]).is_file()
    assert "applied_transform" not in meta and meta["camera_model"] == "OPENCV"  # SIMPLE_RADIAL, as nerfstudio maps it
    scene = load_nerfstudio(out, llffhold=0)  # the single transforms.json loads with the nerfstudio loader
    assert scene.n_views == 5 and scene.focal == pytest.approx(meta["fl_x"])
    scale = np.cbrt(np.linalg.det(scene.scene_to_world[:3, :3]))
    back = scene.scene_to_world @ np.concatenate([scene.poses, np.tile([0, 0, 0, 1.0], (5, 1, 1))], 1)
    back[:, :3, :3] /= scale
    np.testing.assert_allclose(back, [f["transform_matrix"] for f in meta["frames"]], atol=1e-5)


@needs_pycolmap
def test_nerfstudio_layout_matches_the_colmap_model_and_trains(fern_dir, tmp_path, capsys):
    """--layout nerfstudio --camera_model OPENCV on 5 of fern's photos: the frames are the COLMAP
    model's cameras turned z-up (read back with pycolmap), the camera its OPENCV parameters, and
    enerf train --datadir trains on the folder."""
    import pycolmap

    photos = tmp_path / "photos"
    photos.mkdir()
    for k in range(0, 20, 4):
        (photos / f"image{k:03d}.png").write_bytes((fern_dir / "images_8" / f"image{k:03d}.png").read_bytes())
    out = tmp_path / "fern"
    assert main(["data", "colmap", "--images", str(photos), "--out", str(out), "--layout", "nerfstudio",
                 "--camera_model", "OPENCV", "--factors", "2"]) == 0
    assert "5 of 5 images registered (100 %)" in capsys.readouterr().out
    meta = json.loads((out / "transforms.json").read_text())
    model = pycolmap.Reconstruction(out / "sparse" / "0")
    camera = next(iter(model.cameras.values()))
    assert camera.model.name == "OPENCV" and meta["camera_model"] == "OPENCV"
    assert [meta[k] for k in ("fl_x", "fl_y", "cx", "cy", "k1", "k2", "p1", "p2")] == pytest.approx(list(camera.params))
    turn = np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])  # ns-process-data: COLMAP's world turned z-up
    np.testing.assert_allclose(np.asarray(meta["applied_transform"])[:, :3], turn)
    frames = {f["file_path"]: np.asarray(f["transform_matrix"]) for f in meta["frames"]}
    for image in model.images.values():
        pose = image.cam_from_world()
        rot, t = pose.rotation.matrix(), np.asarray(pose.translation)
        c2w = np.eye(4)
        c2w[:3, :3], c2w[:3, 3] = rot.T @ np.diag([1.0, -1.0, -1.0]), -rot.T @ t  # OpenCV -> OpenGL camera axes
        c2w[:3] = turn @ c2w[:3]
        np.testing.assert_allclose(frames[f"images/{image.name}"], c2w, atol=1e-6)
    code = main(["train", "--preset", "none", "--datadir", str(out), "--factor", "2", "--basedir", str(tmp_path / "runs"), "--expname",
                 "f", "--iters", "2", "--netdepth", "2", "--netwidth", "16", "--N_samples", "8", "--N_rand", "64",
                 "--kappa_every", "0", "--no_lpips", "--quiet", "--device", "cpu"])
    assert code == 0 and json.loads((tmp_path / "runs" / "f" / "metrics.json").read_text())["steps"] == 2


def test_llff_layout_refuses_a_two_focal_camera_model(tmp_path, capsys):
    photos = _photos(tmp_path / "photos", [(40, 30)] * 3)
    _fails(capsys, ["--images", str(photos), "--out", str(tmp_path / "scene"), "--camera_model", "OPENCV"],
           tmp_path / "scene", "--camera_model OPENCV needs --layout nerfstudio")


class _FakeModel:
    def __init__(self, n_images):
        self.n = n_images

    def num_reg_images(self):
        return self.n

    def num_points3D(self):
        return 10 * self.n

    def compute_mean_reprojection_error(self):
        return 0.5


def test_mapper_keeps_the_largest_of_several_models(tmp_path):
    """The issue's case: a degenerate first model (2 images) and a second one with all 62; the
    mapper runs with multiple_models and keeps the second as sparse/0."""
    from types import SimpleNamespace

    from enerf.ingest.colmap import _map

    seen = {}

    def incremental_mapping(database, images, sparse, options, next_image_callback=None):
        seen["multiple_models"] = options.multiple_models
        for k in (0, 1):
            (sparse / str(k)).mkdir()
            (sparse / str(k) / "which").write_text(str(k))
        return {0: _FakeModel(2), 1: _FakeModel(62)}

    fake = SimpleNamespace(set_random_seed=lambda seed: None, IncrementalPipelineOptions=SimpleNamespace,
                           incremental_mapping=incremental_mapping)
    said = []
    model = _map(fake, tmp_path, 62, 0, said.append)
    assert seen["multiple_models"] is True and model.num_reg_images() == 62
    assert sorted(p.name for p in (tmp_path / "sparse").iterdir()) == ["0"]
    assert (tmp_path / "sparse" / "0" / "which").read_text() == "1"
    assert "62 / 62 images registered (the largest of 2 models: 62, 2 images)" in said[0]
