"""Validation ranges, output checks, the run-folder lock, stale temp files and divergence."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio

from enerf.atomic import atomic_write_json
from enerf.checkpoint import load_checkpoint, save_checkpoint
from enerf.cli import main
from enerf.cli.common import error_line, flag_name
from enerf.config import (CompareConfig, FieldConfig, MeshConfig, RunConfig, ShapeMeshConfig, ShapeRunConfig,
                          RenderConfig, SynthConfig, TrainConfig, VideoConfig)
from enerf.config.spec import value_type
from enerf.render.registry import check_sampler_options
from enerf.synthetic.scene import make_synthetic_scene
from enerf.errors import CheckpointError, ConfigError, DivergenceError
from enerf.runfolder import RunLock, check_output_dir, check_output_file, remove_stale_temp_files
from enerf.train.divergence import FiniteGuard, black_level_psnr, black_warning

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--log_every", "1",
        "--kappa_every", "0", "--no_lpips", "--quiet", "--device", "cpu"]


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory) -> Path:
    return make_synthetic_scene(tmp_path_factory.mktemp("scene") / "tiny", n_views=8, width=24, height=18, seed=2)


def _numeric_fields():
    """(config class, field) of every numeric field of the command-line configs."""
    for root in (RunConfig, ShapeRunConfig, VideoConfig, MeshConfig, CompareConfig, SynthConfig, ShapeMeshConfig):
        sections = [f.default_factory for f in dataclasses.fields(root) if f.metadata.get("section")] or [root]
        for cls in sections:
            for f in dataclasses.fields(cls):
                if value_type(f)[0] in ("int", "float"):
                    yield cls, f


NUMERIC = list(_numeric_fields())


@pytest.mark.parametrize("cls, f", NUMERIC, ids=[f"{c.__name__}.{f.name}" for c, f in NUMERIC])
def test_every_range_admits_its_bounds_and_refuses_beyond_them(cls, f):
    """Each field's closed ends pass and a value just outside (or NaN) fails on construction,
    with a message that names the field and a CLI line that names its flag."""
    rng, (kind, each) = f.metadata["range"], value_type(f)
    integer = kind == "int"
    inside = [v for v, open_ in ((rng.lo, rng.lo_open), (rng.hi, rng.hi_open)) if math.isfinite(v) and not open_]
    for v in inside:
        assert rng.admits(int(v) if integer else float(v), integer), (f.name, v)
    outside = [math.nan] + ([rng.lo - 1] if math.isfinite(rng.lo) else []) + ([rng.hi + 1] if math.isfinite(rng.hi) else [])
    outside += [rng.lo] if rng.lo_open else []
    for v in outside:
        assert not rng.admits(v, integer), (f.name, v)
        with pytest.raises(ConfigError, match=f"^{f.name} ") as err:
            cls(**{f.name: (v,) if each else v})
        assert err.value.fields == (f.name,)
        assert error_line(err.value).startswith(flag_name(f.name) + " ")


def test_flags_spelled_as_nerf_pytorch_and_combinations_are_refused():
    assert [flag_name(n) for n in ("n_rand", "n_samples", "n_importance", "iters")] == \
        ["--N_rand", "--N_samples", "--N_importance", "--iters"]
    with pytest.raises(ConfigError) as err:
        check_sampler_options(RenderConfig(sampler="torch_grid", n_importance=8))
    assert str(err.value) == ("n_importance must be 0 with sampler torch_grid (one field), got 8; use sampler "
                              "hierarchical for a fine network")
    assert error_line(err.value) == ("--N_importance must be 0 with --sampler torch_grid (one field), got 8; use "
                                     "--sampler hierarchical for a fine network")
    with pytest.raises(ConfigError, match="^iters must be an integer >= 1, got -5$"):
        TrainConfig(iters=-5)
    with pytest.raises(ConfigError, match="^lrate must be a finite number > 0, got inf$"):
        TrainConfig(lrate=math.inf)
    with pytest.raises(ConfigError) as err:
        FieldConfig(netdepth=4, skips=(3,))
    assert error_line(err.value) == "--skips must be in 0..2 (or >= 4, ignored) for --netdepth 4, got 3"


def test_output_checks_name_what_blocks_them(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert check_output_dir(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()  # the check creates nothing
    with pytest.raises(ConfigError, match=f"{blocker} is a file, not a folder"):
        check_output_dir(blocker / "x" / "y", "--basedir")
    with pytest.raises(ConfigError, match="the path itself is a file"):
        check_output_dir(blocker, "--out")
    with pytest.raises(ConfigError, match="is a folder; give a file name"):
        check_output_file(tmp_path, "--out")
    with pytest.raises(ConfigError, match="cannot write in /proc"):
        check_output_dir("/proc/enerf_test/x", "--out")
    if os.geteuid() != 0:  # root writes through permission bits
        locked = tmp_path / "ro"
        locked.mkdir(mode=0o555)
        with pytest.raises(ConfigError, match="permission denied"):
            check_output_dir(locked / "x", "--out")


def test_lock_names_the_holding_process_and_is_freed_by_its_death(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from enerf.runfolder import RunLock; "
         f"RunLock({str(tmp_path)!r}, 'enerf train').acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"in use by process {holder.pid} \\(enerf train\\)"):
            RunLock(tmp_path, "enerf eval").acquire()
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path, "enerf eval"):  # kill -9 released it
        assert (tmp_path / ".lock").read_text().startswith(f"process {os.getpid()} ")


def test_stale_temp_files_are_removed_and_nothing_else(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    stale = [tmp_path / "checkpoints" / ".latest.pt.abc123.tmp", tmp_path / ".metrics.json.x.tmp"]
    keep = [tmp_path / "checkpoints" / "latest.pt", tmp_path / "notes.tmp", tmp_path / "metrics.json"]
    for p in stale + keep:
        p.write_text("x")
    assert sorted(remove_stale_temp_files(tmp_path)) == sorted(stale)
    assert all(p.exists() for p in keep) and not any(p.exists() for p in stale)


def test_resume_cleans_temp_files_and_refuses_another_scene(scene_dir, tmp_path, capsys):
    argv = ["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--expname", "r", *TINY]
    assert main([*argv, "--iters", "2"]) == 0
    run = tmp_path / "r"
    stale = run / "checkpoints" / ".latest.pt.k1ll3d.tmp"
    stale.write_bytes(b"half a checkpoint")
    config = (run / "config.json").read_text()
    other = make_synthetic_scene(tmp_path / "other", n_views=8, width=24, height=18, seed=5)
    assert main([*argv, "--iters", "3", "--resume", "--datadir", str(other)]) == 2
    assert "was trained with data.datadir" in capsys.readouterr().err
    assert (run / "config.json").read_text() == config and stale.exists()
    assert main([*argv, "--iters", "3", "--resume"]) == 0
    assert not stale.exists() and load_checkpoint(run / "checkpoints" / "latest.pt")[0]["step"] == 3


def test_guard_sum_matches_the_norms_and_names_the_bad_tensor():
    a, b = torch.nn.Parameter(torch.tensor([3.0, 4.0])), torch.nn.Parameter(torch.tensor([[1.0, 2.0], [2.0, 4.0]]))
    a.grad, b.grad = torch.tensor([0.0, 2.0]), torch.zeros(2, 2)
    guard = FiniteGuard([("a", a), ("b", b)], lrate=1e-3)
    loss = torch.tensor(0.5)
    assert float(guard.total(loss)) == pytest.approx(0.5 + 2.0 + 5.0 + 5.0)  # loss + |grad a| + |a| + |b|
    guard.check(7, loss, Path("ck.pt"), None)
    b.grad[1, 0] = float("nan")
    with pytest.raises(DivergenceError, match=r"at step 7: the gradients \(b\) went non-finite; the last good "
                                              r"checkpoint ck.pt \(step 5\) is kept; try a lower --lrate \(now 0.001\)"):
        guard.check(7, loss, Path("ck.pt"), 5)


def test_divergence_stops_with_one_line_and_keeps_a_finite_checkpoint(scene_dir, tmp_path, capsys):
    rc = main(["train", "--datadir", str(scene_dir), "--basedir", str(tmp_path), "--expname", "d", *TINY,
               "--iters", "40", "--lrate", "1e30", "--ckpt_every", "1"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and "training diverged at step" in err, err
    assert not (tmp_path / "d" / "metrics.json").exists()
    ckpt = tmp_path / "d" / "checkpoints" / "latest.pt"
    if ckpt.exists():  # the steps before the divergence: finite, and loadable
        payload, _ = load_checkpoint(ckpt)
        assert all(torch.isfinite(t).all() for m in payload["fields"].values() for t in m.values())
        assert f"step {payload['step']})" in err


def test_non_finite_weights_are_never_saved_and_never_loaded(tmp_path):
    cfg = RunConfig()
    good = {"coarse": {"w": torch.ones(2)}}
    save_checkpoint(tmp_path / "ok.pt", cfg, 1, good)
    with pytest.raises(CheckpointError, match="not written, the weights coarse.w hold NaN"):
        save_checkpoint(tmp_path / "ok.pt", cfg, 2, {"coarse": {"w": torch.tensor([1.0, float("nan")])}})
    assert load_checkpoint(tmp_path / "ok.pt")[0]["step"] == 1  # the good one is still there
    payload = torch.load(tmp_path / "ok.pt", weights_only=False)
    payload["fields"]["coarse"]["w"][0] = float("inf")
    torch.save(payload, tmp_path / "inf.pt")
    with pytest.raises(CheckpointError, match="coarse.w hold NaN or inf"):
        load_checkpoint(tmp_path / "inf.pt")


def test_metrics_json_is_always_valid_json(tmp_path):
    atomic_write_json(tmp_path / "m.json", {"psnr": float("nan"), "kappa": [1.0, float("inf")], "n": 3})
    text = (tmp_path / "m.json").read_text()
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == {
        "psnr": None, "kappa": [1.0, None], "n": 3}


def test_black_level_is_the_psnr_of_a_background_image():
    rng = np.random.default_rng(0)
    images = rng.uniform(0, 1, (3, 5, 4, 3)).astype(np.float32)
    expected = np.mean([peak_signal_noise_ratio(im, np.zeros_like(im), data_range=1.0) for im in images])
    assert black_level_psnr(images, 0.0) == pytest.approx(expected, abs=1e-4)
    expected_white = np.mean([peak_signal_noise_ratio(im, np.ones_like(im), data_range=1.0) for im in images])
    assert black_level_psnr(images, 1.0) == pytest.approx(expected_white, abs=1e-4)
    assert black_warning(20.0, 8.4, 12.0, 50) is None
    assert "black-image level (8.40 dB" in black_warning(8.9, 8.4, None, 50)
    assert "from the warm-up (first 50 steps) on" in black_warning(8.9, 8.4, 8.5, 50)


def test_memory_errors_are_one_line(monkeypatch, capsys):
    import enerf.cli as cli

    def boom(argv):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: not enough memory: you tried "
                           "to allocate 800000000000 bytes.")

    monkeypatch.setitem(cli.COMMANDS, "train", boom)
    assert main(["train"]) == 2
    assert capsys.readouterr().err.strip().startswith("enerf: error: out of memory; lower --N_rand")
