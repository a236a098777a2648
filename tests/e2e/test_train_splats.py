"""Training that ends in splats (``enerf.train.splat_stage``): on a tiny walk-around capture,
``enerf train --splat_seconds S`` writes ``<run>/splats.ply`` beside the checkpoint, scores it on the
held-out views and keeps the field's figures in metrics.json with the splats' under ``splats``.

Checked independently: the PLY's vertex count (plyfile) is the count metrics.json reports; each held-out
view's splat PSNR is numpy's PSNR of the rendering written to ``test_views_splats/`` against the photo
(within the PNG's 8-bit rounding); each view's ``uncovered`` is the share of pixels under half opacity of
the file's splats (read by plyfile, moved into the scene frame with numpy) drawn by ``rasterize``; the
field's per-view PSNRs are those of the field's own evaluation. The capture presets bake for
``CAPTURE_SPLAT_SECONDS``; a short run bakes no longer than it trained (``bake_seconds``)."""

from __future__ import annotations

import json
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from enerf.cli import main
from enerf.cli.train import read_config_file
from enerf.config import RunConfig, TrainConfig
from enerf.config import presets
from enerf.loaded_run import load_run
from enerf.splats import Splats
from enerf.cameras.pinhole import Pinhole
from enerf.splats.rasterize import rasterize
from enerf.train.splat_stage import bake_seconds

plyfile = pytest.importorskip("plyfile")

TINY = ["--preset", "none", "--netdepth", "2", "--netwidth", "16", "--view_width", "8", "--multires", "3",
        "--multires_views", "1", "--N_samples", "16", "--N_rand", "256", "--no_lpips", "--quiet", "--device", "cpu",
        "--kappa_every", "0", "--video", "none", "--eval_every", "0", "--llffhold", "4"]


def _capture(folder: Path, n: int = 12, size: tuple[int, int] = (40, 30)) -> Path:
    """``n`` PINHOLE cameras on a ring of radius 3 around the origin (OpenGL axes), smooth images."""
    (folder / "images").mkdir(parents=True)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w]
    frames = []
    for k in range(n):
        a = 2 * np.pi * k / n
        eye = np.array([3 * np.cos(a), 3 * np.sin(a), 0.8])
        back = eye / np.linalg.norm(eye)
        right = np.cross([0.0, 0.0, 1.0], back)
        right /= np.linalg.norm(right)
        c2w = np.eye(4)
        c2w[:3, :3] = np.stack([right, np.cross(back, right), back], 1)
        c2w[:3, 3] = eye
        image = np.stack([xx / w, yy / h, 0.5 + 0.4 * np.sin(xx / 4 + k)], -1)
        iio.imwrite(folder / f"images/f_{k:02d}.png", (image * 255).astype(np.uint8))
        frames.append({"file_path": f"images/f_{k:02d}.png", "transform_matrix": c2w.tolist()})
    meta = {"camera_model": "PINHOLE", "fl_x": 35.0, "fl_y": 35.0, "cx": w / 2, "cy": h / 2, "w": w, "h": h,
            "frames": frames}
    (folder / "transforms.json").write_text(json.dumps(meta))
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("train_splats")
    capture = _capture(base / "capture")
    assert main(["train", "--datadir", str(capture), "--basedir", str(base / "runs"), "--expname", "r", "--iters",
                 "40", "--splat_seconds", "3", "--cap_outputs", "0", *TINY]) == 0
    return base / "runs" / "r"


def test_the_run_ends_in_a_scored_splat_file(run):
    metrics = json.loads((run / "metrics.json").read_text())
    scored = json.loads((run / "metrics_splats.json").read_text())
    splats = metrics["splats"]
    vertices = plyfile.PlyData.read(str(run / "splats.ply"))["vertex"].count
    assert splats["splat_count"] == vertices == scored["splat_count"] > 0
    assert splats["bake"]["fit_steps"] > 0 and splats["psnr"] == scored["psnr"]
    held_out = [p["view"] for p in metrics["per_image"]]
    assert [v["view"] for v in splats["per_view"]] == held_out == [p["view"] for p in scored["per_image"]]
    photos = sorted((run.parent.parent / "capture" / "images").glob("*.png"))
    for view in splats["per_view"]:
        pred = iio.imread(run / "test_views_splats" / f"view_{view['view']:03d}.png").astype(np.float64) / 255
        photo = iio.imread(photos[view["view"]]).astype(np.float64) / 255
        psnr = -10 * np.log10(np.mean((pred - photo) ** 2))
        assert abs(psnr - view["psnr"]) < 0.15, (psnr, view)
    # the field's own figures stay metrics.json's
    assert metrics["psnr"] == pytest.approx(np.mean([p["psnr"] for p in metrics["per_image"]]))


