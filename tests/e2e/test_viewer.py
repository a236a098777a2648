"""The viewer without a browser: camera conventions, render_camera against the evaluation path,
the two-run layouts (camera path files: test_camera_path_files.py), the training hook
leaving a run unchanged, ``enerf compare``'s view command, and bad input (one line, exit 2)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from enerf.cli import main
from enerf.loaded_run import LoadedRun, load_run
from enerf.render.images import render_rays_image
from enerf.train.evaluate import render_scene_view
from enerf.viewer.frames import DIFF_GAIN, render_frame
from enerf.viewer.render import focal_from_fov, fov_from_focal, render_camera
from enerf.viewer.scene import (c2w_from_viser, frustums, heldout_psnr, matrix_to_quat, quat_to_matrix,
                                viser_from_c2w)
from helpers import VIEWER_TINY, train_tiny

# ----------------------------------------------------------------------------- cameras


def test_quaternions_match_scipy():
    rng = np.random.default_rng(0)
    for q in rng.normal(size=(20, 4)):
        q /= np.linalg.norm(q)
        expected = Rotation.from_quat([q[1], q[2], q[3], q[0]]).as_matrix()  # scipy: scalar last
        np.testing.assert_allclose(quat_to_matrix(q), expected, atol=1e-12)
        back = matrix_to_quat(expected)
        np.testing.assert_allclose(np.abs(back @ q), 1.0, atol=1e-12)  # q and -q are one rotation


def test_viser_camera_looks_along_opencv_z():
    """A viser camera with identity rotation looks along +z with image-down +y: enerf's back
    axis is then -z and its up axis -y."""
    c2w = c2w_from_viser([1, 0, 0, 0], [1.0, 2.0, 3.0])
    np.testing.assert_allclose(c2w[:, 2], [0, 0, -1])
    np.testing.assert_allclose(c2w[:, 1], [0, -1, 0])
    np.testing.assert_allclose(c2w[:, 3], [1, 2, 3])
    rng = np.random.default_rng(1)
    for _ in range(10):
        rot = Rotation.from_rotvec(rng.normal(size=3)).as_matrix()
        pose = np.concatenate([rot, rng.normal(size=(3, 1))], axis=1)
        np.testing.assert_allclose(c2w_from_viser(*viser_from_c2w(pose)), pose, atol=1e-12)


def test_focal_and_fov_are_inverse():
    assert focal_from_fov(2 * np.arctan(0.5), 100) == pytest.approx(100.0)
    assert fov_from_focal(focal_from_fov(0.7, 37), 37) == pytest.approx(0.7)


# ----------------------------------------------------------------------------- rendering


def test_render_camera_is_the_evaluation_render(viewer_runs):
    """render_camera at a held-out pose with the scene's size and focal gives the image
    evaluation renders (enerf.train.evaluate.render_scene_view, the scene's own rays)."""
    run = load_run(viewer_runs["a"], task="nerf", data_root=Path("data"))
    scene = run.scene
    view = int(scene.i_test[0])
    ours = render_camera(run, scene.poses[view], scene.width, scene.height, scene.focal)
    theirs = render_scene_view(scene, view, run.fields, run.cfg.render, run.device, renderer=run.renderer)
    assert ours.shape == (scene.height, scene.width, 3)
    np.testing.assert_array_equal(ours, theirs)
    out = render_rays_image(scene.rays(view), run.fields, run.cfg.render, run.device, renderer=run.renderer)
    acc = render_camera(run, scene.poses[view], scene.width, scene.height, scene.focal, "accumulation")
    np.testing.assert_allclose(acc[..., 0], out["acc"].clamp(0, 1).numpy(), atol=1e-6)
    depth = render_camera(run, scene.poses[view], scene.width, scene.height, scene.focal, "depth")
    assert depth.shape == ours.shape and 0.0 <= depth.min() and depth.max() <= 1.0


def test_render_camera_restores_train_mode(viewer_runs):
    run = load_run(viewer_runs["a"], task="nerf", data_root=Path("data"))
    for m in run.fields.values():
        m.train()
    render_camera(run, run.scene.poses[0], 8, 6, run.scene.focal / 4)
    assert all(m.training for m in run.fields.values())


def test_two_run_layouts(viewer_runs):
    a = load_run(viewer_runs["a"], task="nerf", data_root=Path("data"))
    b = load_run(viewer_runs["b"], task="nerf", data_root=Path("data"))
    pose, w, h, f = a.scene.poses[1], 20, 12, a.scene.focal / 2
    img_a, img_b = render_camera(a, pose, w, h, f), render_camera(b, pose, w, h, f)
    assert np.abs(img_a - img_b).max() > 1e-3  # two different fields
    side = render_frame([a, b], pose, w, h, f, layout="side")
    np.testing.assert_array_equal(side[:, :10], render_camera(a, pose, 10, h, f))
    np.testing.assert_array_equal(side[:, 10:], render_camera(b, pose, 10, h, f))
    split = render_frame([a, b], pose, w, h, f, layout="split", split=0.25)
    np.testing.assert_array_equal(split[:, :4], img_a[:, :4])
    np.testing.assert_array_equal(split[:, 6:], img_b[:, 6:])
    assert (split[:, 4] == 1.0).all()  # the white line at the cut
    diff = render_frame([a, b], pose, w, h + 20, f, layout="difference")  # rows below the label strip
    full_a, full_b = render_camera(a, pose, w, h + 20, f), render_camera(b, pose, w, h + 20, f)
    np.testing.assert_allclose(diff[18:], np.clip(np.abs(full_a - full_b) * DIFF_GAIN, 0, 1)[18:], atol=1e-6)


# ----------------------------------------------------------------------------- draft frames


def test_draft_render_config_counts():
    """The draft renderer's settings: a fraction of the samples of each renderer kind, never
    fewer than 8 (the proposal passes' intervals too); the grid's step grows."""
    import dataclasses

    from enerf.config import RenderConfig
    from enerf.viewer.draft import draft_render_config

    base = RenderConfig()
    hier = draft_render_config(dataclasses.replace(base, sampler="hierarchical", n_samples=64, n_importance=32), 0.25)
    assert (hier.n_samples, hier.n_importance, hier.rgb_weight_threshold) == (16, 8, 1e-3)
    prop = draft_render_config(dataclasses.replace(base, sampler="proposal", n_samples=48, proposal_samples=(128,),
                                                   rgb_weight_threshold=1e-4), 0.25)
    assert (prop.n_samples, prop.proposal_samples) == (12, (32,))
    grid = draft_render_config(dataclasses.replace(base, sampler="torch_grid", render_step_size=0.01,
                                                   early_stop_eps=1e-4), 0.25)
    assert grid.render_step_size == pytest.approx(0.04) and grid.early_stop_eps == 1e-3
    few = draft_render_config(dataclasses.replace(base, sampler="hierarchical", n_samples=10, n_importance=0), 0.25)
    assert (few.n_samples, few.n_importance) == (8, 0)
    assert draft_render_config(base, 1.0) is base
    with pytest.raises(ValueError):
        draft_render_config(base, 0.0)


class _Camera:
    def __init__(self, c2w, fov, width, height):
        self.wxyz, self.position = viser_from_c2w(c2w)
        self.fov, self.image_width, self.image_height, self.aspect = fov, width, height, width / height


class _Client:
    """What ``Viewer.work`` uses of a browser: its camera and a scene that receives the frames."""

    def __init__(self, camera):
        self.client_id, self.camera, self.frames = 0, camera, []
        self.scene = self

    def set_background_image(self, image, format="jpeg", jpeg_quality=None):  # noqa: A002 (viser's name)
        self.frames.append((image, format))


@pytest.mark.parametrize("draft", [0.5, 1.0])
def test_draft_frames_then_the_exact_frame(viewer_runs, draft):
    """After a camera move the viewer sends drafts (rendered with the draft renderer: equal to
    render_camera(draft=...)), the last of them at the cap, then the exact frame at the cap, equal
    to render_camera's (``enerf render``'s) pixels; ``--draft 1``: every frame exact."""
    pytest.importorskip("viser", reason="the viewer extra (viser) is not installed: pip install -e '.[viewer]'")
    from enerf.config import ViewerConfig
    from enerf.viewer.server import Viewer
    from enerf.viewer.session import Browser

    run = load_run(viewer_runs["a"], task="nerf", data_root=Path("data"))
    import dataclasses

    from enerf.render import build_renderer

    # 16 samples, so that half of them is more than the draft's minimum of 8
    run.renderer = build_renderer(dataclasses.replace(run.cfg.render, n_samples=16), run.device)
    viewer = Viewer(ViewerConfig(port=0, max_width=32, min_width=8, draft=draft))
    try:
        viewer.attach([run], [{}])
        pose = run.scene.poses[int(run.scene.i_test[0])]
        client = _Client(_Camera(pose, fov_from_focal(run.scene.focal, run.scene.height), 64, 48))
        browser = Browser(client)
        viewer._browsers[0] = browser
        infos = []
        while not infos or not browser.done:
            viewer.work()
            infos.append(browser.last)
        assert infos[-1].final and not infos[-1].draft and infos[-1].width == 32
        assert all(i.draft == (draft < 1) for i in infos[:-1])
        c2w = infos[-1].c2w
        exact = render_camera(run, c2w, 32, 24, infos[-1].focal)
        np.testing.assert_array_equal(client.frames[-1][0], (np.clip(exact, 0, 1) * 255 + 0.5).astype(np.uint8))
        assert client.frames[-1][1] == "png"
        if draft < 1:
            assert infos[-2].draft and infos[-2].width == 32  # the draft at the cap came first
            drafted = render_camera(run, c2w, 32, 24, infos[-1].focal, draft=draft)
            np.testing.assert_array_equal(client.frames[-2][0], (np.clip(drafted, 0, 1) * 255 + 0.5).astype(np.uint8))
            assert np.abs(drafted - exact).max() > 0  # fewer samples: another picture
    finally:
        viewer.close()


# ----------------------------------------------------------------------------- panel text


def test_heldout_labels_carry_metrics_psnr(viewer_runs):
    run = load_run(viewer_runs["a"], task="nerf", data_root=Path("data"))
    metrics = json.loads((viewer_runs["a"].parent.parent / "metrics.json").read_text())
    psnr = heldout_psnr(metrics)
    assert set(psnr) == {int(v) for v in run.scene.i_test}
    drawn = frustums(run, metrics)
    assert len(drawn) == len(run.scene.i_train) + len(run.scene.i_test)
    for f in drawn:
        if f.split == "test":
            assert f.label == f"view {f.view}: {psnr[f.view]:.2f} dB"
        np.testing.assert_allclose(c2w_from_viser(f.wxyz, f.position), run.scene.poses[f.view], atol=1e-5)


def test_compare_prints_the_view_command(tmp_path):
    from enerf.compare.compare import view_command
    from enerf.compare.grid import GridCell
    from enerf.compare.tasks import ModeSpec

    def grid_run(mode: str, seed: int) -> GridCell:
        run = GridCell("demo", ModeSpec(mode, mode), seed, tmp_path, f"{mode}_{seed}", {})
        (run.config_run_folder / "checkpoints").mkdir(parents=True)
        (run.config_run_folder / "checkpoints" / "latest.pt").write_bytes(b"")
        return run

    grid = [grid_run(m, s) for m in ("none", "row") for s in (0, 1)]
    psnr = {("none", 0): 20.0, ("none", 1): 21.0, ("row", 0): 22.5, ("row", 1): 22.0}
    metrics = {("demo", m, s): {"psnr": v} for (m, s), v in psnr.items()}
    assert view_command(grid, metrics) == (f"enerf view --ckpt {tmp_path / 'none_1' / 'checkpoints' / 'latest.pt'} "
                                           f"--ckpt {tmp_path / 'row_0' / 'checkpoints' / 'latest.pt'}")
    assert view_command(grid[:2], metrics) is None  # no conditioned run


# ----------------------------------------------------------------------------- training


def test_rendering_between_steps_leaves_the_run_unchanged(viewer_runs, tmp_path):
    """The training hook's rendering (render_camera on the live run, every step, in train mode,
    a grid renderer included) leaves the final held-out PSNR and every weight bit-identical."""
    from enerf.loaded_run import LoadedRun
    from enerf.train.nerf import train_nerf

    rendered = []

    def hook(task, done):
        run = LoadedRun(task.cfg, done, task.fields, task.renderer, tmp_path, tmp_path / "x.pt", task.device, {}, task.scene)
        for m in task.fields.values():
            m.train()
        rendered.append(render_camera(run, task.scene.poses[0] + 0.01 * done, 12, 9, task.scene.focal / 3)
                        if done % 2 else render_frame([run, run], task.scene.poses[1], 12, 9, 5.0, "depth", "split"))
        assert all(m.training for m in task.fields.values())

    from enerf.cli.train import build_train_parser, run_config_from_args

    results = {}
    for renderer in ("hierarchical", "torch_grid"):
        for name, on_step in (("plain", None), ("watched", hook)):
            args = build_train_parser().parse_args(
                ["--datadir", str(viewer_runs["scene"]), "--basedir", str(tmp_path / renderer), "--expname", name,
                 "--iters", "6", "--raw_noise_std", "1.0", "--renderer", renderer, "--grid_update_every", "2",
                 "--grid_warmup", "2", "--device", "cpu", *VIEWER_TINY])  # bit-identity is a CPU promise: on an H100 the PSNRs differed in the 9th digit
            metrics = train_nerf(run_config_from_args(args), resume=False, progress=False, on_step=on_step)
            weights = torch.load(tmp_path / renderer / name / "checkpoints" / "latest.pt", weights_only=False)["fields"]
            results[renderer, name] = (metrics["psnr"], weights)
        assert results[renderer, "plain"][0] == results[renderer, "watched"][0]
        for net, state in results[renderer, "plain"][1].items():
            for key, value in state.items():
                assert torch.equal(value, results[renderer, "watched"][1][net][key]), (renderer, net, key)
    assert len(rendered) == 12


# ----------------------------------------------------------------------------- bad input


def test_view_bad_input_is_one_line(viewer_runs, tmp_path, capsys):
    pytest.importorskip("viser", reason="the viewer extra (viser) is not installed: pip install -e '.[viewer]'")
    assert main(["view", "--ckpt", str(tmp_path / "missing.pt"), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.pt" in err
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    assert main(["view", "--ckpt", str(foreign), "--port", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["view", "--ckpt", str(viewer_runs["a"]), "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"port {port}" in err and "in use" in err and err.count("\n") == 1
    from enerf.synthetic.scene import make_synthetic_scene

    other = make_synthetic_scene(tmp_path / "other", n_views=6, width=24, height=20, seed=3)
    c = train_tiny(other, tmp_path / "runs", "other", 1)
    capsys.readouterr()
    assert main(["view", "--ckpt", str(viewer_runs["a"]), "--ckpt", str(c), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "different scenes" in err and err.count("\n") == 1
    assert main(["view", "--ckpt", str(viewer_runs["a"]), "--ckpt", str(viewer_runs["b"]), "--ckpt", str(c), "--port", "0"]) == 2


def test_view_without_viser_names_the_extra(viewer_runs, monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "viser", None)  # import viser raises ImportError
    assert main(["view", "--ckpt", str(viewer_runs["a"])]) == 2
    err = capsys.readouterr().err
    assert '.[viewer]' in err and err.count("\n") == 1
    assert main(["train", "--viewer", "--iters", "1"]) == 2
    assert '.[viewer]' in capsys.readouterr().err


def _blender_scene(root: Path, size: int = 16) -> Path:
    """A tiny Blender-layout scene: cameras on a circle of radius 4 at height 1.5, looking at the origin."""
    rng = np.random.default_rng(0)
    for split, n in (("train", 4), ("val", 1), ("test", 2)):
        (root / split).mkdir(parents=True, exist_ok=True)
        frames = []
        for k in range(n):
            iio.imwrite(root / split / f"r_{k}.png", rng.integers(0, 256, size=(size, size, 4), dtype=np.uint8))
            angle = 2 * np.pi * (k + 0.5 * (split == "test")) / n
            position = np.array([4 * np.cos(angle), 4 * np.sin(angle), 1.5])
            back = position / np.linalg.norm(position)
            right = np.cross([0.0, 0.0, 1.0], back)
            right /= np.linalg.norm(right)
            c2w = np.eye(4)
            c2w[:3, :4] = np.stack([right, np.cross(back, right), back, position], 1)
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": c2w.tolist()})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": 0.7, "frames": frames}))
    return root


def test_blender_scene_world_rays_and_grid_renderer(tmp_path):
    """A Blender scene (world rays, content box, torch_grid with its trained grid): render_camera at a
    held-out camera is the evaluation render, and the first view looks at the object (the origin)."""
    from enerf.viewer.scene import initial_view

    scene = _blender_scene(tmp_path / "lego_like")
    assert main(["train", "--datadir", str(scene), "--basedir", str(tmp_path / "runs"), "--expname", "b",
                 "--iters", "3", "--white_bkgd", "--renderer", "torch_grid", "--grid_resolution", "16",
                 "--render_step_size", "0.05", *VIEWER_TINY]) == 0
    run = load_run(tmp_path / "runs" / "b" / "checkpoints" / "latest.pt", Path("data"), task="nerf")
    s = run.scene
    assert not s.use_ndc and s.aabb is not None and run.renderer is not None and run.renderer.name == "torch_grid"
    view = int(s.i_test[0])
    np.testing.assert_array_equal(render_camera(run, s.poses[view], s.width, s.height, s.focal),
                                  render_scene_view(s, view, run.fields, run.cfg.render, run.device, run.renderer))
    start = initial_view(run)
    assert np.linalg.norm(start["look_at"]) < 1e-4  # the training camera looks at the origin from distance 4.27
    assert len(frustums(run, {})) == 6
