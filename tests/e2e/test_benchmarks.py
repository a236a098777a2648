"""benchmarks/ and studies/: every script imports as a package module and answers ``--help``
(nothing run), none edits ``sys.path``, and the shared harness records what it claims."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

import enerf
from benchmarks import harness

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(f"{p.parent.name}.{p.stem}" for folder in ("benchmarks", "studies")
                 for p in (ROOT / folder).glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_imports_and_answers_help(name):
    """``python -m NAME --help`` in this process: a script with a ``main`` prints its usage and
    exits 0; a shared module (no ``main``) only imports. No file edits sys.path."""
    source = (ROOT / (name.replace(".", "/") + ".py")).read_text()
    assert "sys.path" not in source
    module = importlib.import_module(name)
    if not hasattr(module, "main"):
        assert name in ("benchmarks.harness", "benchmarks.grid", "benchmarks.gpu_equality", "studies.mlp_timing")
        return
    out = io.StringIO()
    with mock.patch.object(sys, "argv", [module.__file__, "--help"]), contextlib.redirect_stdout(out), \
            pytest.raises(SystemExit) as exit_:
        takes_argv = module.main.__code__.co_argcount and module.main.__defaults__ is None
        module.main(["--help"]) if takes_argv else module.main()
    assert exit_.value.code in (0, None)
    assert out.getvalue().startswith("usage: ")


def test_harness_command_line_names_the_module():
    """A script run with ``-m`` has its file as argv[0]; the recorded command is the ``-m`` form."""
    argv = [str(ROOT / "benchmarks" / "real.py"), "--scene", "fern", "--seed", "0"]
    assert harness.command_line(argv) == "python -m benchmarks.real --scene fern --seed 0"
    assert harness.command_line([str(ROOT / "studies" / "kappa_shapes.py"), "--out", "a b.json"]) == \
        "python -m studies.kappa_shapes --out 'a b.json'"


def test_harness_runs_enerf_with_this_python(tmp_path):
    """A record's ``enerf ...`` runs as ``sys.executable -m enerf ...`` (a venv's enerf, activated or not);
    other commands are left as they are."""
    cmd = harness.as_run(["enerf", "--version"])
    assert cmd == [sys.executable, "-m", "enerf", "--version"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PATH": ""})
    assert done.returncode == 0 and done.stdout.strip() == f"enerf {enerf.__version__}", done.stderr
    assert harness.as_run(["git", "status", tmp_path]) == ["git", "status", str(tmp_path)]


def test_harness_record_is_valid_json_and_atomic(tmp_path):
    """write_record: non-finite floats become null (the file is always valid JSON), parents are
    made, and a failure while encoding leaves the earlier record untouched."""
    path = harness.write_record(tmp_path / "sub" / "r.json", {"a": 1.5, "b": math.nan, "c": [math.inf]})
    assert json.loads(path.read_text()) == {"a": 1.5, "b": None, "c": [None]}
    with pytest.raises(TypeError):
        harness.write_record(path, {"x": object()})
    assert json.loads(path.read_text())["a"] == 1.5
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_harness_load_commit_timer_machine():
    """load_average: three values as ``/proc/loadavg`` has them (2 decimals); git_commit: git's
    own short hash; Timer: the seconds a sleep took; machine names the core count and, where lscpu
    tells it, the processor's model."""
    load = harness.load_average()
    proc = [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    assert len(load) == 3 and all(abs(a - b) < 0.5 for a, b in zip(load, proc))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:
        assert re.fullmatch(re.escape(head.stdout.strip()) + r"(\+dirty)?", harness.git_commit())
    with harness.Timer() as t:
        time.sleep(0.05)
    assert 0.05 <= t.seconds < 1.0
    assert harness.machine().startswith(f"{os.cpu_count()} CPU cores")
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True) if shutil.which("lscpu") else None
    model = re.search(r"^Model name:\s*(.+)$", lscpu.stdout, re.M) if lscpu and lscpu.returncode == 0 else None
    if model:
        assert f"({model[1].strip()})" in harness.machine()


