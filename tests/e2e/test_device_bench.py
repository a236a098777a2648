"""benchmarks/device_checks.sh in its dry run (DRY=1: benchmarks.device_bench on the CPU, a tiny
synthetic scene forward-facing and as a walk-around, the CUDA and the CPU preset, 1-2 s of training
each): one record with the machine's versions, and rays per second that are rays_per_step * steps
/ seconds, with rays per step the preset's batch or every training pixel, counted from the scene's
size by hand."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
# the tiny scene: 8 views of 96 x 72, every 8th held out (1 view), 7 training views
VIEWS, WIDTH, HEIGHT, TRAIN = 8, 96, 72, 7


def _train_pixels(factor: int) -> int:
    return TRAIN * (WIDTH // factor) * (HEIGHT // factor)


# (scene, preset) -> (factor, rays a step): the presets' factor (LLFF's default 8 where they leave it) and N_rand
EXPECTED = {("tiny_forward", "cuda"): (4, min(4096, _train_pixels(4))),
            ("tiny_forward", "cpu"): (0, min(1024, _train_pixels(8))),
            ("tiny_walkaround", "cuda"): (2, min(4096, _train_pixels(2))),
            ("tiny_walkaround", "cpu"): (0, min(1024, _train_pixels(8)))}


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> tuple[dict, Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("device_bench")
    env = {**os.environ, "DRY": "1", "OUT": str(out), "OMP_NUM_THREADS": "1", "RUNS": str(out / "scratch"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["bash", "benchmarks/device_checks.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and (out / "device_bench.json").is_file(), proc.stdout + proc.stderr
    return json.loads((out / "device_bench.json").read_text()), out, proc


def test_the_record_names_the_machine_and_every_run(record):
    rec, out, proc = record
    assert rec["complete"] and rec["dry_run"] and rec["missing"] == {}
    machine = rec["machine"]
    assert (machine["torch"], machine["cuda"], machine["gpu"]) == (torch.__version__, torch.version.cuda, None)
    assert rec["times"] == {"cuda": [1.0, 2.0], "cpu": [1.0]}
    assert sorted((r["scene"], r["preset"]) for r in rec["runs"]) == sorted(EXPECTED)
    assert (out / "device.log").read_text().count("[") >= 4 and "wrote" in proc.stdout


@pytest.mark.parametrize("key", sorted(EXPECTED), ids=["-".join(k) for k in sorted(EXPECTED)])
def test_rays_per_second_is_rays_per_step_times_steps_over_seconds(record, key):
    rec, out, _ = record
    run = next(r for r in rec["runs"] if (r["scene"], r["preset"]) == key)
    factor, rays_per_step = EXPECTED[key]
    assert (run["factor"], run["device"], run["held_out_views"]) == (factor, "cpu", 1)
    assert run["preset_file"] in run["start_line"] and run["start_line"].startswith(f"--preset {key[1]} on cpu")
    times = rec["times"][key[1]]
    assert [m["mark"] for m in run["marks"]] == times and run["time_budget"] == max(times)
    for m in run["marks"]:
        assert m["seconds"] >= m["mark"] and m["steps"] >= 1 and m["rays"] == m["steps"] * rays_per_step
        assert m["rays_per_step"] == rays_per_step
        assert m["rays_per_second"] > 0
        assert math.isclose(m["rays_per_second"], m["rays_per_step"] * m["steps"] / m["seconds"], rel_tol=1e-12)
        assert math.isfinite(m["psnr"])
    assert [m["steps"] for m in run["marks"]] == sorted(m["steps"] for m in run["marks"])
    last = run["marks"][-1]
    assert (run["steps"], run["seconds"], run["rays_per_second"], run["psnr"]) == (
        last["steps"], last["seconds"], last["rays_per_second"], last["psnr"])
    metrics = json.loads((out / "runs" / f"{key[0]}_{key[1]}" / "metrics.json").read_text())  # the run's own
    assert (metrics["steps"], metrics["psnr"], metrics["train_seconds"]) == (run["steps"], run["psnr"], run["seconds"])


def test_the_ratio_and_the_targets(record):
    rec, _, _ = record
    rate = {(r["scene"], r["preset"]): r["rays_per_second"] for r in rec["runs"]}
    assert rec["ratio_cuda_over_cpu_rays_per_second"] == {
        scene: rate[(scene, "cuda")] / rate[(scene, "cpu")] for scene in ("tiny_forward", "tiny_walkaround")}
    # the figures are for the fox, the boardgame and fern: not measured in a dry run
    assert len(rec["targets"]) == 4 and all(t["measured"] is None and t["met"] is None for t in rec["targets"])
