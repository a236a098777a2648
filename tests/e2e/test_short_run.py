"""A short run's final evaluation and preview video cost about its training time
(``enerf.train.short_run``, ``--cap_outputs``): the arithmetic by hand, a tiny run whose scoring is
made slow (a stride, said in one line), and the preview cut or left out (frames read back)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import imageio.v2 as iio2
import imageio.v3 as iio
import pytest

from enerf.cli import main
from enerf.cli.train import preview_line
from enerf.export.video import render_preview
from enerf.synthetic.scene import make_synthetic_scene
from enerf.train import nerf as nerf_train
from enerf.train.short_run import FLOOR_SECONDS, MIN_PREVIEW_FRAMES, capped_frames, capped_stride

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16",
        "--view_width", "8", "--multires", "3", "--multires_views", "1", "--N_samples", "8", "--N_importance", "0", "--N_rand", "64",
        "--kappa_every", "0", "--no_lpips", "--quiet"]


def test_the_caps_by_hand():
    # 3 views of 504 x 378 at 7,500 rays/s: 76.2 s to score; a 2-s run has 30 s (the floor): stride 2 gives 19 s
    assert capped_stride(2.0, 3 * 504 * 378, 7500.0) == 2
    assert capped_stride(2.0, 3 * 504 * 378, 2000.0) == 4  # 286 s: s^2 >= 9.5
    assert capped_stride(600.0, 11 * 402 * 276, 9400.0) == 1  # a 10-minute run's 130 s of scoring: whole
    assert capped_stride(0.0, 100, 1.0) == 2 and FLOOR_SECONDS == 30.0  # 100 s vs 30 s: s^2 >= 3.3
    # the preview: 40 frames of 252 x 189 at 7,500 rays/s need 254 s; 30 s hold 4 frames: none
    assert capped_frames(2.0, 40, 252 * 189, 7500.0) == 0
    assert capped_frames(120.0, 40, 252 * 189, 7500.0) == 18  # 120 s hold 18.9 frames
    assert capped_frames(300.0, 40, 252 * 189, 7500.0) == 40
    assert capped_frames(2.0, 40, 100, 100.0 / 30 * MIN_PREVIEW_FRAMES) == MIN_PREVIEW_FRAMES


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    """A 3-step run whose renderer is said to draw 50 rays/s: scoring its 2 held-out views of 40 x 30
    (2,400 rays) would take 48 s against the 30-s floor, so every 2nd row and column is scored."""
    root = tmp_path_factory.mktemp("short")
    scene = make_synthetic_scene(root / "tiny", n_views=8, width=40, height=30, seed=1)
    patch = pytest.MonkeyPatch()
    patch.setattr(nerf_train, "render_rate", lambda *args, **kwargs: 50.0)
    lines = []
    patch.setattr("builtins.print", lambda *args, **kwargs: lines.append(" ".join(map(str, args))))
    try:
        assert main(["train", "--datadir", str(scene), "--basedir", str(root), "--expname", "run", "--iters", "3",
                     "--video", "none", *TINY]) == 0
    finally:
        patch.undo()
    return root / "run", lines


def test_a_short_runs_final_evaluation_scores_every_2nd_pixel_and_says_so(slow_run):
    folder, lines = slow_run
    metrics = json.loads((folder / "metrics.json").read_text())
    train_seconds = metrics["train_seconds"]
    assert train_seconds < FLOOR_SECONDS  # so the budget is the floor: 48 s / 30 s -> stride 2
    assert metrics["eval_stride"] == 2 and len(metrics["per_image"]) == 2
    said = [line for line in lines if line.startswith("final evaluation:")]
    assert said == [f"final evaluation: every 2nd row and column of the 2 held-out views (trained "
                    f"{train_seconds:.0f} s; every pixel would take about 48 s: enerf eval --ckpt scores them all, "
                    "--cap_outputs 0 at the end of training)"]
    for entry in metrics["per_image"]:  # the images scored: every 2nd row and column of 30 x 40
        assert iio.imread(folder / "test_views" / f"view_{entry['view']:03d}.png").shape == (15, 20, 3)
    assert metrics["eval_rays_per_second"] > 0


def test_cap_outputs_0_scores_every_pixel(tmp_path, monkeypatch):
    scene = make_synthetic_scene(tmp_path / "tiny", n_views=8, width=40, height=30, seed=1)
    monkeypatch.setattr(nerf_train, "render_rate", lambda *args, **kwargs: 50.0)
    assert main(["train", "--datadir", str(scene), "--basedir", str(tmp_path), "--expname", "full", "--iters", "3",
                 "--video", "none", "--cap_outputs", "0", *TINY]) == 0
    assert json.loads((tmp_path / "full" / "metrics.json").read_text())["eval_stride"] == 1


def test_the_preview_is_cut_or_left_out_by_the_training_time(slow_run):
    folder, _ = slow_run
    ckpt = folder / "checkpoints" / "latest.pt"
    # frames of the spiral: 20 x 15 = 300 rays; 30 s (the floor) at 200 rays/s hold 20 of the 40
    info = render_preview(ckpt, "spiral", Path("data"), progress=False, cap=(1.0, 200.0))
    assert (info["frames"], info["capped"], info["width"], info["height"]) == (20, 40, 20, 15)
    with iio2.get_reader(info["rgb"]) as reader:
        assert len([f for f in reader]) == 20 and reader.get_meta_data()["fps"] == pytest.approx(10.0)
    assert preview_line(info, 1.0).startswith("preview video: 20 of its 40 frames (the run trained 1 s) of 20x15")
    # at 10 rays/s 30 s hold one frame: none, with the command that makes it
    skipped = render_preview(ckpt, "spiral", Path("data"), progress=False, cap=(1.0, 10.0))
    seconds = 40 * 300 / 10.0
    assert skipped == {"skipped": f"40 frames of 20x15 would take about {seconds / 60:.1f} min, the run trained 1 s "
                                  f"(enerf render --ckpt {ckpt} --path spiral makes it)"}
    assert preview_line(skipped, 1.0).startswith("preview video: skipped, 40 frames")
    # a path of fixed frames (the held-out views) is whole or left out
    assert "skipped" in render_preview(ckpt, "test", Path("data"), progress=False, cap=(1.0, 0.5))
    whole = render_preview(ckpt, "spiral", Path("data"), progress=False, cap=(1.0, 1e6))
    assert whole["frames"] == 40 and "capped" not in whole
    assert math.isclose(iio2.get_reader(whole["rgb"]).get_meta_data()["fps"], 20.0)