def test_shapes_compare_record_matches_the_runs(tmp_path):
    """``benchmarks.shapes compare --report_only --record``: the record holds each run's metrics
    per seed, and its deltas are the mean over seeds minus the mean of ``none`` (numpy)."""
    from benchmarks import shapes
    from benchmarks.grid import grid_runs

    rng = np.random.default_rng(0)
    runs = grid_runs("shape", ["torus", "bunny"], ["none", "row+bnp"], [0, 1, 2], tmp_path, "configs/shape_compare.txt",
                     ["--kind", "occupancy"])
    written = {}
    for run in runs:
        m = {"iou": float(rng.uniform(0.8, 1.0)), "chamfer_l1": float(rng.uniform(1e-3, 1e-2)),
             "normal_consistency": float(rng.uniform(0.8, 1.0)), "fscore": float(rng.uniform(0.5, 1.0))}
        run.metrics_path.parent.mkdir(parents=True)
        run.metrics_path.write_text(json.dumps(m))
        written.setdefault((run.scene, run.mode.spec), []).append(m)
    record = tmp_path / "r.json"
    argv = ["shapes.py", "compare", "--shapes", "torus", "bunny", "--modes", "none", "row+bnp", "--out", str(tmp_path),
            "--report_only", "--record", str(record)]
    with mock.patch.object(sys, "argv", argv), contextlib.redirect_stdout(io.StringIO()):
        shapes.main()
    rows = {(r["shape"], r["mode"]): r for r in json.loads(record.read_text())["rows"]}
    assert set(rows) == set(written)
    for (shape, mode), ms in written.items():
        row = rows[shape, mode]
        assert row["n"] == 3 and row["iou"] == [m["iou"] for m in ms]
        base = [m["chamfer_l1"] for m in written[shape, "none"]]
        assert row["chamfer_l1_delta"] == pytest.approx(np.mean([m["chamfer_l1"] for m in ms]) - np.mean(base))
        assert row["iou_delta"] == pytest.approx(np.mean(row["iou"]) - np.mean([m["iou"] for m in written[shape, "none"]]))


def test_cond_2x2_control_pairs_row_with_the_control_by_seed(tmp_path):
    """studies.cond_2x2's learning-rate-matched control: row - control per seed, its mean and the
    95 % Student-t interval (scipy's t quantile on numpy's mean and sample std)."""
    from scipy import stats

    from studies.cond_2x2 import control_contrasts

    control = {0: 17.45, 1: 17.30, 2: 17.61}
    for seed, psnr in control.items():
        run = tmp_path / "runs" / f"fern-nonex2-s{seed}"
        run.mkdir(parents=True)
        (run / "compare_run.json").write_text(json.dumps({"status": "done", "signature": {"mode": "none*2", "seed": seed}}))
        (run / "metrics.json").write_text(json.dumps({"psnr": psnr}))
    row = {0: {"psnr": 17.22}, 1: {"psnr": 17.45}, 2: {"psnr": 17.44}}
    got = control_contrasts(tmp_path, row)["none*2"]
    diffs = np.array([row[s]["psnr"] - control[s] for s in range(3)])
    half = stats.t.ppf(0.975, 2) * diffs.std(ddof=1) / np.sqrt(3)
    assert got["seeds"] == [0, 1, 2] and got["of"] == "row - none*2"
    assert got["per_seed"] == pytest.approx(diffs.tolist())
    assert got["ci95"] == pytest.approx([diffs.mean() - half, diffs.mean() + half])


