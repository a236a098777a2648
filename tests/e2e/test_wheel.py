"""The wheel path: build enerf's wheel from a copy of the clone (``pip wheel --no-deps
--no-build-isolation``), install it with ``--no-deps`` into a fresh venv outside the clone (which
sees the site-packages of the Python running the tests, a venv's, a conda env's or the system's:
torch and the other dependencies come from there, nothing is downloaded), and from a working directory outside the clone run ``enerf --version`` and a few
zero-config training steps on the embedded scene and on a transforms.json capture: the presets come
from the installed package, not the repository. Skips, saying why, where a venv or the build is
impossible offline."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

import enerf

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(OMP_NUM_THREADS="1", PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _why(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit code {proc.returncode}"


def _see_these_site_packages(python: Path, cwd: Path) -> None:
    """Let the venv of ``python`` import what the Python running the tests has installed: a .pth file in
    its site-packages lists this interpreter's site-packages folders (``site.getsitepackages()``, and the
    user site where enabled). ``--system-site-packages`` would give the base interpreter's instead, which
    lacks the dependencies when the tests run in a venv. The folders are plain path lines, so the .pth
    files inside them are not run: an editable install's finder for enerf stays out and the wheel's enerf
    is the one imported."""
    folders = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    where = _run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], cwd)
    assert where.returncode == 0, where.stderr
    pth = Path(where.stdout.strip()) / "_enerf_test_parent_site.pth"
    pth.parent.mkdir(parents=True, exist_ok=True)
    pth.write_text("".join(f"{folder}\n" for folder in dict.fromkeys(folders) if Path(folder).is_dir()))


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(the venv's python, its bin folder, the wheel): the wheel built from a copy of the clone's
    package files and installed into a fresh venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"  # a copy, so the build's build/ and egg-info stay out of the clone
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "enerf", src / "enerf", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = _run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "-w", tmp / "dist"],
                 src)
    wheels = sorted((tmp / "dist").glob("enerf-*.whl"))
    if built.returncode != 0 or not wheels:
        pytest.skip(f"cannot build the wheel offline here: {_why(built)}")
    made = _run([sys.executable, "-m", "venv", "--without-pip", tmp / "venv"], tmp)
    python = tmp / "venv" / "bin" / "python"
    if made.returncode != 0 or not python.exists():
        pytest.skip(f"python -m venv cannot make a venv here: {_why(made)}")
    _see_these_site_packages(python, tmp)
    installed = _run([python, "-m", "pip", "install", "--no-deps", "--no-index", wheels[0]], tmp)
    if installed.returncode != 0 and "No module named pip" in installed.stderr:
        pytest.skip("the venv sees no pip (the Python running the tests has none in its site-packages)")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python, python.parent, wheels[0]


def test_the_wheel_ships_the_presets(venv):
    _, _, wheel = venv
    names = zipfile.ZipFile(wheel).namelist()  # read with zipfile, not with enerf
    assert {"enerf/config/recipes.py", "enerf/config/presets.py", "enerf/config/resolve.py"} <= set(names)
    assert not any(n.startswith(("configs/", "tests/", "benchmarks/")) for n in names)


def test_the_installed_enerf_is_the_wheels_and_says_its_version(venv, tmp_path):
    python, bin_dir, _ = venv
    where = _run([python, "-c", "import enerf; print(enerf.__file__)"], tmp_path)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(python.parent.parent)  # the venv's, not the clone's
    for cmd in ([python, "-m", "enerf", "--version"], [bin_dir / "enerf", "--version"]):
        proc = _run(cmd, tmp_path)
        assert proc.returncode == 0 and proc.stdout.strip() == f"enerf {enerf.__version__}", proc.stderr


def _arc_capture(folder: Path, n: int = 8, size: tuple[int, int] = (24, 18)) -> Path:
    """A walk-around transforms.json capture: ``n`` PINHOLE cameras on a circle of radius 3
    looking at the origin (OpenGL axes), random 8-bit images."""
    rng = np.random.default_rng(0)
    (folder / "images").mkdir(parents=True)
    frames = []
    for k in range(n):
        angle = 2 * np.pi * k / n
        eye = np.array([3 * np.cos(angle), 3 * np.sin(angle), 0.5])
        back = eye / np.linalg.norm(eye)  # the camera looks along -z: z points away from the origin
        right = np.cross([0.0, 0.0, 1.0], back)
        right /= np.linalg.norm(right)
        c2w = np.eye(4)
        c2w[:3, :3] = np.stack([right, np.cross(back, right), back], axis=1)
        c2w[:3, 3] = eye
        iio.imwrite(folder / f"images/f_{k:02d}.png", rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))
        frames.append({"file_path": f"images/f_{k:02d}.png", "transform_matrix": c2w.tolist()})
    meta = {"camera_model": "PINHOLE", "fl_x": 20.0, "fl_y": 20.0, "cx": size[0] / 2, "cy": size[1] / 2,
            "w": size[0], "h": size[1], "frames": frames}
    (folder / "transforms.json").write_text(json.dumps(meta))
    return folder


def test_zero_config_training_from_the_wheel_outside_the_clone(venv, tmp_path):
    """The embedded scene (made small by the installed ``enerf data synth``, then found as --scene demo)
    and a walk-around capture train with no config file; their start lines name the packaged presets."""
    _, bin_dir, _ = venv
    enerf_cmd = bin_dir / "enerf"
    synth = _run([enerf_cmd, "data", "synth", "--out", "data/demo", "--views", "8", "--width", "96", "--height", "72"],
                 tmp_path)
    assert synth.returncode == 0, synth.stderr
    common = ["--video", "none", "--no_lpips", "--quiet", "--eval_every", "0", "--kappa_every", "0"]
    runs = {"demo": ([enerf_cmd, "train", "--scene", "demo", "--iters", "3", *common], "fern"),
            "capture": ([enerf_cmd, "train", "--datadir", _arc_capture(tmp_path / "capture"), "--iters", "2", *common],
                        "capture")}
    for name, (cmd, stem) in runs.items():
        proc = _run(cmd, tmp_path, timeout=180)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        first = proc.stdout.splitlines()[0]
        device = "cuda" if first.startswith("cuda") else "cpu"
        assert f"from enerf's preset {stem}_{device} (example file: configs/{stem}_{device}.txt)" in first, first
        metrics = json.loads((tmp_path / "runs" / name / "metrics.json").read_text())
        config = json.loads((tmp_path / "runs" / name / "config.json").read_text())
        assert metrics["steps"] == (3 if name == "demo" else 2) and np.isfinite(metrics["psnr"])
        # the packaged preset's values reached the run (both presets: a triplane feeding a 2 x 64 MLP)
        # on a CPU a photo capture splits its minutes: 420 s of field, then its splats (presets.CAPTURE_FIELD_SECONDS)
        cpu_budget = 600.0 if stem == "fern" else 420.0
        assert (config["field"]["encoding"], config["field"]["netwidth"], config["train"]["time_budget"]) == (
            "triplane", 64, cpu_budget if device == "cpu" else 300.0)
    assert not (tmp_path / "configs").exists()
