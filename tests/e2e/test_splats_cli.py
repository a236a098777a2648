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
from splat_readers import read_spz_means
from enerf.cli import main
from enerf.config import ShapeFieldConfig, ShapeRunConfig, ShapeTrainConfig
from enerf.loaded_run import load_run
from enerf.fields.shape import ShapeField
from enerf.splats import Splats
from enerf.splats.frames import splats_to_frame
from enerf.splats.files import write_splat_file

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
        "not a splat file enerf reads": [str(ckpt), str(out_dir / "a.spz"), "--splats", str(junk)],
        "keeps none": [str(ckpt), str(out_dir / "a.spz"), "--crop", "90", "90", "90", "1"],
        "is written as .ply": [str(ckpt), str(out_dir / "a.txt")],
    }
    for words, (checkpoint, out, *more) in cases.items():
        err = _one_line_error(capsys, ["export", "splats", "--ckpt", checkpoint, "--out", out, "--quiet", *more])
        assert words in err, err
    assert len(fake_bake) == 1 and list(out_dir.iterdir()) == []  # the crop is known to keep nothing after the bake and not (tmp_path / "missing").exists()


def _fake_rasterize(record: list):
    def rasterize(splats, camera, background=None):
        record.append((splats, camera, background))
        acc = torch.ones(camera.height, camera.width)
        return {"rgb": torch.tensor(COLOUR).expand(camera.height, camera.width, 3), "acc": acc, "depth": 2.0 * acc}

    return rasterize


def _world_file(run, path: Path) -> Splats:
    """A splat file (by ``path``'s extension) in the world frame whose scene-frame splats are returned."""
    scene_splats = _splats(30, 1)
    write_splat_file(path, splats_to_frame(scene_splats, run.scene.scene_to_world), "world")
    return scene_splats


