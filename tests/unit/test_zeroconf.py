"""`enerf train --datadir DIR` with no config: forward-facing or walk-around from the cameras
(analytic rigs and the real scenes, cameras only), the preset each gets, a Blender folder with
only transforms_train.json, forward-facing captures in NDC, and transforms.json sizes that
disagree with the images (scaled intrinsics against hand values, or one line and exit 2)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from enerf.cli import main
from enerf.cli.train import build_train_parser, train_config
from enerf.data.blender import load_blender
from enerf.data.nerfstudio import load_nerfstudio
from enerf.cameras.scene_kind import classify_cameras
from enerf.data.loaders import read_camera_poses
from conftest import shared_scene
from helpers import look_at


def _arc(degrees: float, n: int = 24) -> np.ndarray:
    """n cameras on a circle of radius 4 at height 1, spanning ``degrees``, looking at the origin."""
    angles = np.radians(np.linspace(0, degrees, n, endpoint=degrees < 360))
    return np.stack([look_at([4 * math.cos(a), 4 * math.sin(a), 1.0]) for a in angles])


def _grid(n: int = 5, step: float = 0.3) -> np.ndarray:
    """An n x n grid of cameras in the plane y = -4, all looking along +y (parallel axes)."""
    return np.stack([look_at([x, -4.0, z], target=(x, 0.0, z)) for x in np.arange(n) * step for z in np.arange(n) * step])


def test_analytic_rigs():
    grid = classify_cameras(_grid())
    assert grid.kind == "forward" and grid.spread_deg == pytest.approx(0.0, abs=1e-5) and grid.around_deg is None
    # a grid that converges on a point 4 units ahead: cameras within a few degrees of each other
    converging = np.stack([look_at([x, -4.0, z], target=(0.6, 0.0, 0.6)) for x in (0, 0.6, 1.2) for z in (0, 0.6, 1.2)])
    found = classify_cameras(converging)
    corner = math.degrees(math.atan(math.hypot(0.6, 0.6) / 4))  # the 4 corner cameras: 11.9 deg off the mean axis
    assert found.kind == "forward" and found.spread_deg == pytest.approx(corner, abs=0.3)
    assert found.around_deg == pytest.approx(corner, abs=0.3)
    circle = classify_cameras(_arc(360))
    # every camera looks 14 deg below the horizon: the mean direction is straight down, 76 deg from each
    assert circle.kind == "walkaround" and circle.spread_deg == pytest.approx(90 - math.degrees(math.atan(1 / 4)))
    half = classify_cameras(_arc(180))
    # directions on a half circle, 14 deg below the horizon: the mean lies along the arc's middle
    assert half.kind == "walkaround" and 70 < half.spread_deg < 90 and 70 < half.around_deg < 90
    narrow = classify_cameras(_arc(40))  # +-20 deg around one object: still forward-facing
    assert narrow.kind == "forward" and narrow.spread_deg < 20


@pytest.mark.parametrize("folder, marker, kind", [("nerf_llff_data/fern", "poses_bounds.npy", "forward"),
                                                  ("captures/sargos", "transforms.json", "forward"),
                                                  ("nerfstudio/fox", "transforms.json", "walkaround"),
                                                  ("captures/boardgame", "transforms.json", "walkaround")])
def test_real_scenes_from_their_cameras(shared_data, folder, marker, kind):
    path = shared_scene(shared_data, folder, marker)
    layout = "llff" if marker == "poses_bounds.npy" else "nerfstudio"
    found = classify_cameras(read_camera_poses(path, layout))
    assert found.kind == kind, found
    # far from the 30-degree threshold on both sides
    assert found.spread_deg < 15 if kind == "forward" else found.spread_deg > 40


def _resolve(argv: list[str]):
    args = build_train_parser().parse_args([*argv, "--preset", "auto"])
    cfg, preset, device, _ = train_config(args, Path("no_data_root"))
    return preset, device == "cuda", cfg


def _capture(folder: Path, cameras: np.ndarray, size=(16, 12), w=None, h=None, fl=12.0) -> Path:
    """A PINHOLE transforms.json of ``cameras`` with random images ``images/f_NN.png`` of ``size``
    (w / h written as given, default the images' size)."""
    rng = np.random.default_rng(0)
    (folder / "images").mkdir(parents=True)
    frames = []
    for k, c2w in enumerate(cameras):
        iio.imwrite(folder / f"images/f_{k:02d}.png", rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
        frames.append({"file_path": f"images/f_{k:02d}.png", "transform_matrix": np.asarray(c2w).tolist()})
    meta = {"camera_model": "PINHOLE", "fl_x": fl, "fl_y": fl, "cx": (w or size[0]) / 2 + 0.5,
            "cy": (h or size[1]) / 2 - 0.25, "w": w or size[0], "h": h or size[1], "frames": frames}
    (folder / "transforms.json").write_text(json.dumps(meta))
    return folder


def test_presets_by_what_the_cameras_show(tmp_path, monkeypatch, scene_dir):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    around = _capture(tmp_path / "around", _arc(360, 8))
    preset, _, cfg = _resolve(["--datadir", str(around)])
    assert (preset.name, preset.layout, preset.recipe, preset.example) == ("cpu", "capture", "capture_cpu",
                                                                         "configs/capture_cpu.txt")
    assert (cfg.data.scene_kind, cfg.field.contraction, cfg.data.far, cfg.render.lindisp_from) == ("walkaround", "linf", 1000.0, 1.0)
    assert preset.scene.startswith("walk-around (viewing directions within") and "--scene_kind forward if not" in preset.scene
    ahead = _capture(tmp_path / "ahead", _grid(3))
    preset, _, cfg = _resolve(["--datadir", str(ahead)])
    assert (preset.layout, cfg.data.scene_kind, cfg.field.contraction, cfg.field.grid_aabb) == (
        "llff", "forward", "none", (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0))
    # the flag overrides what the cameras show
    preset, _, cfg = _resolve(["--datadir", str(ahead), "--scene_kind", "walkaround"])
    assert (preset.layout, cfg.data.scene_kind, preset.scene) == ("capture", "walkaround", "walk-around (--scene_kind walkaround)")
    # CUDA: the GPU settings of each layout (the paper's only with --preset paper, and only for LLFF / Blender)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    preset, cuda, cfg = _resolve(["--datadir", str(around)])
    assert cuda and (preset.name, preset.layout, cfg.data.factor, cfg.train.n_rand) == ("cuda", "capture", 2, 4096)
    preset, _, cfg = _resolve(["--datadir", str(ahead)])
    assert (preset.name, preset.layout, cfg.data.factor, cfg.data.scene_kind) == ("cuda", "llff", 4, "forward")
    preset, _, cfg = _resolve(["--datadir", str(scene_dir)])
    assert (preset.name, preset.layout, cfg.data.scene_kind) == ("cuda", "llff", "forward")


def test_forward_capture_in_ndc_looks_at_its_focus_depth(tmp_path):
    """A forward-facing capture loads with NDC rays; the point the cameras converge on lies about
    NDC_FOCUS_DEPTH (3) in front of the average camera, on its axis."""
    target = np.array([0.6, 2.0, 0.6])
    cameras = np.stack([look_at([x, -4.0, z], target=target) for x in (0, 0.6, 1.2) for z in (0, 0.6, 1.2)])
    scene = load_nerfstudio(_capture(tmp_path / "fwd", cameras), llffhold=0, ndc=True)
    assert scene.use_ndc and (scene.near, scene.far, scene.aabb) == (0.0, 1.0, None)
    point = np.linalg.inv(scene.scene_to_world) @ np.append(target, 1.0)
    # by hand: the target is 6 units ahead of the centre camera, sqrt(36 + 0.36) of the 4 edge ones and
    # sqrt(36 + 0.72) of the corners; the median (an edge) is scaled to 3, and the average camera stands
    # at (0.6, -4, 0.6) looking straight at the target
    np.testing.assert_allclose(point[:3], [0.0, 0.0, -3.0 * 6 / math.sqrt(36.36)], atol=1e-6)
    np.testing.assert_allclose(scene.poses[:, :3, 3].mean(0), 0.0, atol=1e-9)


def test_blender_folder_with_only_transforms_train_holds_out_every_8th(tmp_path):
    folder = tmp_path / "train_only"
    (folder / "train").mkdir(parents=True)
    frames = []
    for k, c2w in enumerate(_arc(360, 10)):
        frame = np.full((8, 8, 4), 255, np.uint8)
        frame[0, 0, 3] = 0  # a transparent pixel: rendered frames (photos are a capture: test_blender_photos.py)
        iio.imwrite(folder / f"train/r_{k}.png", frame)
        frames.append({"file_path": f"./train/r_{k}", "transform_matrix": c2w.tolist()})
    (folder / "transforms_train.json").write_text(json.dumps({"camera_angle_x": 0.7, "frames": frames}))
    scene = load_blender(folder, llffhold=8)
    assert scene.i_train.tolist() == list(range(8)) and scene.i_test.tolist() == [8, 9]
    expected = np.stack([_arc(360, 10)[k][:3] for k in (1, 2, 3, 4, 5, 6, 7, 9, 0, 8)])
    np.testing.assert_allclose(scene.poses, expected, atol=1e-6)  # train frames 1-7, 9, then test frames 0, 8
    preset, _, cfg = _resolve(["--datadir", str(folder), "--device", "cpu"])
    assert (preset.layout, cfg.render.sampler, cfg.data.scene_kind) == ("blender", "torch_grid", "auto")


def test_declared_size_of_the_original_photos_scales_the_intrinsics(tmp_path):
    """w / h of 4x the images' size, same aspect ratio: fl, cx, cy scaled by 1/4 (by hand), one warning."""
    folder = _capture(tmp_path / "big", _arc(90, 4), size=(16, 12), w=64, h=48, fl=48.0)
    said = []
    scene = load_nerfstudio(folder, llffhold=0, say=said.append)
    # fl 48 -> 12 px; cx 32.5 -> 8.125, cy 23.75 -> 5.9375: undistorted to a centred 16 x 12 canvas... or a crop of it
    assert scene.focal == pytest.approx(12.0)
    assert len(said) == 1 and "w = 64, h = 48 but the images are 16x12" in said[0] and "scaled by 0.25" in said[0]
    from enerf.data.transforms_reader import Frame, frame_camera

    meta = json.loads((folder / "transforms.json").read_text())
    frame = Frame(0, folder / "images/f_00.png", "images/f_00", np.eye(4), meta["frames"][0])
    camera = frame_camera(meta, frame, folder / "transforms.json", (16, 12))
    assert (camera.fx, camera.fy, camera.cx, camera.cy) == (12.0, 12.0, 32.5 / 4, 23.75 / 4)


def test_declared_size_of_another_aspect_ratio_is_refused(tmp_path, capsys):
    folder = _capture(tmp_path / "odd", _arc(90, 4), size=(16, 12), w=64, h=64)
    basedir = tmp_path / "runs"
    code = main(["train", "--datadir", str(folder), "--basedir", str(basedir), "--iters", "1", "--quiet", "--no_lpips",
                 "--device", "cpu", "--preset", "none"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "f_00.png: image is 16x12 but transforms.json says w = 64, h = 64, another aspect ratio" in err
    assert not basedir.exists()


def test_a_folder_of_unposed_photos_says_how_to_pose_them(tmp_path):
    """``enerf train --datadir PHOTOS`` on photos without cameras: one line naming enerf data images,
    exit 2."""
    import subprocess
    import sys

    from PIL import Image

    Image.new("RGB", (8, 6)).save(tmp_path / "a.jpg")
    done = subprocess.run([sys.executable, "-m", "enerf", "train", "--datadir", str(tmp_path), "--iters", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and f"enerf data images {tmp_path} --out SCENE" in errors[0]
