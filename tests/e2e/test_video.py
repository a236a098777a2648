"""`enerf render`: camera paths, frames read back from the mp4s, odd sizes, depth maps, bad input."""

from __future__ import annotations

import warnings
from pathlib import Path

import imageio.v2 as iio2
import imageio.v3 as iio
import numpy as np
import pytest
import torch

from enerf.cli import main
from enerf.config import VideoConfig
from enerf.cameras.paths import interpolated_path
from enerf.cameras.rays import ndc_rays, ndc_to_world
from enerf.synthetic.scene import make_synthetic_scene
from enerf.loaded_run import load_run
from enerf.data.camera_paths import camera_path
from enerf.export.depth_colors import depth_values
from enerf.export.video import render_video
from enerf.train.evaluate import render_scene_view

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "3", "--multires_views", "1", "--N_samples", "8", "--N_importance", "4", "--N_rand", "64",
        "--kappa_every", "0", "--no_lpips", "--quiet", "--chunk", "333"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("video")
    scene = make_synthetic_scene(root / "tiny", n_views=8, width=40, height=30, seed=1)
    assert main(["train", "--datadir", str(scene), "--basedir", str(root), "--expname", "run", "--iters", "5", *TINY]) == 0
    return root / "run" / "checkpoints" / "latest.pt"


def _read_mp4(path: Path) -> np.ndarray:
    with iio2.get_reader(path) as reader:
        return np.stack([np.asarray(f) for f in reader])


def test_test_path_video_has_every_held_out_view(ckpt, tmp_path):
    out = tmp_path / "vid"
    assert main(["render", "--ckpt", str(ckpt), "--path", "test", "--png", "--out", str(out), "--quiet",
                 "--quality", "10"]) == 0
    run = load_run(ckpt, Path("data"))
    n_test = len(run.scene.i_test)
    rgb, depth = _read_mp4(out / "rgb.mp4"), _read_mp4(out / "depth.mp4")
    assert rgb.shape == (n_test, 30, 40, 3) and depth.shape == (n_test, 30, 40, 3)
    for k, view in enumerate(run.scene.i_test):
        # PNG frames are exactly what evaluation renders for that view (one shared code path)
        png = iio.imread(out / "frames" / f"rgb_{k:04d}.png").astype(np.float64) / 255.0
        expected = render_scene_view(run.scene, int(view), run.fields, run.cfg.render, run.device)
        assert np.abs(png - expected).max() <= 0.5 / 255 + 1e-6
        # the mp4 frame is that image up to H.264 loss
        assert np.abs(rgb[k] / 255.0 - png).mean() < 0.03


