"""benchmarks/gpu_check.py without CUDA: it runs what it can, reports nerfacc as null with the reason, exits 0."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch


from enerf.synthetic.scene import make_synthetic_scene

ROOT = Path(__file__).resolve().parents[2]
from benchmarks import gpu_equality


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", *extra], capture_output=True, text=True,
                          cwd=tmp_path, env=env)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[dict, str, Path]:
    tmp = tmp_path_factory.mktemp("gpu_check")
    scene = make_synthetic_scene(tmp / "tiny", n_views=8, width=40, height=30, seed=1)
    flags = f"--datadir {scene} --factor 1 --netdepth 2 --netwidth 32 --view_width 16 --N_samples 8 --N_rand 64"
    proc = _run(tmp, "--scene", "demo", "--minutes", "0.005", "--device", "cpu", "--out", str(tmp / "out"),
                "--equality_rays", "512", "--flags", flags)
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp / "out" / "gpu_check.json").read_text()), proc.stdout, tmp / "out"


def test_equality_fractions_are_partial_and_match_numpy(report):
    data, _, _ = report
    cases = data["equality"]
    levels = gpu_equality.OCCUPANCY_LEVELS
    assert [(c["occupancy"], c["early_stop"]) for c in cases] == [(o, s) for o in levels for s in (False, True)]
    centres = (np.arange(32) + 0.5) / 32 * 2 - 1
    x, y, z = np.meshgrid(centres, centres, centres, indexing="ij")
    for c in cases:
        expected = float((gpu_equality.occupancy_pattern(x, y, z) > levels[c["occupancy"]]).mean())
        assert 0 < c["occupied_fraction"] < 1
        assert c["occupied_fraction"] == expected
        assert c["n_rays"] == 512 and c["early_stop_eps"] == (1e-4 if c["early_stop"] else 0.0)
        for key in ("max_abs_diff", "rays_with_different_counts", "different_counts_on_promised_rays",
                    "nerfacc_samples_per_ray"):
            assert c[key] is None
        assert c["nerfacc_reason"] == "--device cpu: CUDA not used"
    # Early stop drops samples: the dense case renders fewer with it on.
    dense = {c["early_stop"]: c["torch_grid_samples_per_ray"] for c in cases if c["occupancy"] == "dense"}
    assert dense[True] < dense[False]


def test_training_runs_and_their_figures_add_up(report):
    data, stdout, out = report
    t = data["training"]
    runs = {(r["renderer"], r["conditioning"]): r for r in t["runs"]}
    assert set(runs) == {(r, c) for r in ("torch_grid", "hierarchical") for c in ("none", "row")}
    for (renderer, _), r in runs.items():
        assert r["steps"] >= 1 and math.isfinite(r["psnr"]) and r["held_out_views"] >= 1
        assert r["peak_gpu_memory_mib"] is None
        if renderer == "hierarchical":  # fixed rays per step: rays / s * seconds = steps * N_rand
            assert r["rays_per_second"] * r["train_seconds"] == pytest.approx(r["steps"] * 64, rel=1e-9)
    for renderer in ("torch_grid", "hierarchical"):
        ratio = runs[(renderer, "row")]["median_step_seconds"] / runs[(renderer, "none")]["median_step_seconds"]
        assert t["row_over_none_step_time"][renderer] == pytest.approx(ratio, rel=1e-12)
    assert data["nerfacc"] == {"available": False, "build_seconds": None, "reason": "--device cpu: CUDA not used"}
    assert t["peak_gpu_memory_reason"] and any("nerfacc" in item for item in data["needed_cuda"])
    md = (out / "gpu_check.md").read_text()
    assert "| dense, early stop on |" in md and "| torch_grid | row |" in md and "needs CUDA" in md
    assert "[1/3]" in stdout and "[3/3]" in stdout and "needed CUDA" in stdout


def test_unknown_scene_is_one_line_and_exit_2(tmp_path):
    proc = _run(tmp_path, "--scene", "nowhere", "--minutes", "0.001", "--device", "cpu", "--equality_rays", "8",
                "--out", str(tmp_path / "out"))
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "configs/nowhere.txt not found" in lines[0], proc.stderr
    assert not (tmp_path / "out" / "gpu_check.json").exists()


def test_the_comparison_finds_exactly_the_rays_through_a_cell_the_other_renderer_lacks(monkeypatch):
    """``compare_with_nerfacc``'s own code (it runs only on CUDA otherwise), on the CPU with a
    torch_grid stand-in for nerfacc whose grid lacks one occupied cell: the rays whose counts
    differ are exactly those with a sample in that cell, found here from the sample midpoints."""
    case = gpu_equality.equality_case("half", False, n_rays=512)
    samples = case.renderer.estimator.sample(case.rays, {"coarse": case.field}, train=False)
    ray_indices, t_starts, t_ends = samples.ray_indices, samples.t_starts, samples.t_ends
    mids = case.rays.origins[ray_indices] + (0.5 * (t_starts + t_ends))[:, None] * case.rays.directions[ray_indices]
    cells = np.floor((mids.numpy().astype(np.float64) + 1.0) / 2.0 * gpu_equality.GRID_RESOLUTION).astype(int)
    busiest = np.unique(cells, axis=0, return_counts=True)
    cell = busiest[0][busiest[1].argmax()]
    through = set(ray_indices[torch.from_numpy((cells == cell).all(axis=1))].tolist())
    assert len(through) > 3

    real = gpu_equality._renderer_on

    def stand_in(case, device, use_nerfacc):
        renderer = real(case, device, False)
        if use_nerfacc:
            renderer.estimator.grid.binaries[tuple(cell)] = False
        return renderer

    monkeypatch.setattr(gpu_equality, "_renderer_on", stand_in)
    out = gpu_equality.compare_with_nerfacc(case, torch.device("cpu"))
    promised = ~gpu_equality.ambiguous_rays(case)
    assert out["rays_with_different_counts"] == len(through)
    assert out["different_counts_on_promised_rays"] == sum(bool(promised[r]) for r in through)
    assert out["max_abs_diff_all_rays"]["acc"] > 1e-3
    assert out["nerfacc_samples_per_ray"] == pytest.approx((ray_indices.numel() - int((cells == cell).all(axis=1).sum())) / 512)