@pytest.mark.parametrize("suffix, atol", [(".ply", 1e-5), (".spz", 4e-3)])  # SPZ: a step of 1/8 of the smaller splats' size
def test_eval_splats_scores_the_splats_images_on_the_held_out_views(ckpt, tmp_path, monkeypatch, capsys, suffix, atol):
    record: list = []
    monkeypatch.setattr(rasterize_module, "rasterize", _fake_rasterize(record))
    run = load_run(ckpt, Path("data"), images=True)
    splat_file = tmp_path / f"s{suffix}"
    scene_splats = _world_file(run, splat_file)
    metrics_json = run.folder / "metrics.json"
    field_metrics = metrics_json.read_bytes()
    capsys.readouterr()
    assert main(["eval", "--ckpt", str(ckpt), "--splats", str(splat_file), "--quiet"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[0]
    assert "held-out PSNR" in line and "metrics_splats.json" in line
    assert metrics_json.read_bytes() == field_metrics  # the field's record is untouched
    metrics = json.loads((run.folder / "metrics_splats.json").read_text())
    assert metrics["source"] == "splats" and metrics["splats"] == str(splat_file.resolve())
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
        torch.testing.assert_close(splats.means, scene_splats.means, rtol=0, atol=atol)
        np.testing.assert_allclose(camera.c2w.numpy(), scene.poses[view], atol=1e-6)
        assert (camera.width, camera.height, camera.focal) == (scene.width, scene.height, scene.focal)
        assert torch.equal(background, torch.zeros(3))


@pytest.mark.parametrize("suffix", [".ply", ".splat"])
def test_render_splats_writes_the_splats_video_beside_the_fields(ckpt, tmp_path, monkeypatch, capsys, suffix):
    record: list = []
    monkeypatch.setattr(rasterize_module, "rasterize", _fake_rasterize(record))
    run = load_run(ckpt, Path("data"))
    scene_splats = _world_file(run, tmp_path / f"s{suffix}")
    capsys.readouterr()
    assert main(["render", "--ckpt", str(ckpt), "--splats", str(tmp_path / f"s{suffix}"), "--frames", "3",
                 "--quiet"]) == 0
    drawn = record[0][0]  # .splat: sorted largest first; the same centres
    torch.testing.assert_close(drawn.means[torch.argsort(drawn.means[:, 0])],
                               scene_splats.means[torch.argsort(scene_splats.means[:, 0])], rtol=0, atol=1e-5)
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


def test_a_splat_file_cropped_and_converted_without_a_run(tmp_path, capsys):
    splats = _splats(200, 2)
    write_splat_file(tmp_path / "in.ply", splats, "world")
    box = (-0.5, -1.0, -0.8, 1.0, 0.6, 0.9)
    m = splats.means.numpy()
    inside = np.all((m >= box[:3]) & (m <= box[3:]), axis=1)
    capsys.readouterr()
    assert main(["export", "splats", "--splats", str(tmp_path / "in.ply"), "--out", str(tmp_path / "out.spz"),
                 "--crop", *map(str, box)]) == 0
    line = capsys.readouterr().out.strip()
    assert f"wrote {inside.sum()} splats" in line and f"removed {200 - inside.sum()} outside --crop" in line
    v = plyfile.PlyData.read(str(tmp_path / "in.ply"))["vertex"].data  # the kept ones, by an independent reader
    kept = np.stack([v["x"], v["y"], v["z"]], 1)[inside]
    back = read_spz_means(tmp_path / "out.spz")
    size = np.percentile(np.exp(splats.log_scales.numpy()[inside]).max(1), 25)  # SPZ's step: at most size / 8
    np.testing.assert_allclose(back[np.argsort(back[:, 0])], kept[np.argsort(kept[:, 0])], atol=size / 16 + 1e-6)
    bad = tmp_path / "bad.ply"  # a NaN and an inf: dropped, said so
    splats.means[3, 1], splats.log_scales[7, 0] = float("nan"), float("inf")
    write_splat_file(bad, splats, "world")
    assert main(["export", "html", "--splats", str(bad), "--out", str(tmp_path / "p.html")]) == 0
    assert "198 splats (dropped 2 with a value that is not finite)" in capsys.readouterr().out
    assert main(["export", "splats", "--splats", str(bad), "--out", str(tmp_path / "ok.splat")]) == 0
    assert "wrote 198 splats" in capsys.readouterr().out and (tmp_path / "ok.splat").stat().st_size == 198 * 32
    (tmp_path / "cut.spz").write_bytes((tmp_path / "out.spz").read_bytes()[:-9])
    for argv in (["export", "html", "--splats", str(tmp_path / "cut.spz"), "--out", str(tmp_path / "c.html")],
                 ["export", "splats", "--splats", str(tmp_path / "cut.spz"), "--out", str(tmp_path / "c.ply")]):
        assert "truncated or corrupt SPZ" in _one_line_error(capsys, argv)
    assert not (tmp_path / "c.html").exists() and not (tmp_path / "c.ply").exists()


def test_floaters_no_training_camera_sees_are_dropped(ckpt, tmp_path, capsys):
    run = load_run(ckpt, Path("data"))
    c2w = torch.as_tensor(run.scene.poses[int(run.scene.i_train[0])], dtype=torch.float32)
    n = 12
    ahead = c2w[:, 3] - 3.0 * c2w[:, 2] + 0.1 * torch.randn(n, 3, generator=torch.Generator().manual_seed(0))
    means = torch.cat([ahead, ahead + 100.0 * c2w[:, 2]])  # and the same far behind every camera
    scene_splats = Splats(means, torch.full((2 * n, 3), -3.0), torch.tensor([[1.0, 0, 0, 0]]).repeat(2 * n, 1),
                          torch.zeros(2 * n), torch.zeros(2 * n, 1, 3))
    write_splat_file(tmp_path / "in.ply", splats_to_frame(scene_splats, run.scene.scene_to_world), "world")
    capsys.readouterr()
    assert main(["export", "splats", "--ckpt", str(ckpt), "--splats", str(tmp_path / "in.ply"), "--out",
                 str(tmp_path / "out.ply"), "--min_contribution", "0.01", "--frame", "scene", "--quiet"]) == 0
    assert f"removed {n} floaters" in capsys.readouterr().out
    v = plyfile.PlyData.read(str(tmp_path / "out.ply"))["vertex"].data
    np.testing.assert_allclose(np.sort(v["x"]), np.sort(ahead[:, 0].numpy()), atol=1e-4)
