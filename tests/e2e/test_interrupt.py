"""Runs that can be interrupted and say their time: SIGTERM writes a checkpoint that --resume
continues bit-exactly, checkpoints every N seconds of training, the time-budget progress bar
counts seconds toward the budget, metrics.json splits the wall time, evaluations in a log file
report each view with the time left."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import enerf.train.loop as loop_module
from enerf.config import ShapeFieldConfig, ShapeRunConfig, ShapeTrainConfig
from enerf.train.evaluate import ViewReport
from enerf.train.loop import TrainingBar, train_loop
from test_presets import _Quadratic

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--log_every", "5",
        "--kappa_every", "0", "--no_lpips", "--quiet", "--device", "cpu", "--chunk", "1024"]


def _argv(scene_dir: Path, basedir: Path, expname: str, iters: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "enerf.cli", "train", "--datadir", str(scene_dir), "--basedir", str(basedir),
            "--expname", expname, "--iters", str(iters), *TINY, *extra]


def _weights(run: Path) -> tuple[int, dict, dict]:
    payload = torch.load(run / "checkpoints" / "latest.pt", map_location="cpu", weights_only=False)
    return payload["step"], payload["fields"], payload["optimizer"]


def _equal(a, b) -> bool:
    if torch.is_tensor(a):
        return torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


def test_sigterm_leaves_a_checkpoint_that_resumes_bit_exactly(scene_dir, tmp_path):
    iters = 400
    straight = subprocess.run(_argv(scene_dir, tmp_path, "straight", iters), capture_output=True, text=True)
    assert straight.returncode == 0, straight.stderr
    # the interrupted run: SIGTERM once its step-5 checkpoint exists (it is training then)
    proc = subprocess.Popen(_argv(scene_dir, tmp_path, "cut", iters, "--ckpt_every", "5"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ckpt = tmp_path / "cut" / "checkpoints" / "latest.pt"
    deadline = time.monotonic() + 120
    while not ckpt.is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("enerf: interrupted by SIGTERM at step ")
    assert f"checkpoint written to {ckpt}, continue with --resume" in lines[0] and "Traceback" not in err
    step = int(lines[0].split("at step ")[1].split(";")[0])
    assert 5 <= step < iters and _weights(tmp_path / "cut")[0] == step
    assert not (tmp_path / "cut" / "metrics.json").exists()
    resumed = subprocess.run(_argv(scene_dir, tmp_path, "cut", iters, "--ckpt_every", "5", "--resume"),
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    a, b = _weights(tmp_path / "straight"), _weights(tmp_path / "cut")
    assert a[0] == b[0] == iters and _equal(a[1], b[1]) and _equal(a[2], b[2])
    psnr = [json.loads((tmp_path / name / "metrics.json").read_text())["psnr"] for name in ("straight", "cut")]
    assert psnr[0] == psnr[1]


def _toy(tmp_path: Path, now: list[float], **train) -> _Quadratic:
    cfg = ShapeRunConfig(expname="toy", basedir=str(tmp_path), field=ShapeFieldConfig(netdepth=2, netwidth=8, skips=()),
                         train=ShapeTrainConfig(device="cpu", log_every=50, kappa_every=0, **train))
    return _Quadratic(cfg, now)


def test_checkpoints_every_n_seconds_of_training(tmp_path, monkeypatch):
    """Steps of 0.25 s on a fake clock, --ckpt_every_seconds 2: a checkpoint after every 8th step."""
    now = [100.0]
    monkeypatch.setattr(loop_module.time, "perf_counter", lambda: now[0])
    saved = []
    real_save = loop_module.save_checkpoint
    monkeypatch.setattr(loop_module, "save_checkpoint", lambda path, cfg, step, *a, **k: (saved.append(step),
                                                                                         real_save(path, cfg, step, *a, **k)))
    task = _toy(tmp_path, now, iters=30, ckpt_every_seconds=2.0)
    train_loop(task, tmp_path / "toy", tmp_path / "toy" / "checkpoints" / "latest.pt", progress=False)
    assert saved == [8, 16, 24, 30]  # 30: the last one


def test_the_time_budget_bar_counts_seconds_toward_the_budget(tmp_path, monkeypatch):
    bar = TrainingBar(iters=100000, time_budget=600.0, step=0, seconds=0.0, desc="x", enabled=True)
    assert (bar.bar.total, bar.bar.format_dict["unit"]) == (600.0, "s")
    bar.advance(1, 2.5)
    bar.advance(2, 4.0)
    assert bar.bar.n == 4.0 and bar.postfix["step"] == "2"
    bar.advance(3, 650.0)  # the last step ends past the budget: the bar stops at it
    assert bar.bar.n == 600.0
    bar.close()
    steps = TrainingBar(iters=50, time_budget=0.0, step=10, seconds=3.0, desc="x", enabled=True)
    assert (steps.bar.total, steps.bar.n) == (50, 10)
    steps.close()
    # in the loop: 0.25 s a step on the fake clock, a 5 s budget: 20 steps, the bar at 5 of 5 s
    now = [100.0]
    monkeypatch.setattr(loop_module.time, "perf_counter", lambda: now[0])
    bars = []
    monkeypatch.setattr(loop_module, "TrainingBar", lambda *a, **k: bars.append(TrainingBar(*a, **k)) or bars[-1])
    task = _toy(tmp_path, now, iters=100000, time_budget=5.0, ckpt_every_seconds=0.0)
    metrics = train_loop(task, tmp_path / "toy", tmp_path / "toy" / "checkpoints" / "latest.pt", progress=True)
    assert metrics["steps"] == 20 and (bars[0].bar.total, bars[0].bar.n) == (5.0, 5.0)


def test_metrics_split_the_wall_time(scene_dir, tmp_path, train_metrics):
    metrics = train_metrics(scene_dir, tmp_path, "run", 3, *TINY)
    wall = metrics["wall_seconds"]
    assert set(wall) == {"load", "train", "eval", "total"} and all(v > 0 for v in wall.values())
    assert wall["total"] == pytest.approx(wall["load"] + wall["train"] + wall["eval"])
    assert wall["train"] >= metrics["train_seconds"]


def test_an_evaluation_in_a_log_file_reports_each_view_and_the_time_left(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("enerf.train.evaluate.time.perf_counter", lambda: now[0])
    lines = []
    report = ViewReport("held-out views", 4, 480, 270, say=lines.append)
    for done, psnr in enumerate((20.0, 21.5, 22.25, 23.0), start=1):
        now[0] += 30.0  # 30 s a view
        report.view_done(done, psnr)
    assert lines == ["held-out views: rendering 4 views of 480 x 270",
                     "held-out views: view 1/4 scored 20.00 dB, about 1.5 min left",
                     "held-out views: view 2/4 scored 21.50 dB, about 60 s left",
                     "held-out views: view 3/4 scored 22.25 dB, about 30 s left",
                     "held-out views: view 4/4 scored 23.00 dB, 2.0 min in all"]
