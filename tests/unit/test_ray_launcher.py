"""``enerf compare --launcher ray``: a grid of tiny runs as Ray tasks on a local Ray instance."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from enerf.compare.compare import run_compare
from enerf.compare.launchers import RAY_MISSING, make_launcher
from enerf.config import CompareConfig
from enerf.synthetic.scene import make_synthetic_scene
from enerf.errors import ConfigError, EnerfError

TINY = ["--factor", "1", "--llffhold", "3", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--iters", "3",
        "--kappa_every", "3", "--log_every", "3", "--no_lpips", "--chunk", "4096", "--device", "cpu"]


@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def scene(tmp_path_factory) -> Path:
    return make_synthetic_scene(tmp_path_factory.mktemp("scene") / "tiny", n_views=6, width=24, height=18, seed=2)


def _records(out: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/compare_run.json"))}


def test_missing_ray_is_one_line_naming_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[ray\]"') as err:
        make_launcher("ray")
    assert str(err.value) == RAY_MISSING and "\n" not in RAY_MISSING
    with pytest.raises(ConfigError, match="local, ray"):
        make_launcher("slurm")


def test_ray_grid_equals_the_local_grid_and_skips_finished_runs(ray_local, scene, tmp_path):
    local = CompareConfig(scenes=(str(scene),), modes=("none", "row"), seeds=(0, 1), jobs=2, out=str(tmp_path / "local"))
    on_ray = replace(local, launcher="ray", out=str(tmp_path / "ray"))
    run_compare(local, None, TINY, progress=False)
    run_compare(on_ray, None, TINY, progress=False)
    assert (tmp_path / "ray" / "compare.csv").read_text() == (tmp_path / "local" / "compare.csv").read_text()
    records = _records(tmp_path / "ray")
    assert len(records) == 4 and all(r["status"] == "done" for r in records.values())
    for name in records:  # each run's own metrics, not a copy of another's
        a = json.loads((tmp_path / "ray" / "runs" / name / "metrics.json").read_text())
        b = json.loads((tmp_path / "local" / "runs" / name / "metrics.json").read_text())
        assert a["psnr"] == b["psnr"] and a["seed"] == b["seed"] and a["conditioning"] == b["conditioning"]
    run_compare(on_ray, None, TINY, progress=False)  # launched again: every run is finished, none reruns
    assert _records(tmp_path / "ray") == records


def test_a_broken_run_is_reported_with_its_log_tail_and_the_rest_finish(ray_local, scene, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(scene, broken)
    (broken / "poses_bounds.npy").write_bytes(b"not a numpy file")
    cfg = CompareConfig(scenes=(str(scene), str(broken)), modes=("row",), seeds=(0,), launcher="ray",
                        out=str(tmp_path / "cmp"))
    with pytest.raises(EnerfError, match="1 of 2 runs failed; first broken-row-s0"):
        run_compare(cfg, None, TINY, progress=False)
    records = _records(tmp_path / "cmp")
    assert records["tiny-row-s0"]["status"] == "done" and records["broken-row-s0"]["status"] == "failed"
    assert (tmp_path / "cmp" / "runs" / "tiny-row-s0" / "metrics.json").is_file()
    err = capsys.readouterr().err
    log = (tmp_path / "cmp" / "runs" / "broken-row-s0" / "compare.log").read_text().strip().splitlines()
    assert "broken-row-s0 failed (exit 2)" in err and log[-1] in err and "poses_bounds.npy" in log[-1]
