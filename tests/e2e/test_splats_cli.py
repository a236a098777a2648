"""``enerf export splats``, ``enerf eval --splats`` and ``enerf render --splats`` on a tiny run, with the
bake and the rasterizer stood in for (their own tests check them): the file lands in the frame asked
for (read back with plyfile), eval scores the splats' images on the held-out views (PSNR against
numpy's), render writes the splats' video beside the field's, and bad input is one line, exit 2,
nothing written."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import imageio.v2 as iio2
import numpy as np
import pytest
import torch

import enerf.splats.rasterize as rasterize_module
from enerf.checkpoint import save_checkpoint
from cli_errors import one_line_error
from enerf.cli import main
from enerf.config import ShapeFieldConfig, ShapeRunConfig, ShapeTrainConfig
from enerf.loaded_run import load_run
from enerf.shapes.field import ShapeField
from enerf.splats import Splats
from enerf.splats.frames import splats_to_frame
from enerf.splats.ply import write_splats

plyfile = pytest.importorskip("plyfile")

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--no_lpips", "--quiet",
        "--device", "cpu", "--kappa_every", "0", "--video", "none"]
COLOUR = (0.2, 0.6, 0.9)  # what the stand-in rasterizer paints


@pytest.fixture(scope="module")
def ckpt(scene_dir, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("runs")
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(base), "--expname", "r", "--iters", "3",
                 *TINY]) == 0
    return base / "r" / "checkpoints" / "latest.pt"


def _splats(n: int, degree: int) -> Splats:
    g = torch.Generator().manual_seed(n)
    return Splats(torch.randn(n, 3, generator=g), torch.randn(n, 3, generator=g) - 3, torch.randn(n, 4, generator=g),
                  torch.randn(n, generator=g), torch.randn(n, (degree + 1) ** 2, 3, generator=g) * 0.3)


@pytest.fixture
def fake_bake(monkeypatch):
    """``enerf.splats.bake`` stood in for: returns ``_splats(cfg.count, cfg.sh_degree)``; records its calls."""
    calls = []

    def bake(run, cfg, progress=True):
        calls.append((run, cfg))
        return _splats(cfg.count, cfg.sh_degree), None  # (splats, BakeReport)

    module = types.ModuleType("enerf.splats.bake")
    module.bake = bake
    monkeypatch.setitem(sys.modules, "enerf.splats.bake", module)
    return calls


def _one_line_error(capsys, argv) -> str:
    return one_line_error(capsys, argv, quiet_stdout=False)


def test_export_splats_writes_the_bake_in_the_frame_asked_for(ckpt, tmp_path, fake_bake, capsys):
    out = tmp_path / "scene.ply"
    capsys.readouterr()
    assert main(["export", "splats", "--ckpt", str(ckpt), "--out", str(out), "--count", "40", "--sh_degree", "2",
                 "--quiet"]) == 0
    line = capsys.readouterr().out.strip()
    assert len(line.splitlines()) == 1 and "40 splats" in line and "SH degree 2" in line and "world frame" in line
    run, cfg = fake_bake[-1]
    assert cfg.count == 40 and cfg.sh_degree == 2 and run.scene_dir is not None  # the bake got the photos
    assert float(run.scene.images[0].max()) > 0.0
    ply = plyfile.PlyData.read(str(out))
    assert ply.comments == ["enerf frame world"] and ply["vertex"].count == 40
    v = ply["vertex"].data
    baked = _splats(40, 2)
    to_world = np.asarray(run.scene.scene_to_world, np.float64)
    assert not np.allclose(to_world, np.eye(4))  # the LLFF scene is rescaled and recentred
    expected = baked.means.double().numpy() @ to_world[:3, :3].T + to_world[:3, 3]
    np.testing.assert_allclose(np.stack([v["x"], v["y"], v["z"]], 1), expected, rtol=1e-5, atol=1e-5)
    scale = np.cbrt(np.linalg.det(to_world[:3, :3]))
    np.testing.assert_allclose(v["scale_0"], baked.log_scales[:, 0].numpy() + np.log(scale), atol=1e-5)

    assert main(["export", "splats", "--ckpt", str(ckpt), "--out", str(tmp_path / "s.ply"), "--count", "5",
                 "--sh_degree", "0", "--frame", "scene", "--quiet"]) == 0
    v = plyfile.PlyData.read(str(tmp_path / "s.ply"))["vertex"].data
    np.testing.assert_array_equal(np.stack([v["x"], v["y"], v["z"]], 1), _splats(5, 0).means.numpy())


def test_export_splats_refuses_bad_input_in_one_line_writing_nothing(ckpt, tmp_path, fake_bake, capsys):
    shape_cfg = ShapeRunConfig(expname="toy", basedir=str(tmp_path / "base"),
                               field=ShapeFieldConfig(netdepth=2, netwidth=8, skips=(), multires=2),
                               train=ShapeTrainConfig(device="cpu"))
    shape = tmp_path / "shape" / "checkpoints" / "latest.pt"
    save_checkpoint(shape, shape_cfg, 1, {"field": ShapeField(shape_cfg.field).state_dict()}, None)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    cases = {
        "is a shape checkpoint": [str(shape), str(out_dir / "a.ply")],
        "not a readable checkpoint": [str(junk), str(out_dir / "a.ply")],
        "does not exist": [str(ckpt), str(tmp_path / "missing" / "a.ply")],
        "SPZ": [str(ckpt), str(out_dir / "a.spz")],
        "is written as .ply": [str(ckpt), str(out_dir / "a.txt")],
    }
    for words, (checkpoint, out) in cases.items():
        err = _one_line_error(capsys, ["export", "splats", "--ckpt", checkpoint, "--out", out, "--quiet"])
        assert words in err, err
    assert fake_bake == [] and list(out_dir.iterdir()) == [] and not (tmp_path / "missing").exists()


def _fake_rasterize(record: list):
    def rasterize(splats, camera, background=None):
        record.append((splats, camera, background))
        acc = torch.ones(camera.height, camera.width)
        return {"rgb": torch.tensor(COLOUR).expand(camera.height, camera.width, 3), "acc": acc, "depth": 2.0 * acc}

    return rasterize


def _world_file(run, path: Path) -> Splats:
    """A splat file in the world frame whose scene-frame splats are returned."""
    scene_splats = _splats(30, 1)
    write_splats(path, splats_to_frame(scene_splats, run.scene.scene_to_world), "world")
    return scene_splats


def test_eval_splats_scores_the_splats_images_on_the_held_out_views(ckpt, tmp_path, monkeypatch, capsys):
    record: list = []
    monkeypatch.setattr(rasterize_module, "rasterize", _fake_rasterize(record))
    run = load_run(ckpt, Path("data"), images=True)
    scene_splats = _world_file(run, tmp_path / "s.ply")
    metrics_json = run.folder / "metrics.json"
    field_metrics = metrics_json.read_bytes()
    capsys.readouterr()
    assert main(["eval", "--ckpt", str(ckpt), "--splats", str(tmp_path / "s.ply"), "--quiet"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[0]
    assert "held-out PSNR" in line and "metrics_splats.json" in line
    assert metrics_json.read_bytes() == field_metrics  # the field's record is untouched
    metrics = json.loads((run.folder / "metrics_splats.json").read_text())
    assert metrics["source"] == "splats" and metrics["splats"] == str((tmp_path / "s.ply").resolve())
    assert metrics["splat_count"] == 30 and metrics["sh_degree"] == 1
    scene, stride = run.scene, run.cfg.train.eval_stride
    psnr = [-10 * np.log10(np.mean((scene.image(int(i), stride) - np.array(COLOUR)) ** 2)) for i in scene.i_test]
    assert metrics["psnr"] == pytest.approx(float(np.mean(psnr)), abs=1e-4)
    assert [p["view"] for p in metrics["per_image"]] == [int(i) for i in scene.i_test]
    assert sorted(p.name for p in (run.folder / "test_views_splats").iterdir()) == [
        f"view_{int(i):03d}.png" for i in scene.i_test]
    # the rasterizer got the splats in the scene frame, the held-out cameras and the run's (black) background
    assert len(record) == len(scene.i_test)
    for (splats, camera, background), view in zip(record, scene.i_test):
        torch.testing.assert_close(splats.means, scene_splats.means, rtol=0, atol=1e-5)
        np.testing.assert_allclose(camera.c2w.numpy(), scene.poses[view], atol=1e-6)
        assert (camera.width, camera.height, camera.focal) == (scene.width, scene.height, scene.focal)
        assert torch.equal(background, torch.zeros(3))


def test_render_splats_writes_the_splats_video_beside_the_fields(ckpt, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(rasterize_module, "rasterize", _fake_rasterize([]))
    run = load_run(ckpt, Path("data"))
    _world_file(run, tmp_path / "s.ply")
    capsys.readouterr()
    assert main(["render", "--ckpt", str(ckpt), "--splats", str(tmp_path / "s.ply"), "--frames", "3", "--quiet"]) == 0
    assert "from the splats of" in capsys.readouterr().out
    with iio2.get_reader(run.folder / "video_spiral_splats" / "rgb.mp4") as reader:
        frames = np.stack([np.asarray(f) for f in reader])
    assert frames.shape == (3, run.scene.height, run.scene.width, 3)
    assert np.abs(frames.mean((0, 1, 2)) / 255.0 - np.array(COLOUR)).max() < 0.03
    assert not (run.folder / "video_spiral").exists()


def test_a_splats_file_that_is_no_3dgs_ply_is_one_line_and_writes_nothing(ckpt, tmp_path, capsys):
    run = load_run(ckpt, Path("data"))
    mesh = tmp_path / "mesh.ply"
    verts = np.zeros(3, [("x", "f4"), ("y", "f4"), ("z", "f4")])
    plyfile.PlyData([plyfile.PlyElement.describe(verts, "vertex")]).write(str(mesh))
    before = sorted(p.name for p in run.folder.iterdir())
    for command in (["eval"], ["render", "--frames", "2"]):
        err = _one_line_error(capsys, [*command, "--ckpt", str(ckpt), "--splats", str(mesh), "--quiet"])
        assert "not a 3DGS splat PLY" in err and str(mesh) in err
        err = _one_line_error(capsys, [*command, "--ckpt", str(ckpt), "--splats", str(tmp_path / "no.ply"), "--quiet"])
        assert "not found" in err
    assert sorted(p.name for p in run.folder.iterdir()) == before
