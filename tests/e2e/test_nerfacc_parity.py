"""Training parity: nerfacc and torch_grid, same seed and settings, reach the same held-out PSNR.

The runs cannot be step-for-step identical: nerfacc draws its stratified jitter and its grid
updates' cells and points from torch's global CUDA generator (``OccGridEstimator.sampling``
``torch.rand_like``; ``_update`` ``torch.rand_like`` / ``torch.randint``), torch_grid from the
run's generator, which also draws the ray batches, so the batches part ways after the first
step. The algorithms are the same (tests/e2e/test_nerfacc_equality.py), so after a few hundred
steps the held-out PSNR must agree within 0.3 dB. On a CPU everything up to the first CUDA
step is checked: the two configs differ in the renderer alone, and nerfacc is refused there
with its reason.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from enerf.cli import build_train_parser, main, run_config_from_args
from enerf.config import SAMPLERS
from enerf.errors import ConfigError
from enerf.render import nerfacc_backend
from helpers import resolve_sampler

# A tiny NeRF on a 40 x 30 synthetic scene; the density pre-pass early stop (early_stop_block 0)
# is nerfacc's way, and occlusion culling (torch_grid only) is off.
PARITY_FLAGS = [
    "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "48", "--view_width", "24",
    "--multires", "6", "--multires_views", "2", "--N_samples", "16", "--N_rand", "256", "--log_every", "50",
    "--kappa_every", "0", "--no_lpips", "--quiet", "--chunk", "2048", "--grid_resolution", "24",
    "--render_step_size", str(1 / 96), "--grid_warmup", "64", "--grid_update_every", "8", "--lrate", "5e-3",
    "--lrate_decay", "2", "--early_stop_block", "0", "--cull_occluded", "false", "--seed", "0", "--iters", "500",
]


def _nerfacc_reason() -> str:
    if not torch.cuda.is_available():
        return "no CUDA device: the nerfacc path cannot run here"
    ok, why = nerfacc_backend.nerfacc_status(torch.device("cuda"))
    return "" if ok else why


def parity_argv(scene_dir: Path, basedir: Path, renderer: str) -> list[str]:
    return ["--datadir", str(scene_dir), "--basedir", str(basedir), "--expname", renderer, "--renderer", renderer,
            *PARITY_FLAGS]


def test_parity_runs_differ_in_the_renderer_alone_and_nerfacc_needs_cuda(tmp_path):
    parser = build_train_parser()
    cfgs = {r: run_config_from_args(parser.parse_args(parity_argv(tmp_path, tmp_path / "runs", r)))
            for r in ("nerfacc", "torch_grid")}
    a, b = cfgs["nerfacc"], cfgs["torch_grid"]
    assert (a.render.sampler, b.render.sampler) == ("nerfacc", "torch_grid") and set(SAMPLERS) >= {"nerfacc", "torch_grid"}
    same_render = dataclasses.replace(a.render, sampler="torch_grid")
    assert dataclasses.replace(a, render=same_render, expname=b.expname) == b
    assert a.train.seed == 0 and a.train.iters == 500 and not a.render.cull_occluded and a.render.early_stop_block == 0
    with pytest.raises(ConfigError, match="nerfacc needs a CUDA device"):
        resolve_sampler("nerfacc", torch.device("cpu"))


@pytest.mark.skipif(bool(_nerfacc_reason()), reason=_nerfacc_reason() or "nerfacc available")
def test_nerfacc_training_reaches_torch_grids_psnr(scene_dir, tmp_path):
    metrics = {}
    for renderer in ("torch_grid", "nerfacc"):
        assert main(["train", *parity_argv(scene_dir, tmp_path, renderer), "--device", "cuda"]) == 0
        metrics[renderer] = json.loads((tmp_path / renderer / "metrics.json").read_text())
        assert metrics[renderer]["renderer"] == renderer and metrics[renderer]["steps"] == 500
    assert metrics["torch_grid"]["psnr"] > 15  # it learned the scene, so the comparison means something
    assert abs(metrics["nerfacc"]["psnr"] - metrics["torch_grid"]["psnr"]) <= 0.3, metrics
