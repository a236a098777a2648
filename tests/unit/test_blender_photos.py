"""A Blender-layout folder (transforms_train.json, transforms_test.json) is decided by its photos:
frames with transparent pixels are a synthetic scene (the Blender preset: white background, the
bounded box, the occupancy grid); photos without alpha, or with alpha opaque everywhere, are a
capture whose settings come from the cameras, as a transforms.json folder's do."""

from __future__ import annotations

import json
import math
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from enerf.cli.train import build_train_parser, train_config
from enerf.data.scene_probe import PHOTOS_NOTE
from enerf.config import DataConfig
from enerf.config.presets import preset_line
from enerf.data.loaders import dataset_type_of, load_scene
from helpers import look_at

FOV = 0.7


def _ring(n: int, radius: float = 4.0, height: float = 1.0) -> list[np.ndarray]:
    """n cameras on a full circle around the origin, looking at it."""
    return [look_at([radius * math.cos(a), radius * math.sin(a), height])
            for a in np.linspace(0, 2 * math.pi, n, endpoint=False)]


def _sweep(n: int) -> list[np.ndarray]:
    """n cameras side by side in the plane y = -4, looking at one point 4 units ahead: forward-facing."""
    return [look_at([0.3 * k, -4.0, 0.0], target=(0.15 * n, 0.0, 0.0)) for k in range(n)]


def _folder(root: Path, channels: int, cameras: list[np.ndarray], n_test: int = 2, transparent: bool = True,
            suffix: str = ".png") -> Path:
    """A Blender-layout folder of 8 x 8 frames: the last ``n_test`` cameras in transforms_test.json.
    ``channels`` 4 with ``transparent``: a corner of each frame has alpha 0, else alpha 255."""
    rng = np.random.default_rng(0)
    splits = {"train": cameras[:len(cameras) - n_test], "test": cameras[len(cameras) - n_test:]}
    for split, poses in splits.items():
        (root / split).mkdir(parents=True)
        frames = []
        for k, c2w in enumerate(poses):
            img = rng.integers(0, 256, (8, 8, channels), dtype=np.uint8)
            if channels == 4:
                img[..., 3] = 255
                if transparent:
                    img[:3, :3, 3] = 0
            iio.imwrite(root / split / f"r_{k}{suffix}", img)
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": c2w.tolist()})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": FOV, "frames": frames}))
    return root


def _resolve(folder: Path):
    args = build_train_parser().parse_args(["--datadir", str(folder), "--device", "cpu"])
    cfg, preset, _, _ = train_config(args, Path("no_data_root"))
    return preset, cfg


def test_transparent_frames_keep_the_blender_preset(tmp_path):
    folder = _folder(tmp_path / "synthetic", 4, _ring(10))
    assert dataset_type_of(folder, "auto") == "blender"
    preset, cfg = _resolve(folder)
    assert (preset.layout, preset.example) == ("blender", "configs/lego_cpu.txt")
    assert cfg.render.white_bkgd and cfg.render.sampler == "torch_grid"
    scene = load_scene(cfg.data, tmp_path, cfg.render.white_bkgd)
    assert (scene.near, scene.far, scene.aabb) == (2.0, 6.0, (-1.5,) * 3 + (1.5,) * 3)  # the Blender loader's


@pytest.mark.parametrize("channels, suffix", [(3, ".png"), (4, ".png"), (3, ".jpg")])
def test_photos_on_a_ring_get_the_capture_settings(tmp_path, channels, suffix):
    """RGB photos, RGBA photos opaque everywhere, JPEG photos: the capture preset by the cameras
    (walk-around: configs/capture_cpu.txt), loaded as a capture: cameras normalised into [-1, 1]^3,
    rays to far 1000, the splits of the two files, no white background."""
    cameras = _ring(10)
    folder = _folder(tmp_path / "photos", channels, cameras, transparent=False, suffix=suffix)
    assert dataset_type_of(folder, "auto") == "nerfstudio"
    preset, cfg = _resolve(folder)
    assert (preset.layout, preset.example) == ("capture", "configs/capture_cpu.txt")
    assert preset.scene.startswith(PHOTOS_NOTE) and "walk-around" in preset.scene
    assert "read as a capture" in preset_line(preset, "auto", False)
    assert (cfg.render.sampler, cfg.field.contraction, cfg.data.scene_kind) == ("proposal", "linf", "walkaround")
    assert not cfg.render.white_bkgd
    scene = load_scene(cfg.data, tmp_path, cfg.render.white_bkgd)
    assert (scene.n_views, scene.width, scene.height, scene.far, scene.use_ndc) == (10, 8, 8, 1000.0, False)
    # sorted by name: test/r_0, test/r_1 (cameras 8, 9), then train/r_0 .. r_7 (cameras 0 .. 7)
    assert scene.i_test.tolist() == [0, 1] and scene.i_train.tolist() == list(range(2, 10))
    assert scene.focal == pytest.approx(0.5 * 8 / math.tan(0.5 * FOV))  # camera_angle_x, as the Blender loader
    centres = scene.poses[:, :, 3]
    assert np.abs(centres).max() == pytest.approx(1.0, abs=1e-5)  # nerfstudio's scale into [-1, 1]^3
    # distances between cameras keep their ratios (a similarity): the ring's chord of one step vs its diameter
    d = np.linalg.norm(centres[2] - centres[3]) / np.linalg.norm(centres[2] - centres[7])
    assert d == pytest.approx(math.sin(math.pi / 10), rel=1e-5)


def test_forward_facing_photos_get_the_forward_settings(tmp_path):
    folder = _folder(tmp_path / "sweep", 3, _sweep(6))
    preset, cfg = _resolve(folder)
    assert (preset.layout, preset.example, cfg.data.scene_kind) == ("llff", "configs/fern_cpu.txt", "forward")
    assert preset.scene.startswith(PHOTOS_NOTE) and "forward-facing" in preset.scene
    scene = load_scene(cfg.data, tmp_path, cfg.render.white_bkgd)
    assert scene.use_ndc and (scene.near, scene.far) == (0.0, 1.0)


def test_dataset_type_blender_still_forces_the_blender_loader(tmp_path):
    folder = _folder(tmp_path / "photos", 3, _ring(6))
    scene = load_scene(DataConfig(datadir=str(folder), dataset_type="blender"), tmp_path)
    assert (scene.near, scene.far, scene.aabb) == (2.0, 6.0, (-1.5,) * 3 + (1.5,) * 3)
    args = build_train_parser().parse_args(["--datadir", str(folder), "--device", "cpu", "--dataset_type", "blender"])
    preset = train_config(args, Path("no_data_root"))[1]
    assert preset.layout == "blender"


def test_testskip_and_a_frame_listed_in_both_files(tmp_path):
    """transforms_test.json listing a training photo too (some recipes copy one file into both): the photo
    is loaded once and is in both splits; --testskip 2 keeps every other test frame."""
    folder = _folder(tmp_path / "photos", 3, _ring(10), n_test=4)
    test = json.loads((folder / "transforms_test.json").read_text())
    train = json.loads((folder / "transforms_train.json").read_text())
    test["frames"].append(train["frames"][0])
    (folder / "transforms_test.json").write_text(json.dumps(test))
    scene = load_scene(DataConfig(datadir=str(folder), testskip=2, llffhold=8), tmp_path)
    # test keeps r_0, r_2 and train/r_0; sorted by name: test/r_0, test/r_2 (0, 1), train/r_0 .. r_5 (2 - 7)
    assert scene.n_views == 8 and scene.i_test.tolist() == [0, 1, 2] and scene.i_train.tolist() == list(range(2, 8))