def test_uncovered_is_the_share_of_pixels_under_half_opacity(run):
    metrics = json.loads((run / "metrics.json").read_text())
    loaded = load_run(run / "checkpoints" / "latest.pt", Path("data"), images=False)
    ply = plyfile.PlyData.read(str(run / "splats.ply"))
    v = ply["vertex"]
    world = np.stack([v["x"], v["y"], v["z"]], 1).astype(np.float64)
    to_scene = np.linalg.inv(np.asarray(loaded.scene.scene_to_world, np.float64))  # a similarity s R x + t
    scale = np.cbrt(np.linalg.det(to_scene[:3, :3]))
    means = world @ to_scene[:3, :3].T + to_scene[:3, 3]
    rot = to_scene[:3, :3] / scale
    quats = np.stack([v[f"rot_{i}"] for i in range(4)], 1)
    # rotate each Gaussian's frame: R_new = R_frame @ R_quat, as a quaternion product (numpy)
    w_ = np.sqrt(max(0.0, 1 + np.trace(rot))) / 2
    qf = np.array([w_, (rot[2, 1] - rot[1, 2]) / (4 * w_), (rot[0, 2] - rot[2, 0]) / (4 * w_),
                   (rot[1, 0] - rot[0, 1]) / (4 * w_)])
    a, b = qf, quats / np.linalg.norm(quats, axis=1, keepdims=True)
    prod = np.stack([a[0] * b[:, 0] - a[1] * b[:, 1] - a[2] * b[:, 2] - a[3] * b[:, 3],
                     a[0] * b[:, 1] + a[1] * b[:, 0] + a[2] * b[:, 3] - a[3] * b[:, 2],
                     a[0] * b[:, 2] - a[1] * b[:, 3] + a[2] * b[:, 0] + a[3] * b[:, 1],
                     a[0] * b[:, 3] + a[1] * b[:, 2] - a[2] * b[:, 1] + a[3] * b[:, 0]], 1)
    scales = np.stack([v[f"scale_{i}"] for i in range(3)], 1) + np.log(scale)
    sh = np.stack([v[f"f_dc_{i}"] for i in range(3)], 1)[:, None]
    splats = Splats(torch.tensor(means, dtype=torch.float32), torch.tensor(scales, dtype=torch.float32),
                    torch.tensor(prod, dtype=torch.float32), torch.tensor(np.asarray(v["opacity"]), dtype=torch.float32),
                    torch.tensor(sh, dtype=torch.float32), antialiased="enerf antialiased" in ply.comments)
    scene = loaded.scene
    for view in metrics["splats"]["per_view"]:
        cam = Pinhole(torch.as_tensor(scene.poses[view["view"]], dtype=torch.float32)[:3, :4], scene.width,
                          scene.height, float(scene.focal))
        with torch.no_grad():
            acc = rasterize(splats, cam)["acc"].numpy()
        assert abs(float(np.mean(acc < 0.5)) - view["uncovered"]) <= 2.0 / acc.size, view


def test_capture_presets_bake_and_short_runs_bake_no_longer_than_they_trained():
    walk = presets.preset_for("cpu", "nerfstudio", "walkaround", read_config_file).values
    forward = presets.preset_for("cuda", "nerfstudio", "forward", read_config_file).values
    llff = presets.preset_for("cpu", "llff", "forward", read_config_file).values
    assert walk["splat_seconds"] == forward["splat_seconds"] == presets.CAPTURE_SPLAT_SECONDS
    assert "splat_seconds" not in llff
    cfg = RunConfig(train=TrainConfig(splat_seconds=255.0))
    assert bake_seconds(cfg, 600.0) == 255.0 and bake_seconds(cfg, 12.5) == 12.5 and bake_seconds(cfg, 0.2) == 1.0
    uncapped = RunConfig(train=TrainConfig(splat_seconds=255.0, cap_outputs=False))
    assert bake_seconds(uncapped, 12.5) == 255.0
