"""End-to-end: `enerf train` / `enerf eval` on a tiny synthetic scene, resume, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio

from enerf.checkpoint import load_checkpoint
from enerf.cli import main
from enerf.data.loaders import load_scene
from enerf.render.build import build_fields
from enerf.train.evaluate import render_scene_view

TINY = [
    "--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "32", "--view_width", "16",
    "--multires", "4", "--multires_views", "2", "--N_samples", "8", "--N_importance", "4",
    "--N_rand", "128", "--log_every", "5", "--kappa_every", "5", "--no_lpips", "--quiet",
    "--chunk", "1024",
]


def _train(scene_dir: Path, basedir: Path, expname: str, iters: int, *extra: str) -> dict:
    argv = ["train", "--datadir", str(scene_dir), "--basedir", str(basedir), "--expname", expname,
            "--iters", str(iters), *TINY, *extra]
    assert main(argv) == 0
    return json.loads((basedir / expname / "metrics.json").read_text())


def test_train_writes_metrics_that_match_an_independent_psnr(scene_dir, tmp_path):
    metrics = _train(scene_dir, tmp_path, "run", 10, "--conditioning", "row")
    for key in ("psnr", "ssim", "lpips", "lpips_error", "per_image", "steps", "train_seconds", "conditioning"):
        assert key in metrics
    assert metrics["steps"] == 10 and metrics["conditioning"] == "row"
    assert metrics["lpips"] is None and metrics["lpips_error"]
    assert [p["view"] for p in metrics["per_image"]] == [0, 4]

    payload, cfg = load_checkpoint(tmp_path / "run" / "checkpoints" / "latest.pt")
    assert cfg.field.conditioning == "row" and payload["step"] == 10
    scene = load_scene(cfg.data, Path("data"))
    fields = build_fields(cfg.field, torch.device("cpu"), cfg.render)
    for name, field in fields.items():
        field.load_state_dict(payload["fields"][name])
    for entry in metrics["per_image"]:
        pred = render_scene_view(scene, entry["view"], fields, cfg.render, torch.device("cpu"))
        expected = peak_signal_noise_ratio(scene.images[entry["view"]], pred, data_range=1.0)
        assert entry["psnr"] == pytest.approx(expected, abs=1e-4)
    assert np.mean([p["psnr"] for p in metrics["per_image"]]) == pytest.approx(metrics["psnr"], abs=1e-9)


def test_eval_recomputes_the_same_metrics(scene_dir, tmp_path):
    trained = _train(scene_dir, tmp_path, "run", 6)
    (tmp_path / "run" / "metrics.json").unlink()
    assert main(["eval", "--ckpt", str(tmp_path / "run" / "checkpoints" / "latest.pt")]) == 0
    again = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert again["psnr"] == pytest.approx(trained["psnr"], abs=1e-5)
    assert again["steps"] == 6


def test_resume_continues_exactly(scene_dir, tmp_path):
    straight = _train(scene_dir, tmp_path, "straight", 12)
    _train(scene_dir, tmp_path, "halves", 6)
    resumed = _train(scene_dir, tmp_path, "halves", 12, "--resume")
    assert resumed["steps"] == 12
    assert resumed["psnr"] == pytest.approx(straight["psnr"], abs=1e-5)


def test_appearance_and_robust_loss_resume_exactly(scene_dir, tmp_path, capsys):
    """--appearance affine with --robust_trim: the transforms are checkpointed (one per training view),
    a resumed run ends where a straight one does, metrics.json names the protocol; resuming with
    another --appearance is one line."""
    flags = ("--appearance", "affine", "--robust_trim", "0.2")
    straight = _train(scene_dir, tmp_path, "straight", 12, *flags)
    _train(scene_dir, tmp_path, "halves", 6, *flags)
    resumed = _train(scene_dir, tmp_path, "halves", 12, "--resume", *flags)
    assert resumed["psnr"] == pytest.approx(straight["psnr"], abs=1e-5)
    assert resumed["appearance"]["model"] == "affine" and "mean appearance" in resumed["appearance"]["psnr"]
    payload, cfg = load_checkpoint(tmp_path / "halves" / "checkpoints" / "latest.pt")
    n_train = len(load_scene(cfg.data, Path("data")).i_train)
    assert payload["fields"]["appearance"]["matrix"].shape == (n_train, 3, 3)
    assert payload["fields"]["appearance"]["matrix"].abs().max() > 0  # trained, not the zeros it starts from
    capsys.readouterr()
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--expname", "halves",
                 "--iters", "14", *TINY, "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--appearance affine" in err[0]


def test_visibility_loss_and_gradient_scaling_resume_exactly(scene_dir, tmp_path, capsys):
    """--visibility_loss and --gradient_scaling on a world-space scene: a resumed run ends where a straight
    one does, and the held-out views carry psnr_seen; on an NDC scene the visibility loss is one line."""
    flags = ("--no_ndc", "--visibility_loss", "0.1", "--gradient_scaling", "0.5")
    straight = _train(scene_dir, tmp_path, "straight", 12, *flags)
    _train(scene_dir, tmp_path, "halves", 6, *flags)
    resumed = _train(scene_dir, tmp_path, "halves", 12, "--resume", *flags)
    assert resumed["psnr"] == pytest.approx(straight["psnr"], abs=1e-5)
    plain = _train(scene_dir, tmp_path, "plain", 12, "--no_ndc")
    assert plain["psnr"] != straight["psnr"]  # the options change training
    assert all(0 <= p["seen_fraction"] <= 1 for p in straight["per_image"]) and straight["psnr_seen"] is not None
    capsys.readouterr()
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--expname", "ndc",
                 "--iters", "2", *TINY, "--visibility_loss", "0.1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--no_ndc" in err[0]
    assert not (tmp_path / "ndc" / "checkpoints").exists()
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--expname", "ndc",
                 "--iters", "2", *TINY, "--gradient_scaling", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gradient_scaling" in err[0] and "--no_ndc" in err[0]
    assert not (tmp_path / "ndc").exists()


def test_nerf_pytorch_config_file_is_accepted(scene_dir, tmp_path):
    config = tmp_path / "fern_like.txt"
    config.write_text(
        f"expname = cfgrun\nbasedir = {tmp_path}\ndatadir = {scene_dir}\ndataset_type = llff\n"
        "factor = 1\nllffhold = 4\nN_rand = 64\nN_samples = 8\nN_importance = 0\nuse_viewdirs = True\n"
        "raw_noise_std = 1e0\nnetdepth = 2\nnetwidth = 16\nnetdepth_fine = 2\nnetwidth_fine = 16\n"
        "multires = 2\nmultires_views = 1\nlrate = 5e-4\nlrate_decay = 250\ni_print = 2\nno_batching = False\n"
    )
    assert main(["train", "--config", str(config), "--iters", "2", "--no_lpips", "--quiet"]) == 0
    saved = json.loads((tmp_path / "cfgrun" / "config.json").read_text())
    assert saved["field"]["netwidth"] == 16 and saved["render"]["raw_noise_std"] == 1.0
    assert saved["train"]["log_every"] == 2 and saved["data"]["llffhold"] == 4


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["train", "--scene", "no_such_scene_xyz"], "nerf_llff_data"),
        (["train", "--datadir", "/nonexistent/enerf/scene"], "/nonexistent/enerf/scene"),
        (["eval", "--ckpt", "/nonexistent/ckpt.pt"], "/nonexistent/ckpt.pt"),
        (["frobnicate"], "unknown command"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(argv, fragment, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "enerf.cli", *argv, "--basedir", str(tmp_path)] if argv[0] == "train"
        else [sys.executable, "-m", "enerf.cli", *argv],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_corrupt_checkpoint_is_reported(tmp_path):
    bad = tmp_path / "checkpoints" / "latest.pt"
    bad.parent.mkdir()
    bad.write_bytes(b"not a checkpoint")
    proc = subprocess.run([sys.executable, "-m", "enerf.cli", "eval", "--ckpt", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(bad) in proc.stderr


def test_data_synth_command_writes_a_loadable_llff_scene(tmp_path):
    from enerf.data.llff import load_llff

    out = tmp_path / "scene"
    assert main(["data", "synth", "--out", str(out), "--views", "3", "--width", "32", "--height", "24"]) == 0
    poses_bounds = np.load(out / "poses_bounds.npy")
    assert poses_bounds.shape == (3, 17)
    scene = load_llff(out, factor=1, llffhold=0)
    assert scene.images.shape == (3, 24, 32, 3)
    assert scene.focal == pytest.approx(poses_bounds[0, 14])


def test_atomic_writes_get_the_permissions_of_a_plain_open(tmp_path):
    from enerf.atomic import atomic_write_text

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = tmp_path / "atomic.txt"
    atomic_write_text(atomic, "x")
    assert atomic.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
