"""``enerf export html`` on a tiny run baked for real (``enerf export splats``, 2 s of fitting): the page
carries every splat of the file and the run's cameras in the file's frame (numpy: ``scene_to_world``
times the scene-space pose), and, opened as file:// in headless Chromium, starts at the first training
camera, shows the splats as ``enerf.splats.rasterize`` renders them from that camera, steps to the next
camera with ``n`` and changes when dragged. Bad input is one line, exit 2, nothing written.

The browser tests skip (with the reason) where selenium, chromium or chromedriver is missing:
``apt-get install -y chromium chromium-driver`` and ``pip install -e ".[test]"``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from enerf.checkpoint import save_checkpoint
from cli_errors import one_line_error
from enerf.cli import main
from enerf.config import ShapeFieldConfig, ShapeRunConfig, ShapeTrainConfig
from enerf.loaded_run import load_run
from enerf.fields.shape import ShapeField
from enerf.splats.frames import splats_to_frame
from enerf.splats.ply import read_splats, write_splats
from enerf.cameras.pinhole import Pinhole
from enerf.splats.rasterize import rasterize

plyfile = pytest.importorskip("plyfile")

# a tiny network that learns some density in 30 steps (the bake starts where the opacity reaches 0.5)
TINY = ["--preset", "none", "--iters", "30", "--lrate", "2e-2", "--factor", "1", "--llffhold", "4", "--netdepth", "2",
        "--netwidth", "16", "--view_width", "8", "--multires", "2", "--multires_views", "1", "--N_samples", "8",
        "--N_rand", "256", "--no_lpips", "--quiet", "--device", "cpu", "--kappa_every", "0", "--video", "none"]
W, H = 640, 480  # the browser window: the tiny scene's 4:3


@pytest.fixture(scope="module")
def baked(scene_dir, tmp_path_factory) -> dict:
    """A tiny run, its splats baked for real (world frame) and the page of both."""
    base = tmp_path_factory.mktemp("runs")
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(base), "--expname", "r", *TINY]) == 0
    ckpt = base / "r" / "checkpoints" / "latest.pt"
    ply, page = base / "s.ply", base / "page.html"
    assert main(["export", "splats", "--ckpt", str(ckpt), "--out", str(ply), "--count", "2000", "--bake_seconds", "2",
                 "--init_downscale", "2", "--quiet"]) == 0
    assert main(["export", "html", "--splats", str(ply), "--ckpt", str(ckpt), "--out", str(page)]) == 0
    return {"ckpt": ckpt, "ply": ply, "page": page, "run": load_run(ckpt, Path("data"), images=False)}


def _header(page: Path) -> dict:
    text = page.read_text()
    found = re.search(r'<script type="application/json" id="enerf-header">(.*?)</script>', text, re.S)
    return json.loads(found.group(1))


def _world_pose(scene, view: int) -> np.ndarray:
    """[4, 4] the scene-space pose of ``view`` taken to the capture's frame: ``scene_to_world`` times it,
    the rotation columns scaled back to unit length."""
    c2w = np.asarray(scene.scene_to_world, np.float64) @ np.vstack([scene.poses[view], [0.0, 0.0, 0.0, 1.0]])
    c2w[:3, :3] /= np.linalg.norm(c2w[:3, :3], axis=0)
    return c2w


def _fov_y(scene) -> float:
    return math.degrees(2 * math.atan(scene.height / (2 * scene.focal)))


def test_the_page_holds_every_splat_and_the_runs_cameras_in_the_files_frame(baked, tmp_path, capsys):
    run, scene = baked["run"], baked["run"].scene
    ply = plyfile.PlyData.read(str(baked["ply"]))
    assert ply.comments == ["enerf frame world", "enerf antialiased"]  # the bake's default: the 2D mip filter
    count = ply["vertex"].count
    assert count > 100
    header = _header(baked["page"])
    assert header["count"] == count and header["sh_degree"] == 1
    views = [*scene.i_train, *scene.i_test]
    assert len(header["cameras"]) == len(views) == scene.n_views
    assert not np.allclose(scene.scene_to_world, np.eye(4))  # the LLFF scene is rescaled and recentred
    for cam, view in zip(header["cameras"], views):
        np.testing.assert_allclose(cam["c2w"], _world_pose(scene, int(view)), atol=1e-6)
        assert cam["fov_y"] == pytest.approx(_fov_y(scene))

    # the same splats in the scene frame: the cameras come in that frame
    splats, _ = read_splats(baked["ply"])
    scene_file = tmp_path / "scene_frame.ply"
    write_splats(scene_file, splats_to_frame(splats, np.linalg.inv(scene.scene_to_world)), "scene")
    capsys.readouterr()
    assert main(["export", "html", "--splats", str(scene_file), "--ckpt", str(baked["ckpt"]), "--out",
                 str(tmp_path / "s.html"), "--max_splats", "50", "--sh_degree", "0", "--title", "A <b>",
                 "--quiet"]) == 0
    line = capsys.readouterr().out.strip()
    assert len(line.splitlines()) == 1
    assert f"50 splats (of {count})" in line and f"{scene.n_views} cameras" in line and "scene frame" in line
    assert line.endswith(f"-> {tmp_path / 's.html'}") and "MB" in line
    header = _header(tmp_path / "s.html")
    assert header["count"] == 50 and header["sh_degree"] == 0
    np.testing.assert_allclose(header["cameras"][0]["c2w"][:3], scene.poses[int(scene.i_train[0])], atol=1e-6)
    assert "<title>A &lt;b&gt;</title>" in (tmp_path / "s.html").read_text()

    # no checkpoint, an existing folder as --out: index.html with the page's own view
    folder = tmp_path / "site"
    folder.mkdir()
    assert main(["export", "html", "--splats", str(baked["ply"]), "--out", str(folder), "--quiet"]) == 0
    assert "no cameras" in capsys.readouterr().out
    assert sorted(p.name for p in folder.iterdir()) == ["index.html"]
    header = _header(folder / "index.html")
    assert header["count"] == count and len(header["cameras"]) == 1
    assert "<title>s</title>" in (folder / "index.html").read_text()


def _one_line_error(capsys, argv) -> str:
    return one_line_error(capsys, argv, quiet_stdout=True)


def test_bad_input_is_one_line_and_writes_nothing(baked, tmp_path, capsys):
    shape_cfg = ShapeRunConfig(expname="toy", basedir=str(tmp_path / "base"),
                               field=ShapeFieldConfig(netdepth=2, netwidth=8, skips=(), multires=2),
                               train=ShapeTrainConfig(device="cpu"))
    shape = tmp_path / "shape.pt"
    save_checkpoint(shape, shape_cfg, 1, {"field": ShapeField(shape_cfg.field).state_dict()}, None)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    mesh = tmp_path / "mesh.ply"
    plyfile.PlyData([plyfile.PlyElement.describe(np.zeros(3, [("x", "f4"), ("y", "f4"), ("z", "f4")]),
                                                 "vertex")]).write(str(mesh))
    text = tmp_path / "notes.ply"
    text.write_text("hello\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    page, ply, ckpt = str(out_dir / "p.html"), str(baked["ply"]), str(baked["ckpt"])
    cases = {
        "not a 3DGS splat PLY (the vertex element lacks": ["--splats", str(mesh), "--out", page],
        "not a PLY file": ["--splats", str(text), "--out", page],
        "splat file not found": ["--splats", str(tmp_path / "none.ply"), "--out", page],
        "needs --splats F.ply": ["--out", page],
        "does not exist; create it first": ["--splats", ply, "--out", str(tmp_path / "missing" / "p.html")],
        "a page is written as .html": ["--splats", ply, "--out", str(out_dir / "p.htm")],
        "--sh_degree must be an integer in [0, 1]": ["--splats", ply, "--out", page, "--sh_degree", "2"],
        "is a shape checkpoint": ["--splats", ply, "--ckpt", str(shape), "--out", page],
        "not a readable checkpoint": ["--splats", ply, "--ckpt", str(junk), "--out", page],
    }
    for words, argv in cases.items():
        err = _one_line_error(capsys, ["export", "html", *argv, "--quiet"])
        assert words in err, err
    assert list(out_dir.iterdir()) == [] and not (tmp_path / "missing").exists()


# -- in a real browser ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    pytest.importorskip("selenium", reason="selenium is not installed: pip install -e '.[test]'")
    from benchmarks.splat_page import CHROMEDRIVER, CHROMIUM, open_chromium

    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("no headless browser: apt-get install -y chromium chromium-driver")
    driver = open_chromium(W, H)
    yield driver
    driver.quit()


def _screenshot(driver) -> np.ndarray:
    driver.execute_script("window.enerfSplat.showHud(false)")
    return iio.imread(driver.get_screenshot_as_png())[..., :3].astype(np.float64) / 255.0


def _camera(driver) -> np.ndarray:
    return np.array(driver.execute_script("return window.enerfSplat.getCamera()")).reshape(4, 4)


def test_the_page_opens_at_the_first_training_camera_and_shows_the_splats(baked, browser):
    from selenium.webdriver.common.action_chains import ActionChains

    from benchmarks.splat_page import drag_and_wait, input_and_wait, open_page

    scene = baked["run"].scene
    open_page(browser, baked["page"])
    ready, count, error, width, height, focal = browser.execute_script(
        "const h = window.enerfSplat; return [h.ready, h.count, h.error, h.width, h.height, h.focal]")
    assert (ready, error, width, height) == (True, None, W, H)
    assert count == plyfile.PlyData.read(str(baked["ply"]))["vertex"].count
    first = _world_pose(scene, int(scene.i_train[0]))
    np.testing.assert_allclose(_camera(browser), first, atol=1e-5)
    assert focal == pytest.approx(scene.focal * H / scene.height, rel=1e-5)  # the training camera's field of view

    shot = _screenshot(browser)
    assert shot.shape == (H, W, 3)
    assert (shot.max(-1) > 0.05).mean() > 0.9, "the page is mostly blank"
    assert shot.std((0, 1)).min() > 0.02, "the page shows no structure"
    # what the page shows is the splats from that camera: enerf's own rasterizer at a quarter of the
    # window (the screenshot averaged over 4 x 4 pixels)
    splats, _ = read_splats(baked["ply"])
    camera = Pinhole(torch.as_tensor(first[:3], dtype=torch.float32), W // 4, H // 4,
                         scene.focal * H / 4 / scene.height)
    want = rasterize(splats, camera, torch.zeros(3))["rgb"].numpy()
    got = shot.reshape(H // 4, 4, W // 4, 4, 3).mean((1, 3))
    psnr = -10 * np.log10(np.mean((got - want) ** 2))
    flat = -10 * np.log10(np.mean((got - got.mean((0, 1))) ** 2))  # a flat image of the mean colour
    # Chromium 156 (SwiftShader) passed 35 dB; Debian's Chromium 150 gave 33.7 dB, 18 dB above the flat image, with
    # the fit before its compiled projection. The faster fit makes more steps in its 2 s (how many depends on the
    # machine's load), and on an idle machine the figure fell to 28.0-29.3 dB, 9.5 dB above the flat image, the
    # error on single splats; on a loaded one 37.8 dB, where the page matched its own decoded splats
    # (pagepack.decode_page_splats drawn by enerf's rasterizer) at 51 dB: the loss is the page's encoding, which
    # grows with the fit. A wrong camera or a blank page scores near the flat image
    assert psnr > 26.0 and psnr > flat + 7.0, (psnr, flat)

    input_and_wait(browser, lambda: ActionChains(browser).send_keys("n").perform(), full=True)
    np.testing.assert_allclose(_camera(browser), _world_pose(scene, int(scene.i_train[1])), atol=1e-5)
    second = _screenshot(browser)
    drag_and_wait(browser, -120, full=True)
    assert not np.allclose(_camera(browser), _world_pose(scene, int(scene.i_train[1])), atol=1e-3)
    dragged = _screenshot(browser)
    assert np.abs(dragged - second).mean() > 0.01, "the view did not change when the camera moved"


def test_the_fit_brings_the_splats_closer_to_the_photos(baked, tmp_path):
    """The same bake with no fitting (--bake_seconds 0: the splats as started from the field) against the
    2-second fit: the fit lowers the error on the training photos it fits (PSNR computed here in numpy)."""
    start = tmp_path / "start.ply"
    assert main(["export", "splats", "--ckpt", str(baked["ckpt"]), "--out", str(start), "--count", "2000",
                 "--bake_seconds", "0", "--init_downscale", "2", "--quiet"]) == 0
    run = load_run(baked["ckpt"], Path("data"), images=True)
    from enerf.splats.files import read_splats_into_scene

    def psnr(path: Path) -> float:
        splats = read_splats_into_scene(path, run.scene, run.device)[0]
        errors = []
        for i in run.scene.i_train:
            cam = Pinhole(torch.as_tensor(run.scene.poses[i]), run.scene.width, run.scene.height, run.scene.focal)
            with torch.no_grad():
                rgb = rasterize(splats, cam, backend="torch")["rgb"].numpy()
            errors.append(np.mean((rgb - run.scene.image(int(i))) ** 2))
        return float(-10 * np.log10(np.mean(errors)))

    assert psnr(baked["ply"]) > psnr(start) + 0.5


def test_turned_views_start_gaussians_where_no_training_camera_looks(baked):
    """``--teacher_turn``: the field rendered from every rendered training camera turned up, down, left and
    right; those of their pixels whose points no training camera frames (numpy projection) start Gaussians
    too, which the training views alone cannot start."""
    from enerf.config import SplatConfig
    from enerf.splats import bake
    from enerf.splats.teacher import turned_poses, turned_targets

    run = load_run(baked["ckpt"], Path("data"), images=True)
    cfg = SplatConfig(init_downscale=2, teacher_turn=40.0, turn_spread=0.0)  # whole turned views
    data, rendered = bake.field_candidates(run, cfg, progress=False)
    cams, targets, more = turned_targets(run, cfg, rendered, progress=False)
    assert len(cams) == len(targets) == 4 * len(rendered[0])
    np.testing.assert_allclose(np.stack([np.asarray(c.c2w) for c in cams]), turned_poses(rendered[0], 40.0), atol=1e-6)
    assert targets[0].shape == (cams[0].height, cams[0].width, 4)
    assert turned_targets(run, SplatConfig(init_downscale=2, teacher_turn=0.0), rendered, progress=False) == ([], [], {})

    def outside_every_training_view(points: np.ndarray) -> np.ndarray:
        scene = run.scene
        out = np.ones(len(points), bool)
        for i in scene.i_train:
            pose = np.asarray(scene.poses[i], np.float64)
            local = (points - pose[:, 3]) @ pose[:, :3]
            z = -local[:, 2]
            u = scene.focal * local[:, 0] / np.maximum(z, 1e-9) + 0.5 * scene.width
            v = -scene.focal * local[:, 1] / np.maximum(z, 1e-9) + 0.5 * scene.height
            out &= ~((z > 0) & (u >= 0) & (u < scene.width) & (v >= 0) & (v < scene.height))
        return out

    assert not outside_every_training_view(data["points"].astype(np.float64)).any()
    assert len(more["points"]) > 0 and outside_every_training_view(more["points"].astype(np.float64)).all()


def test_turned_views_with_turn_spread_teach_only_their_surface_pixels(baked):
    """``--turn_spread``: the same turned renderings, with a fifth channel that is 1 only on pixels at least half
    opaque whose spread is within the bound; their candidates are a subset of the unmasked ones."""
    from enerf.config import SplatConfig
    from enerf.splats import bake
    from enerf.splats.teacher import turned_targets

    run = load_run(baked["ckpt"], Path("data"), images=True)
    cfg = SplatConfig(init_downscale=2, teacher_turn=40.0, turn_spread=0.1)
    _, rendered = bake.field_candidates(run, cfg, progress=False)
    _, masked, fewer = turned_targets(run, cfg, rendered, progress=False)
    _, whole, every = turned_targets(run, SplatConfig(init_downscale=2, teacher_turn=40.0, turn_spread=0.0), rendered,
                                     progress=False)
    for m, w in zip(masked, whole):
        assert m.shape[-1] == 5 and torch.equal(m[..., :4], w)
        assert bool((w[..., 3][m[..., 4] > 0] >= 0.5).all())
    rows = {tuple(p) for p in every["points"].tolist()}
    assert len(fewer["points"]) <= len(every["points"]) and all(tuple(p) in rows for p in fewer["points"].tolist())