def test_view_gap_finds_the_band_the_shift_and_the_far_camera():
    """studies.view_gap's measures against independent ones: error put into the top quarter only
    gives that quarter all of it and the PSNR of numpy's mean; a rendering shifted by (1, -2)
    pixels is found with its gain; camera distances against scipy's k-d tree."""
    from scipy.spatial import cKDTree

    from studies.view_gap import band_psnrs, camera_distances, shift_gain

    rng = np.random.default_rng(0)
    se = np.zeros((40, 30))
    se[:10] = rng.uniform(0.001, 0.01, (10, 30))
    bands, share = band_psnrs(se, 4)
    assert share == pytest.approx(1.0)
    assert bands[0] == pytest.approx(-10 * np.log10(se[:10].mean())) and bands[1] > 100

    gt = rng.uniform(0, 1, (40, 50, 3))
    noise = rng.normal(0, 0.01, gt.shape)
    pred = np.roll(gt, (-1, 2), axis=(0, 1)) + noise  # pred[y, x] = gt[y + 1, x - 2] + noise
    gain, dy, dx = shift_gain(gt, pred, 3)
    core = (slice(3, 37), slice(3, 47))
    assert (dy, dx) == (1, -2)
    shifted_mse = (noise[core] ** 2).mean()
    assert gain == pytest.approx(10 * np.log10(((gt[core] - pred[core]) ** 2).mean() / shifted_mse))

    centres = rng.normal(size=(12, 3))
    i_train, i_test = np.arange(0, 12, 2), np.arange(1, 12, 2)
    tree = cKDTree(centres[i_train])
    spacing = np.median(tree.query(centres[i_train], k=2)[0][:, 1])
    got = camera_distances(centres, i_train, i_test)
    assert [got[i] for i in i_test] == pytest.approx(tree.query(centres[i_test])[0] / spacing)


def test_view_gap_finds_a_shift_of_a_fraction_of_a_pixel():
    """A periodic, band-limited image moved by (0.5, -1.25) pixels (its spectrum's phase turned by hand, numpy
    only) plus noise: the sub-pixel search finds that shift, scikit-image's phase correlation agrees, and the gain
    is what leaves only the noise."""
    from skimage.registration import phase_cross_correlation

    from studies.view_gap import subpixel_shift_gain

    rng = np.random.default_rng(1)
    h, w = 64, 80
    fy, fx = np.fft.fftfreq(h)[:, None, None], np.fft.fftfreq(w)[None, :, None]
    spectrum = np.fft.fftn(rng.uniform(0, 1, (h, w, 3)), axes=(0, 1)) * np.exp(-(fy ** 2 + fx ** 2) / 0.01)
    gt = np.fft.ifftn(spectrum, axes=(0, 1)).real
    dy, dx = 0.5, -1.25  # pred[y, x] = gt[y + dy, x + dx]
    moved = np.fft.ifftn(spectrum * np.exp(2j * np.pi * (fy * dy + fx * dx)), axes=(0, 1)).real
    noise = rng.normal(0, 1e-3, gt.shape)
    pred = moved + noise
    gain, got_dy, got_dx = subpixel_shift_gain(gt, pred, 2, 0.25)
    assert (got_dy, got_dx) == (dy, dx)
    found = phase_cross_correlation(gt.mean(-1), pred.mean(-1), upsample_factor=4)[0]  # the shift moving pred onto gt
    assert tuple(found) == pytest.approx((dy, dx), abs=0.25)
    core = (slice(18, h - 18), slice(18, w - 18))  # reach 2 + the 16-pixel margin
    back = np.fft.ifftn(np.fft.fftn(noise, axes=(0, 1)) * np.exp(-2j * np.pi * (fy * dy + fx * dx)), axes=(0, 1)).real
    expected = 10 * np.log10(((gt[core] - pred[core]) ** 2).mean() / (back[core] ** 2).mean())  # pred moved back
    assert gain == pytest.approx(expected, abs=0.01)


def test_view_gap_refuses_a_folder_without_renderings_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "studies.view_gap", "--run", str(tmp_path / "nope")],
                            cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and "test_views" in lines[0] and "Traceback" not in result.stderr
