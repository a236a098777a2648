"""A run folder's own splats (``<run>/splats.ply``, what ``enerf train`` bakes after training) drawn by
``enerf render``, ``enerf view`` and ``enerf export html`` given only ``--ckpt``; ``--field`` renders the
field instead, ``--splats F`` another file; each command says which in one line.

On a tiny run with a small splat file written by enerf's own writer (world frame): render's frames are
``rasterize``'s images of the splats in the scene frame (the file's splats moved by the inverse of
``scene_to_world``, numpy) from the held-out cameras; the viewer holds as many splats as plyfile counts in
the file; the page holds every splat of it. A run without the file renders its field, and ``export html``
says in one line (exit 2) that it has none; ``--field`` with ``--splats`` is one line, exit 2."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from cli_errors import one_line_error
from enerf.cli import main
from enerf.config import ViewerConfig
from enerf.loaded_run import load_run
from enerf.runfolder import RUN_SPLATS, choose_splats, run_splats_path
from enerf.splats import Splats
from enerf.splats.frames import splats_to_frame
from enerf.splats.ply import write_splats
from enerf.cameras.pinhole import Pinhole
from enerf.splats.rasterize import rasterize

plyfile = pytest.importorskip("plyfile")

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--no_lpips", "--quiet",
        "--device", "cpu", "--kappa_every", "0", "--video", "none"]
COUNT = 60


def _scene_splats(n: int) -> Splats:
    """``n`` splats in the tiny scene's frame, in front of its cameras (z in [-3, -2]) and large enough
    to cover part of a 40 x 30 view."""
    g = torch.Generator().manual_seed(7)
    means = torch.cat([torch.rand(n, 2, generator=g) * 1.6 - 0.8, -2.0 - torch.rand(n, 1, generator=g)], 1)
    return Splats(means, torch.full((n, 3), -2.5), torch.randn(n, 4, generator=g), torch.full((n,), 2.0),
                  torch.rand(n, 4, 3, generator=g) - 0.5)


@pytest.fixture(scope="module")
def runs(scene_dir, tmp_path_factory) -> dict:
    """Run ``r`` with ``splats.ply`` (world frame) in its folder, and ``bare``, a copy of it without."""
    base = tmp_path_factory.mktemp("runs")
    assert main(["train", "--datadir", str(scene_dir), "--basedir", str(base), "--expname", "r", "--iters", "3",
                 *TINY]) == 0
    ckpt = base / "r" / "checkpoints" / "latest.pt"
    bare = base / "bare" / "checkpoints" / "latest.pt"
    bare.parent.mkdir(parents=True)
    shutil.copy(ckpt, bare)
    run = load_run(ckpt, Path("data"), images=False)
    scene_splats = _scene_splats(COUNT)
    write_splats(run.folder / RUN_SPLATS, splats_to_frame(scene_splats, run.scene.scene_to_world), "world")
    return {"ckpt": ckpt, "bare": bare, "run": run, "splats": scene_splats}


def test_the_run_splats_path_and_the_choice(runs, tmp_path):
    folder = runs["run"].folder
    assert run_splats_path(folder) == folder / "splats.ply" and run_splats_path(runs["bare"].parent.parent) is None
    assert choose_splats(None, folder).path == folder / "splats.ply"
    assert choose_splats(None, folder, field=True).path is None
    assert choose_splats(tmp_path / "x.ply", folder).path == tmp_path / "x.ply"
    assert choose_splats(None, runs["bare"].parent.parent).origin == "none"
    (tmp_path / RUN_SPLATS).mkdir()  # a folder of that name is no splat file
    assert run_splats_path(tmp_path) is None


def _frames(folder: Path, n: int) -> np.ndarray:
    return np.stack([iio.imread(folder / "frames" / f"rgb_{k:04d}.png") for k in range(n)]).astype(np.float64) / 255


def test_render_draws_the_runs_splats_and_the_field_with_field(runs, capsys):
    run, ckpt = runs["run"], str(runs["ckpt"])
    scene = run.scene
    capsys.readouterr()
    assert main(["render", "--ckpt", ckpt, "--path", "test", "--png", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"drawing the run's splats ({run.folder / 'splats.ply'}); --field for the field"
    assert len(out) == 2 and "from the splats of" in out[1]
    drawn = _frames(run.folder / "video_test_splats", len(scene.i_test))
    for frame, view in zip(drawn, scene.i_test):
        camera = Pinhole(torch.as_tensor(scene.poses[int(view)][:3, :4], dtype=torch.float32), scene.width,
                             scene.height, float(scene.focal))
        with torch.no_grad():
            expected = rasterize(runs["splats"], camera, torch.zeros(3))["rgb"].numpy()
        assert expected.std() > 0.02  # the splats are in view
        np.testing.assert_allclose(frame, expected, atol=1.5 / 255)
    assert main(["render", "--ckpt", ckpt, "--path", "test", "--png", "--quiet", "--field"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "rendering the field (--field)" and "from the splats" not in out[1]
    field = _frames(run.folder / "video_test", len(scene.i_test))
    assert np.abs(field - drawn).mean() > 0.02
    assert main(["render", "--ckpt", str(runs["bare"]), "--frames", "1", "--quiet", "--out",
                 str(runs["bare"].parent.parent / "v")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "rendering the field (the run has no splats.ply)"


def test_field_and_splats_together_are_one_line(runs, tmp_path, capsys):
    ply = str(runs["run"].folder / "splats.ply")
    for argv in (["render", "--ckpt", str(runs["ckpt"]), "--field", "--splats", ply, "--quiet"],
                 ["view", "--ckpt", str(runs["ckpt"]), "--splats", ply, "--field", "--port", "0"]):
        err = one_line_error(capsys, argv, quiet_stdout=True)
        assert "--field" in err and "not allowed with" in err and "--splats" in err, err
    err = one_line_error(capsys, ["view", "--splats", ply, "--field", "--port", "0"], quiet_stdout=True)
    assert "not allowed with" in err


def test_view_draws_the_runs_splats_unless_field(runs):
    from enerf.viewer.app import open_view

    pytest.importorskip("viser")
    count = plyfile.PlyData.read(str(runs["run"].folder / "splats.ply"))["vertex"].count
    assert count == COUNT
    for field, expect in ((False, f"drawing the run's splats ({runs['run'].folder / 'splats.ply'}); --field for the "
                                  "field"), (True, "rendering the field (--field)")):
        lines: list[str] = []
        viewer = open_view([runs["ckpt"]], ViewerConfig(port=0), worker=False, field=field, announce=lines.append)
        try:
            assert lines == [expect]
            drawn = viewer.splat_layer.splats
            if field:
                assert drawn is None
            else:  # in the run's scene frame: the splats before they were written in the world frame
                assert len(drawn) == count
                np.testing.assert_allclose(drawn.centers, runs["splats"].means.numpy(), atol=1e-5)
        finally:
            viewer.close()


def test_export_html_takes_the_runs_splats(runs, tmp_path, capsys):
    page = tmp_path / "page.html"
    capsys.readouterr()
    assert main(["export", "html", "--ckpt", str(runs["ckpt"]), "--out", str(page)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"enerf export html: drawing the run's splats ({runs['run'].folder / 'splats.ply'}); "
                      "--splats F.ply for another file")
    header = re.search(r'<script type="application/json" id="enerf-header">(.*?)</script>', page.read_text(), re.S)
    count = plyfile.PlyData.read(str(runs["run"].folder / "splats.ply"))["vertex"].count
    assert f'"count": {count},' in header.group(1) and "<title>r</title>" in page.read_text()
    scene = runs["run"].scene
    assert f"{len(scene.i_train) + len(scene.i_test)} cameras of the run" in out[1]
    err = one_line_error(capsys, ["export", "html", "--ckpt", str(runs["bare"]), "--out", str(tmp_path / "b.html")])
    assert "the run has no splats.ply" in err and "enerf export splats --ckpt" in err
    err = one_line_error(capsys, ["export", "html", "--out", str(tmp_path / "c.html")])
    assert "needs --splats F.ply" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]