def test_odd_sizes_are_padded_not_cropped_and_give_no_warnings(ckpt, tmp_path):
    run = load_run(ckpt, Path("data"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = render_video(run, tmp_path, VideoConfig(path="spiral", frames=5, downscale=3, png=True), progress=False)
    assert (info["width"], info["height"]) == (13, 10) and (info["video_width"], info["video_height"]) == (14, 10)
    frames = _read_mp4(tmp_path / "rgb.mp4")
    assert frames.shape == (5, 10, 14, 3)
    png = iio.imread(tmp_path / "frames" / "rgb_0004.png")
    assert png.shape == (10, 13, 3)
    # the padding column repeats the last rendered column
    assert np.abs(frames[4, :, 13].astype(int) - frames[4, :, 12].astype(int)).mean() < 12



def test_video_uses_the_checkpoints_occupancy_grid(tmp_path):
    """A grid-renderer checkpoint renders through its stored grid, not one read off the field."""
    scene = make_synthetic_scene(tmp_path / "s", n_views=4, width=16, height=12, seed=0)
    assert main(["train", "--datadir", str(scene), "--basedir", str(tmp_path), "--expname", "g", "--iters", "20", *TINY, "--netwidth", "48",
                 "--N_importance", "0", "--renderer", "torch_grid", "--grid_resolution", "8", "--render_step_size", "0.05"]) == 0
    ckpt = tmp_path / "g" / "checkpoints" / "latest.pt"
    run = load_run(ckpt, Path("data"))
    payload = torch.load(ckpt, weights_only=False)
    assert torch.equal(run.renderer.estimator.grid.binaries.cpu(), payload["extra"]["renderer"]["grid"]["binaries"].cpu())
    # Two copies that differ only in the stored grid: all cells occupied / all empty. Frames read the
    # grid off the field would be the same for both; through the stored grid the empty one is black.
    grid = payload["extra"]["renderer"]["grid"]
    frames = {}
    for name, occupied in (("full", True), ("empty", False)):
        grid["binaries"].fill_(occupied)
        grid["occs"].fill_(1.0 if occupied else 0.0)
        torch.save(payload, tmp_path / f"{name}.pt")
        info = render_video(load_run(tmp_path / f"{name}.pt", Path("data")), tmp_path / name,
                            VideoConfig(path="test", png=True), progress=False)
        assert info["frames"] == 1
        frames[name] = iio.imread(tmp_path / name / "frames" / "rgb_0000.png")
    assert frames["full"].mean() > 5 and frames["empty"].max() == 0  # measured: mean 14.9 / 0


def test_spiral_frames_look_at_the_focus_depth(ckpt):
    run = load_run(ckpt, Path("data"))
    scene = run.scene
    poses = camera_path(scene, "spiral", 9)
    assert poses.shape == (9, 3, 4)
    close, far = scene.bounds.min() * 0.9, scene.bounds.max() * 5.0
    focal = 1.0 / (0.25 / close + 0.75 / far)  # LLFF: dt = 0.75 in disparity
    poses64 = scene.poses.astype(np.float64)
    center = poses64[:, :3, 3].mean(0)
    back = poses64[:, :3, 2].sum(0)
    back /= np.linalg.norm(back)
    focus = center - focal * back
    for pose in poses.astype(np.float64):
        to_cam = pose[:, 3] - focus
        assert np.allclose(pose[:, 2], to_cam / np.linalg.norm(to_cam), atol=1e-4)
        assert np.allclose(pose[:, :3].T @ pose[:, :3], np.eye(3), atol=1e-5)


def test_interpolated_path_passes_through_the_cameras():
    rng = np.random.default_rng(0)
    poses = []
    for _ in range(4):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        q *= np.sign(np.linalg.det(q))
        poses.append(np.concatenate([q, rng.normal(size=(3, 1))], 1))
    poses = np.stack(poses)
    path = interpolated_path(poses, 3 * 5 + 1)
    assert path.shape == (16, 3, 4)
    assert np.allclose(path[::5], poses, atol=1e-9)
    for pose in path:
        assert np.allclose(pose[:, :3].T @ pose[:, :3], np.eye(3), atol=1e-9)
    # smooth: steps between frames vary gradually, no jumps
    steps = np.linalg.norm(np.diff(path[:, :, 3], axis=0), axis=1)
    assert steps.max() < 3 * np.median(steps)


def test_ndc_depth_is_disparity():
    """1 - t along an NDC ray is 1 / |z| of the world point (near plane at 1)."""
    origins = torch.zeros(6, 3)
    dirs = torch.tensor([[0.1, -0.2, -1.0]]).repeat(6, 1)
    o, d = ndc_rays(30, 40, 32.0, 1.0, origins, dirs)
    t = torch.linspace(0.05, 0.9, 6)
    world = ndc_to_world(o + t[:, None] * d, 30, 40, 32.0)
    out = {"depth": t.reshape(2, 3), "acc": torch.ones(2, 3)}
    assert np.allclose(depth_values(out, use_ndc=True).ravel(), 1.0 / world[:, 2].abs().numpy(), atol=1e-5)


@pytest.mark.parametrize("args, fragment", [
    (["--ckpt", "/nonexistent/latest.pt"], "/nonexistent/latest.pt"),
    (["--path", "test", "--downscale", "0"], "--downscale"),
    (["--colormap", "nope"], "colormap"),
])
def test_bad_input_gives_one_line_and_exit_2(ckpt, args, fragment, capsys):
    argv = args if args[0] == "--ckpt" else ["--ckpt", str(ckpt), *args]
    assert main(["render", *argv, "--quiet"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in lines[0]


def test_train_with_video_auto_renders_a_preview_along_the_scenes_default_path(scene_dir, tmp_path):
    """``--video auto`` on a forward-facing (NDC) scene: after training, 40 frames of the spiral at
    20 fps and half the training size in <run>/video_spiral/ (frames counted by imageio); a walk-around
    capture (world-space rays, a contraction) gets ``interp``, a bounded world-space scene the spiral."""
    import dataclasses

    import imageio.v3 as iio

    from enerf.cli import main
    from enerf.data.camera_paths import default_path
    from enerf.export.video import PREVIEW
    from enerf.loaded_run import load_run

    argv = ["train", "--preset", "none", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--expname", "v", "--factor", "1",
            "--iters", "10", "--netdepth", "2", "--netwidth", "16", "--N_samples", "8", "--no_lpips", "--quiet",
            "--video", "auto"]
    assert main(argv) == 0
    frames = list(iio.imiter(tmp_path / "v" / "video_spiral" / "rgb.mp4"))
    assert len(frames) == PREVIEW["frames"] == 40
    assert iio.immeta(tmp_path / "v" / "video_spiral" / "rgb.mp4", plugin="FFMPEG")["fps"] == PREVIEW["fps"] == 20
    assert frames[0].shape[:2] == (15 + 1, 20)  # 30 x 40 halved; the odd height padded by one row

    run = load_run(tmp_path / "v" / "checkpoints" / "latest.pt", scene_dir.parent)
    assert default_path(run.scene, run.cfg.field.contraction) == "spiral"
    world = dataclasses.replace(run.scene, use_ndc=False)
    assert default_path(world, "linf") == "interp" and default_path(world, "none") == "spiral"  # capture, Blender
