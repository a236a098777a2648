"""Which sampler ``--sampler`` (``--renderer``, its earlier name) means: auto, nerfacc's preconditions and their one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from enerf.synthetic.scene import make_synthetic_scene
from enerf.errors import ConfigError
from enerf.render import nerfacc_backend
from helpers import resolve_sampler

CPU = torch.device("cpu")


def test_auto_is_torch_grid_without_cuda_and_nerfacc_says_why():
    assert resolve_sampler("auto", CPU) == "torch_grid"
    with pytest.raises(ConfigError, match="nerfacc needs a CUDA device"):
        resolve_sampler("nerfacc", CPU)


def test_auto_warns_once_with_the_build_failure_reason(monkeypatch):
    reason = nerfacc_backend._build_failure_reason(RuntimeError("utils_math.cuh: error: call of overloaded 'lerp' is ambiguous"))
    assert "std::lerp" in reason and "C++20" in reason
    monkeypatch.setattr(nerfacc_backend, "nerfacc_status", lambda device: (False, reason))
    warnings: list[str] = []
    assert resolve_sampler("auto", torch.device("cuda"), warn=warnings.append) == "torch_grid"
    assert warnings == [f"--sampler auto falls back to torch_grid: {reason}"]
    with pytest.raises(ConfigError, match="std::lerp"):
        resolve_sampler("nerfacc", torch.device("cuda"))


def test_cli_nerfacc_on_cpu_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "enerf.cli", "train", "--renderer", "nerfacc", "--device", "cpu", "--datadir",
         str(tmp_path), "--basedir", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr
    # Either the missing scene or the renderer is reported first; with a scene, the renderer:
    scene = make_synthetic_scene(tmp_path / "s", n_views=3, width=16, height=12, seed=0)
    proc = subprocess.run(
        [sys.executable, "-m", "enerf.cli", "train", "--renderer", "nerfacc", "--device", "cpu", "--datadir",
         str(scene), "--basedir", str(tmp_path), "--llffhold", "0", "--factor", "1"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "nerfacc needs a CUDA device" in lines[0], proc.stderr
