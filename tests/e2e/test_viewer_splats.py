"""The viewer with splats, without a browser: ``Viewer.work`` with a stand-in browser on a tiny run.
While the splats stand in, nothing renders until the camera rests; then the first frame sent is
the exact frame at the cap (no previews or drafts), equal to ``render_camera``'s pixels, and the
splats are hidden; with ``--moving draft`` the drafts come back. ``enerf view`` names the bake
command when the run has no splats, and refuses ``--splats`` with two runs (one line)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from enerf.cli import main
from enerf.loaded_run import load_run
from enerf.viewer.render import fov_from_focal, render_camera
from enerf.viewer.scene import viser_from_c2w
from enerf.viewer.splats import ViewerSplats

pytest.importorskip("viser", reason="the viewer extra (viser) is not installed: pip install -e '.[viewer]'")

TINY = ["--preset", "none", "--factor", "1", "--netdepth", "2", "--netwidth", "16", "--N_samples", "8", "--N_rand", "64",
        "--no_lpips", "--quiet", "--kappa_every", "0", "--multires", "4", "--multires_views", "2", "--view_width", "8"]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    from enerf.synthetic.scene import make_synthetic_scene

    root = tmp_path_factory.mktemp("viewer_splats")
    scene = make_synthetic_scene(root / "scene", n_views=6, width=32, height=24, seed=1)
    assert main(["train", "--datadir", str(scene), "--basedir", str(root / "runs"), "--expname", "r", "--iters", "4",
                 *TINY]) == 0
    return root / "runs" / "r" / "checkpoints" / "latest.pt"


class _Camera:
    def __init__(self, c2w, fov, width, height):
        self.wxyz, self.position = viser_from_c2w(c2w)
        self.fov, self.image_width, self.image_height = fov, width, height


class _Node:
    visible = True


class _Client:
    """What the viewer uses of a browser: its camera, a scene that receives frames and splats."""

    def __init__(self, camera):
        self.client_id, self.camera, self.frames, self.scene = 0, camera, [], self

    def set_background_image(self, image, format="jpeg", jpeg_quality=None):  # noqa: A002 (viser's name)
        self.frames.append((image, format))

    def add_gaussian_splats(self, name, centers, covariances, rgbs, opacities, scale, visible):
        self.node = _Node()
        self.node.visible = visible
        return self.node


def _splats() -> ViewerSplats:
    return ViewerSplats(np.zeros((2, 3), np.float32), np.tile(np.eye(3, dtype=np.float32) * 1e-4, (2, 1, 1)),
                        np.full((2, 3), 0.5, np.float32), np.full((2, 1), 0.9, np.float32), "s.ply", "scene frame")


@pytest.mark.parametrize("moving", ["splats", "draft"])
def test_the_exact_frame_replaces_the_splats(ckpt, moving):
    from enerf.config import ViewerConfig
    from enerf.viewer.server import Viewer
    from enerf.viewer.session import Browser

    run = load_run(ckpt, Path("data"), task="nerf")
    viewer = Viewer(ViewerConfig(port=0, max_width=32, min_width=8, draft=0.5, moving=moving, rest_seconds=0.3))
    try:
        viewer.attach([run], [{}], splats=_splats())
        pose = run.scene.poses[int(run.scene.i_test[0])]
        client = _Client(_Camera(pose, fov_from_focal(run.scene.focal, run.scene.height), 64, 48))
        browser = Browser(client)
        viewer.splat_layer.connect(browser)
        viewer._browsers[0] = browser
        assert client.node.visible == (moving == "splats")
        browser.version += 1
        viewer.splat_layer.moved(browser)  # the camera just moved
        if moving == "splats":
            assert viewer.work() == 0.0 and not client.frames  # not rested: the splats show, nothing renders
            time.sleep(0.35)
        infos = []
        while not infos or not browser.done:
            assert viewer.work() > 0.0
            infos.append(browser.last)
        exact = render_camera(run, infos[-1].c2w, 32, 24, infos[-1].focal)
        np.testing.assert_array_equal(client.frames[-1][0], (np.clip(exact, 0, 1) * 255 + 0.5).astype(np.uint8))
        assert infos[-1].final and client.frames[-1][1] == "png" and not client.node.visible
        if moving == "splats":
            assert len(infos) == 1 and not infos[0].draft  # straight to the exact frame at the cap
        else:
            assert len(infos) >= 2 and all(i.draft for i in infos[:-1])  # drafts first, as without splats
    finally:
        viewer.close()


def test_view_names_the_bake_command_and_refuses_splats_with_two_runs(ckpt, tmp_path, capsys, monkeypatch):
    from enerf.viewer import app

    seen = {}

    class _Stop(Exception):
        pass

    def fake_open(ckpts, cfg, data_root, device, datadir=None, splats=None, field=False, announce=None):
        viewer = real_open(ckpts, cfg, data_root, device, worker=False, datadir=datadir, splats=splats, field=field,
                           announce=announce)
        seen["note"] = viewer.splat_layer.note
        viewer.close()
        raise _Stop

    real_open = app.open_view
    monkeypatch.setattr(app, "open_view", fake_open)
    with pytest.raises(_Stop):
        main(["view", "--ckpt", str(ckpt), "--port", "0"])
    assert seen["note"] == f"no splats: enerf export splats --ckpt {ckpt} --out {ckpt.parent.parent / 'splats.ply'}"
    assert capsys.readouterr().out == "enerf view: rendering the field (the run has no splats.ply)\n"
    monkeypatch.setattr(app, "open_view", real_open)
    assert main(["view", "--ckpt", str(ckpt), "--ckpt", str(ckpt), "--splats", str(tmp_path / "s.ply"),
                 "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "two-run view draws no splats" in err and err.count("\n") == 1
    assert main(["view", "--port", "0"]) == 2
    assert "--ckpt" in capsys.readouterr().err
    assert main(["view", "--splats", str(tmp_path / "missing.ply"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "missing.ply: no such file" in err and err.count("\n") == 1
