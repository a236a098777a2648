"""A table of broken inputs (data, flags, checkpoints, meshes, output paths) driven in-process
through ``enerf.cli.main``: each must exit non-zero with exactly one line on stderr, no
traceback, and no new or changed file outside the case's scratch folder."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from enerf.cli import main
from enerf.synthetic.scene import make_synthetic_scene
from enerf.runfolder import RunLock

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--log_every", "1",
        "--kappa_every", "0", "--no_lpips", "--quiet", "--device", "cpu"]
SHAPE_TINY = ["--netdepth", "2", "--netwidth", "16", "--skips", "9", "--batch_size", "128", "--n_uniform", "1000",
              "--n_near", "500", "--eval_points", "1000", "--surface_points", "1000", "--mesh_resolution", "16",
              "--device", "cpu", "--quiet"]


def _save_modified(src: Path, dst: Path, edit) -> Path:
    payload = torch.load(src, weights_only=False)
    edit(payload)
    dst.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, dst)
    return dst


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """Inputs the broken cases use: a tiny scene and run, a shape run, and broken copies of them."""
    root = tmp_path_factory.mktemp("fuzz")
    scene = make_synthetic_scene(root / "scene", n_views=8, width=24, height=18, seed=3)
    assert main(["train", "--datadir", str(scene), "--basedir", str(root / "runs"), "--expname", "ok",
                 "--iters", "2", *TINY]) == 0
    assert main(["shape", "train", "--mesh", "sphere", "--basedir", str(root / "runs"), "--expname", "shape",
                 "--iters", "2", "--cache_dir", str(root / "cache"), *SHAPE_TINY]) == 0
    ckpt = root / "runs" / "ok" / "checkpoints" / "latest.pt"
    shape_ckpt = root / "runs" / "shape" / "checkpoints" / "latest.pt"

    def nan_weights(p):
        next(iter(p["fields"]["coarse"].values())).fill_(float("nan"))

    def wider(p):
        p["config"]["field"]["netwidth"] = 32

    def other_conditioning(p):
        p["config"]["field"]["conditioning"] = "wn"

    def shape_nan(p):
        next(iter(p["fields"]["field"].values())).fill_(float("inf"))

    w = {"root": root, "scene": scene, "ckpt": ckpt, "shape_ckpt": shape_ckpt,
         "nan": _save_modified(ckpt, root / "nan" / "checkpoints" / "latest.pt", nan_weights),
         "wide": _save_modified(ckpt, root / "wide" / "checkpoints" / "latest.pt", wider),
         "wn": _save_modified(ckpt, root / "wn" / "checkpoints" / "latest.pt", other_conditioning),
         "shape_nan": _save_modified(shape_ckpt, root / "shape_nan" / "checkpoints" / "latest.pt", shape_nan),
         "headerless": root / "headerless.pt", "garbage": root / "garbage.pt", "truncated": root / "truncated.pt",
         "file": root / "a_file", "empty_dir": root / "empty_dir", "bad_metrics": root / "bad_metrics"}
    torch.save({"weights": torch.zeros(3)}, w["headerless"])
    w["garbage"].write_bytes(b"\x00garbage" * 10)
    w["truncated"].write_bytes(ckpt.read_bytes()[:2000])
    w["file"].write_text("not a folder\n")
    w["empty_dir"].mkdir()
    shutil.copytree(root / "runs" / "ok", w["bad_metrics"])
    (w["bad_metrics"] / "metrics.json").write_text('{"psnr": NaN, "broken": ')
    for name, text in {"nan_poses": "nan", "garbage_poses": "garbage"}.items():
        bad = root / name
        shutil.copytree(scene, bad)
        poses = np.load(bad / "poses_bounds.npy")
        if text == "nan":
            poses[0, 3] = np.nan
            np.save(bad / "poses_bounds.npy", poses)
        else:
            (bad / "poses_bounds.npy").write_bytes(b"garbage")
        w[name] = bad
    w["other_scene"] = make_synthetic_scene(root / "other_scene", n_views=6, width=24, height=18, seed=4)
    (root / "garbage.obj").write_text("v 1 2\nf 1 2 9\nthis is not a mesh\n")
    (root / "empty.ply").write_bytes(b"")
    (root / "bad.txt").write_text("netdepth = 2\nno_such_key = 3\n")
    return w


# (id, argv with {placeholders}); {out} is the case's scratch folder, {x} the world's paths.
TRAIN = ["train", "--datadir", "{scene}", "--basedir", "{out}", "--expname", "r", "--iters", "2"]
CASES = [
    # numbers out of range / wrong type
    ("log_every_0", TRAIN + ["--log_every", "0"]),
    ("chunk_0", TRAIN + ["--chunk", "0"]),
    ("precrop_frac_0", TRAIN + ["--precrop_frac", "0"]),
    ("precrop_frac_1.5", TRAIN + ["--precrop_frac", "1.5"]),
    ("lrate_nan", TRAIN + ["--lrate", "nan"]),
    ("lrate_negative", TRAIN + ["--lrate", "-1"]),
    ("lrate_inf", TRAIN + ["--lrate", "inf"]),
    ("iters_negative", TRAIN + ["--iters", "-5"]),
    ("iters_0", TRAIN + ["--iters", "0"]),
    ("iters_text", TRAIN + ["--iters", "abc"]),
    ("N_samples_0", TRAIN + ["--N_samples", "0"]),
    ("N_importance_negative", TRAIN + ["--N_importance", "-1"]),
    ("bd_factor_negative", TRAIN + ["--bd_factor", "-0.5"]),
    ("N_rand_0", TRAIN + ["--N_rand", "0"]),
    ("N_rand_huge", TRAIN + ["--N_rand", "100000000000"]),
    ("netdepth_0", TRAIN + ["--netdepth", "0"]),
    ("netwidth_negative", TRAIN + ["--netwidth", "-3"]),
    ("multires_negative", TRAIN + ["--multires", "-1"]),
    ("seed_negative", TRAIN + ["--seed", "-1"]),
    ("lrate_decay_negative", TRAIN + ["--lrate_decay", "-1"]),
    ("raw_noise_negative", TRAIN + ["--raw_noise_std", "-1"]),
    ("eval_every_negative", TRAIN + ["--eval_every", "-1"]),
    ("ckpt_every_negative", TRAIN + ["--ckpt_every", "-2"]),
    ("time_budget_nan", TRAIN + ["--time_budget", "nan"]),
    ("weight_decay_negative", TRAIN + ["--weight_decay", "-1"]),
    ("grid_ema_decay_0", TRAIN + ["--grid_ema_decay", "0"]),
    ("render_step_size_0", TRAIN + ["--render_step_size", "0"]),
    ("factor_negative", TRAIN + ["--factor", "-1"]),
    ("llffhold_negative", TRAIN + ["--llffhold", "-1"]),
    ("testskip_0", TRAIN + ["--testskip", "0"]),
    ("grid_renderer_with_fine", TRAIN + ["--renderer", "torch_grid", "--N_importance", "4"]),
    ("triplane_short_aabb", TRAIN + ["--encoding", "triplane", "--grid_aabb", "1", "2", "3"]),
    ("triplane_resolution_1", TRAIN + ["--encoding", "triplane", "--grid_resolutions", "1"]),
    ("conditioning_bogus", TRAIN + ["--conditioning", "bogus"]),
    ("renderer_bogus", TRAIN + ["--renderer", "bogus"]),
    ("dataset_type_bogus", TRAIN + ["--dataset_type", "bogus"]),
    ("expname_empty", ["train", "--datadir", "{scene}", "--basedir", "{out}", "--expname", ""]),
    ("unknown_flag", TRAIN + ["--no_such_flag", "1"]),
    ("config_missing", TRAIN + ["--config", "{root}/no_such_config.txt"]),
    ("config_unknown_key", TRAIN + ["--config", "{root}/bad.txt"]),
    ("bool_garbage", TRAIN + ["--white_bkgd", "maybe"]),
    # data
    ("datadir_missing", ["train", "--datadir", "{root}/no_such_scene", "--basedir", "{out}"]),
    ("datadir_empty", ["train", "--datadir", "{empty_dir}", "--basedir", "{out}"]),
    ("datadir_is_file", ["train", "--datadir", "{file}", "--basedir", "{out}"]),
    ("poses_nan", ["train", "--datadir", "{nan_poses}", "--basedir", "{out}", *TINY]),
    ("poses_garbage", ["train", "--datadir", "{garbage_poses}", "--basedir", "{out}", *TINY]),
    ("scene_unknown", ["train", "--scene", "no_such_scene_xyz", "--basedir", "{out}"]),
    # run folders
    ("resume_without_checkpoint", TRAIN + ["--resume", *TINY]),
    ("resume_other_datadir", ["train", "--datadir", "{nan_poses}", "--basedir", "{root}/runs", "--expname", "ok",
                              "--iters", "4", "--resume", *TINY]),
    ("resume_other_width", ["train", "--datadir", "{scene}", "--basedir", "{root}/runs", "--expname", "ok",
                            "--iters", "4", "--resume", *TINY, "--netwidth", "8"]),
    ("resume_nerf_as_shape", ["shape", "train", "--basedir", "{root}/runs", "--expname", "ok", "--resume",
                              "--cache_dir", "{out}/cache", *SHAPE_TINY]),
    # output paths
    ("train_basedir_under_file", ["train", "--datadir", "{scene}", "--basedir", "{file}/runs", *TINY]),
    ("train_basedir_proc", ["train", "--datadir", "{scene}", "--basedir", "/proc/enerf_fuzz", *TINY]),
    ("train_expname_is_file", ["train", "--datadir", "{scene}", "--basedir", "{root}", "--expname", "a_file", *TINY]),
    ("render_out_under_file", ["render", "--ckpt", "{ckpt}", "--out", "{file}/video", "--quiet"]),
    ("render_out_proc", ["render", "--ckpt", "{ckpt}", "--out", "/proc/enerf_fuzz/video", "--quiet"]),
    ("mesh_out_under_file", ["mesh", "--ckpt", "{ckpt}", "--out", "{file}/mesh.ply", "--resolution", "8"]),
    ("mesh_out_is_folder", ["mesh", "--ckpt", "{ckpt}", "--out", "{empty_dir}", "--resolution", "8"]),
    ("mesh_out_bad_suffix", ["mesh", "--ckpt", "{ckpt}", "--out", "{out}/mesh.xyz", "--resolution", "8"]),
    ("shape_mesh_out_under_file", ["shape", "mesh", "--ckpt", "{shape_ckpt}", "--out", "{file}/m.ply",
                                   "--resolution", "8"]),
    ("shape_train_basedir_under_file", ["shape", "train", "--basedir", "{file}/runs", *SHAPE_TINY]),
    ("shape_cache_under_file", ["shape", "train", "--basedir", "{out}", "--cache_dir", "{file}/c", *SHAPE_TINY]),
    ("synth_out_under_file", ["data", "synth", "--out", "{file}/scene"]),
    ("synth_out_proc", ["data", "synth", "--out", "/proc/enerf_fuzz"]),
    ("synth_views_0", ["data", "synth", "--out", "{out}/s", "--views", "0"]),
    ("synth_width_negative", ["data", "synth", "--out", "{out}/s", "--width", "-4"]),
    ("compare_out_under_file", ["compare", "--out", "{file}/cmp", "--quiet"]),
    ("compare_jobs_0", ["compare", "--out", "{out}/cmp", "--jobs", "0"]),
    ("compare_task_bogus", ["compare", "--out", "{out}/cmp", "--task", "bogus"]),
    # checkpoints
    ("eval_missing", ["eval", "--ckpt", "{root}/no_such.pt"]),
    ("eval_garbage", ["eval", "--ckpt", "{garbage}"]),
    ("eval_truncated", ["eval", "--ckpt", "{truncated}"]),
    ("eval_headerless", ["eval", "--ckpt", "{headerless}"]),
    ("eval_nan_weights", ["eval", "--ckpt", "{nan}"]),
    ("eval_other_width", ["eval", "--ckpt", "{wide}"]),
    ("eval_other_conditioning", ["eval", "--ckpt", "{wn}"]),
    ("eval_shape_checkpoint", ["eval", "--ckpt", "{shape_ckpt}"]),
    ("eval_corrupt_metrics", ["eval", "--ckpt", "{bad_metrics}/checkpoints/latest.pt"]),
    ("eval_no_ckpt_flag", ["eval"]),
    ("render_nan_weights", ["render", "--ckpt", "{nan}", "--out", "{out}/v", "--quiet"]),
    ("render_path_bogus", ["render", "--ckpt", "{ckpt}", "--path", "bogus", "--out", "{out}/v"]),
    ("render_frames_0", ["render", "--ckpt", "{ckpt}", "--frames", "0", "--out", "{out}/v"]),
    ("render_colormap_bogus", ["render", "--ckpt", "{ckpt}", "--colormap", "no_such_map", "--out", "{out}/v"]),
    ("render_shape_checkpoint", ["render", "--ckpt", "{shape_ckpt}", "--out", "{out}/v", "--quiet"]),
    ("mesh_nan_weights", ["mesh", "--ckpt", "{nan}", "--out", "{out}/m.ply", "--resolution", "8"]),
    ("mesh_bbox_short", ["mesh", "--ckpt", "{ckpt}", "--bbox", "1", "2", "3", "--out", "{out}/m.ply"]),
    ("mesh_resolution_0", ["mesh", "--ckpt", "{ckpt}", "--resolution", "0", "--out", "{out}/m.ply"]),
    ("mesh_faces_0", ["mesh", "--ckpt", "{ckpt}", "--faces", "0", "--out", "{out}/m.ply"]),
    ("mesh_faces_negative", ["mesh", "--ckpt", "{ckpt}", "--faces", "-3", "--out", "{out}/m.ply"]),
    ("mesh_texture_as_ply", ["mesh", "--ckpt", "{ckpt}", "--texture", "--out", "{out}/m.ply"]),
    ("mesh_texture_obj_under_file", ["mesh", "--ckpt", "{ckpt}", "--texture", "--out", "{file}/m.obj"]),
    ("mesh_garbage_checkpoint", ["mesh", "--ckpt", "{garbage}", "--out", "{out}/m.ply"]),
    ("shape_eval_nerf_checkpoint", ["shape", "eval", "--ckpt", "{ckpt}"]),
    ("shape_eval_nan", ["shape", "eval", "--ckpt", "{shape_nan}"]),
    ("shape_mesh_nan", ["shape", "mesh", "--ckpt", "{shape_nan}", "--out", "{out}/m.ply", "--resolution", "8"]),
    ("shape_mesh_resolution_2", ["shape", "mesh", "--ckpt", "{shape_ckpt}", "--out", "{out}/m.ply",
                                 "--resolution", "2"]),
    # meshes and shape flags
    ("shape_mesh_missing", ["shape", "train", "--mesh", "{root}/no_such.obj", "--basedir", "{out}", *SHAPE_TINY]),
    ("shape_mesh_garbage", ["shape", "train", "--mesh", "{root}/garbage.obj", "--basedir", "{out}", *SHAPE_TINY,
                            "--cache_dir", "{out}/c"]),
    ("shape_mesh_empty", ["shape", "train", "--mesh", "{root}/empty.ply", "--basedir", "{out}", *SHAPE_TINY,
                          "--cache_dir", "{out}/c"]),
    ("shape_kind_bogus", ["shape", "train", "--kind", "bogus", "--basedir", "{out}"]),
    ("shape_iters_negative", ["shape", "train", "--iters", "-1", "--basedir", "{out}"]),
    ("shape_log_every_0", ["shape", "train", "--log_every", "0", "--basedir", "{out}"]),
    ("shape_batch_size_0", ["shape", "train", "--batch_size", "0", "--basedir", "{out}"]),
    ("shape_lrate_nan", ["shape", "train", "--lrate", "nan", "--basedir", "{out}"]),
    ("shape_padding_negative", ["shape", "train", "--padding", "-1", "--basedir", "{out}"]),
    ("shape_action_bogus", ["shape", "bogus"]),
    ("command_bogus", ["frobnicate"]),
    ("view_missing_ckpt", ["view", "--ckpt", "{out}/nope.pt", "--port", "0"]),
    ("view_shape_ckpt", ["view", "--ckpt", "{shape_ckpt}", "--port", "0"]),
    ("view_port_out_of_range", ["view", "--ckpt", "{ckpt}", "--port", "70000"]),
    ("view_three_ckpts", ["view", "--ckpt", "{ckpt}", "--ckpt", "{ckpt}", "--ckpt", "{ckpt}", "--port", "0"]),
    ("render_path_file_missing", ["render", "--ckpt", "{ckpt}", "--path", "{out}/nope.json"]),
    # exports: the other task's checkpoint, outputs nowhere to go, counts of nothing
    ("export_pointcloud_shape_ckpt", ["export", "pointcloud", "--ckpt", "{shape_ckpt}", "--out", "{out}/p.ply"]),
    ("export_depth_shape_ckpt", ["export", "depth", "--ckpt", "{shape_ckpt}", "--out", "{out}/d"]),
    ("mesh_tsdf_shape_ckpt", ["mesh", "--method", "tsdf", "--ckpt", "{shape_ckpt}", "--out", "{out}/m.ply"]),
    ("export_points_0", ["export", "pointcloud", "--ckpt", "{ckpt}", "--out", "{out}/p.ply", "--points", "0"]),
    ("export_min_acc_0", ["export", "pointcloud", "--ckpt", "{ckpt}", "--out", "{out}/p.ply", "--min_acc", "0"]),
    ("mesh_out_missing_folder", ["mesh", "--ckpt", "{ckpt}", "--out", "{out}/no/such/m.ply", "--resolution", "8"]),
    ("mesh_cameras_bogus", ["mesh", "--ckpt", "{ckpt}", "--method", "tsdf", "--cameras", "bogus", "--out", "{out}/m.ply"]),
    ("export_out_missing_folder", ["export", "pointcloud", "--ckpt", "{ckpt}", "--out", "{out}/no/such/p.ply"]),
    ("export_depth_out_missing_parent", ["export", "depth", "--ckpt", "{ckpt}", "--out", "{out}/no/such/d"]),
    ("export_depth_out_is_a_file", ["export", "depth", "--ckpt", "{ckpt}", "--out", "{file}"]),
    ("export_out_not_ply", ["export", "pointcloud", "--ckpt", "{ckpt}", "--out", "{out}/p.txt"]),
    ("export_cameras_bogus", ["export", "depth", "--ckpt", "{ckpt}", "--out", "{out}/d", "--cameras", "bogus"]),
    ("export_bbox_short", ["export", "pointcloud", "--ckpt", "{ckpt}", "--out", "{out}/p.ply", "--bbox", "0", "1"]),
    ("export_action_bogus", ["export", "bogus"]),
    ("export_missing_ckpt", ["export", "depth", "--ckpt", "{out}/nope.pt", "--out", "{out}/d"]),
    ("mesh_method_bogus", ["mesh", "--ckpt", "{ckpt}", "--method", "bogus", "--out", "{out}/m.ply"]),
    ("eval_datadir_missing", ["eval", "--ckpt", "{ckpt}", "--datadir", "{out}/nope"]),
    ("eval_datadir_other_scene", ["eval", "--ckpt", "{ckpt}", "--datadir", "{other_scene}"]),
    # splats: the bake's inputs and outputs, a --splats file that is no 3DGS PLY
    ("export_splats_shape_ckpt", ["export", "splats", "--ckpt", "{shape_ckpt}", "--out", "{out}/s.ply"]),
    ("export_splats_garbage_ckpt", ["export", "splats", "--ckpt", "{garbage}", "--out", "{out}/s.ply"]),
    ("export_splats_out_missing_folder", ["export", "splats", "--ckpt", "{ckpt}", "--out", "{out}/no/such/s.ply"]),
    ("export_splats_unknown_suffix", ["export", "splats", "--ckpt", "{ckpt}", "--out", "{out}/s.ksplat"]),
    ("export_splats_crop_3_numbers", ["export", "splats", "--ckpt", "{ckpt}", "--out", "{out}/s.spz", "--crop", "1", "2", "3"]),
    ("export_splats_no_input", ["export", "splats", "--out", "{out}/s.spz"]),
    ("export_splats_sh_degree_4", ["export", "splats", "--ckpt", "{ckpt}", "--out", "{out}/s.ply", "--sh_degree", "4"]),
    ("eval_splats_not_ply", ["eval", "--ckpt", "{ckpt}", "--splats", "{garbage}"]),
    ("render_splats_not_ply", ["render", "--ckpt", "{ckpt}", "--splats", "{garbage}", "--out", "{out}/v"]),
]


def _snapshot(root: Path, skip: Path) -> dict[str, tuple[int, str]]:
    files = {}
    for path in root.rglob("*"):
        if path.is_file() and skip not in path.parents:
            files[str(path)] = (path.stat().st_size, hashlib.md5(path.read_bytes()).hexdigest())
    return files


def test_the_table_has_enough_rows():
    assert len(CASES) >= 60 and len({name for name, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("argv", [argv for _, argv in CASES], ids=[name for name, _ in CASES])
def test_broken_input_gives_one_line_and_changes_nothing(argv, world, tmp_path, monkeypatch, capsys):
    out = tmp_path / "scratch"
    out.mkdir()
    work = tmp_path / "cwd"  # relative defaults (data/, runs/) would land here
    work.mkdir()
    monkeypatch.chdir(work)
    filled = [a.format(out=out, **world) for a in argv]
    before = _snapshot(world["root"], out)
    rc = main(filled)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc != 0, err
    assert len(lines) == 1 and lines[0].startswith("enerf"), err
    assert "Traceback" not in err
    assert _snapshot(world["root"], out) == before
    assert not any(work.iterdir()), list(work.iterdir())


def test_a_second_writer_is_refused_with_the_holders_pid(world, tmp_path, capsys):
    import os

    run = tmp_path / "r"
    with RunLock(run, "enerf train"):
        rc = main(["train", "--datadir", str(world["scene"]), "--basedir", str(tmp_path), "--expname", "r",
                   "--iters", "2", *TINY])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and f"process {os.getpid()}" in err and len(err.splitlines()) == 1
    assert not (run / "config.json").exists()
