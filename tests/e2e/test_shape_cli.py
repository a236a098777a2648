"""End-to-end `enerf shape train / eval / mesh` on tiny settings; resume; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import trimesh

from enerf.checkpoint import load_checkpoint
from enerf.cli import main
from enerf.config import ShapeRunConfig
from enerf.fields.shape import ShapeField


def _tiny(tmp: Path) -> list[str]:
    return ["--netdepth", "2", "--netwidth", "16", "--skips", "9", "--multires", "2", "--batch_size", "256",
            "--lrate", "3e-3", "--n_uniform", "2000", "--n_near", "1000", "--eval_points", "4000",
            "--surface_points", "3000", "--mesh_resolution", "24", "--log_every", "5", "--kappa_every", "10",
            "--cache_dir", str(tmp / "cache"), "--device", "cpu", "--quiet"]


def _train(tmp: Path, expname: str, iters: int, *extra: str) -> dict:
    argv = ["shape", "train", "--mesh", "capsule", "--kind", "sdf", "--basedir", str(tmp), "--expname", expname,
            "--iters", str(iters), *_tiny(tmp), *extra]
    assert main(argv) == 0
    return json.loads((tmp / expname / "metrics.json").read_text())


def test_train_eval_mesh_and_resume(tmp_path, capsys):
    m = _train(tmp_path, "run", 40, "--conditioning", "row", "--seed", "3")
    for key in ("iou", "chamfer_l1", "normal_consistency", "fscore", "steps", "train_seconds", "conditioning",
                "seed", "history"):
        assert key in m
    assert m["steps"] == 40 and m["conditioning"] == "row" and m["seed"] == 3
    assert m["history"][-1]["step"] == 40 and m["history"][-1]["chamfer_l1"] == m["chamfer_l1"]

    ckpt = tmp_path / "run" / "checkpoints" / "latest.pt"
    payload, cfg = load_checkpoint(ckpt)
    assert payload["task"] == "shape" and isinstance(cfg, ShapeRunConfig) and cfg.field.conditioning == "row"
    # IoU recomputed by hand from the checkpoint and the cached evaluation points
    field = ShapeField(cfg.field)
    field.load_state_dict(payload["fields"]["field"])
    evals = [np.load(p) for p in (tmp_path / "cache").glob("*.npz")]
    pts, occ = next((e["points"], e["occupancy"]) for e in evals if len(e["points"]) == 4000)
    with torch.no_grad():
        pred = field(torch.from_numpy(pts)).numpy() < 0
    gt = occ > 0.5
    assert m["iou"] == pytest.approx((pred & gt).sum() / (pred | gt).sum(), abs=1e-12)

    # eval reproduces metrics.json; mesh writes the surface it scored
    capsys.readouterr()
    assert main(["shape", "eval", "--ckpt", str(ckpt)]) == 0
    assert "IoU" in capsys.readouterr().out
    again = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert again["chamfer_l1"] == pytest.approx(m["chamfer_l1"], rel=1e-9)
    out = tmp_path / "m.obj"
    assert main(["shape", "mesh", "--ckpt", str(ckpt), "--resolution", "24", "--out", str(out)]) == 0
    scored = trimesh.load(tmp_path / "run" / "mesh_24.ply", process=False)
    written = trimesh.load(out, process=False)
    assert len(written.faces) == len(scored.faces) > 0

    # 20 + 20 resumed steps give the same weights as 40 straight ones
    _train(tmp_path, "half", 20, "--conditioning", "row", "--seed", "3")
    _train(tmp_path, "half", 40, "--conditioning", "row", "--seed", "3", "--resume")
    resumed, _ = load_checkpoint(tmp_path / "half" / "checkpoints" / "latest.pt")
    for k, v in payload["fields"]["field"].items():
        torch.testing.assert_close(resumed["fields"]["field"][k], v)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    sphere = trimesh.creation.icosphere(2, radius=1.0)
    trimesh.Trimesh(sphere.vertices, sphere.faces[:-4]).export(tmp_path / "open.ply")
    cases = [
        (["shape", "train", "--mesh", str(tmp_path / "missing.obj")], "not found"),
        (["shape", "train", "--mesh", str(tmp_path / "open.ply"), *_tiny(tmp_path)], "--allow_open"),
        (["shape", "train", "--mesh", "torus", "--kind", "density"], "--kind"),
        (["shape", "mesh", "--ckpt", str(tmp_path / "none.pt")], "checkpoint not found"),
        (["shape", "fit"], "unknown action"),
    ]
    for argv, needle in cases:
        capsys.readouterr()
        assert main(argv + ["--basedir", str(tmp_path)] if argv[1] == "train" else argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and needle in err, err


def test_bnp_and_decay_reach_shape_training_and_resume_exactly(tmp_path):
    flags = ("--precond", "bnp", "--weight_decay", "1e-3", "--decay_space", "z", "--seed", "1")
    straight = _train(tmp_path, "straight", 10, *flags)
    _train(tmp_path, "halves", 5, *flags)
    resumed = _train(tmp_path, "halves", 10, *flags, "--resume")
    plain = _train(tmp_path, "plain", 10, "--seed", "1")
    assert straight["precond"] == "bnp" and plain["precond"] == "none"
    a, _ = load_checkpoint(tmp_path / "straight" / "checkpoints" / "latest.pt")
    b, _ = load_checkpoint(tmp_path / "halves" / "checkpoints" / "latest.pt")
    c, _ = load_checkpoint(tmp_path / "plain" / "checkpoints" / "latest.pt")
    for name, value in a["fields"]["field"].items():
        torch.testing.assert_close(b["fields"]["field"][name], value, rtol=0, atol=0)  # BNP statistics travel
    assert any(not torch.equal(c["fields"]["field"][k], v) for k, v in a["fields"]["field"].items())
    assert resumed["iou"] == straight["iou"]
    assert [h["step"] for h in straight["kappa_history"]] == [1, 10]
    assert set(straight["kappa_history"][0]["layers"]) == set(straight["kappa"])


def test_nerf_eval_of_a_shape_checkpoint_is_one_line_and_exit_2(tmp_path, capsys):
    _train(tmp_path, "run", 2)
    capsys.readouterr()
    assert main(["eval", "--ckpt", str(tmp_path / "run" / "checkpoints" / "latest.pt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "enerf shape eval" in err[0]
