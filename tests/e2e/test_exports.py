"""``enerf export depth|pointcloud`` and ``enerf mesh --method tsdf`` on an analytic sphere, checked
against ray-sphere intersections computed with numpy; portable checkpoints end to end."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch
import trimesh

from enerf.cli import main
from enerf.config import DepthExportConfig, MeshConfig, PointCloudConfig, RenderConfig, RunConfig
from enerf.data.nerfstudio import load_nerfstudio
from enerf.cameras.rays import ndc_to_world
from enerf.data.scene import Scene
from enerf.export.depth import export_depth, quantize_depth
from enerf.export.nerf_mesh import mesh_from_run
from enerf.export.pointcloud import even_subsample, export_pointcloud
from enerf.fields import AnalyticField
from enerf.loaded_run import LoadedRun
from enerf.render import build_renderer

RADIUS = 0.5
H, W, FOCAL = 18, 24, 22.0
# scene -> world: scale 2, a rotation about z, a shift (the capture's frame)
_ANGLE = 0.3
TO_WORLD = np.array([[2 * np.cos(_ANGLE), -2 * np.sin(_ANGLE), 0, 1.0], [2 * np.sin(_ANGLE), 2 * np.cos(_ANGLE), 0, -2.0],
                     [0, 0, 2.0, 0.5], [0, 0, 0, 1.0]])


def _look_at(position: np.ndarray, target: np.ndarray) -> np.ndarray:
    back = (position - target) / np.linalg.norm(position - target)
    up0 = np.array([0.0, 0.0, 1.0]) if abs(back[2]) < 0.9 else np.array([0.0, 1.0, 0.0])
    right = np.cross(up0, back)
    right /= np.linalg.norm(right)
    return np.stack([right, np.cross(back, right), back, position], 1).astype(np.float32)


class _Field(AnalyticField):
    training = False  # as an nn.Module's (render_rays_image puts fields in eval mode and back)

    def train(self, mode: bool = True):
        return self

    def eval(self):
        return self


def _sphere_field(centre, to_field=None) -> AnalyticField:
    """A steep, smooth ball of radius RADIUS around ``centre`` (scene space); ``to_field``: the
    field reads other coordinates (NDC), mapped back to scene space first."""
    c = torch.tensor(centre, dtype=torch.float32)

    def sigma(x):
        p = to_field(x) if to_field is not None else x
        return 2000.0 * torch.sigmoid((RADIUS - (p - c).norm(dim=-1)) / 0.0005)

    def rgb(x, d):
        return torch.sigmoid(x).expand(*x.shape[:-1], 3)

    return _Field(sigma, rgb)


def _run(poses: np.ndarray, field: AnalyticField, use_ndc: bool = False, near: float = 0.5, far: float = 4.0) -> LoadedRun:
    n = len(poses)
    scene = Scene("sphere", np.zeros((n, H, W, 3), np.float32), poses, H, W, FOCAL, np.tile([near, far], (n, 1)).astype(np.float32),
                  near, far, use_ndc, np.arange(0, n - 2), np.arange(n - 2, n), poses[:2], TO_WORLD)
    cfg = RunConfig(render=RenderConfig(n_samples=96, n_importance=96, perturb=False, sampler="hierarchical",
                                        chunk=4096))
    renderer = build_renderer(cfg.render, torch.device("cpu"))
    return LoadedRun(cfg, 0, {"coarse": field, "fine": field}, renderer, Path("."), Path("x.pt"), torch.device("cpu"), {},
                     scene)


def _orbit(n: int, distance: float = 2.0) -> np.ndarray:
    angles = np.linspace(0, 2 * np.pi, n, endpoint=False)
    heights = np.where(np.arange(n) % 2 == 0, 0.8, -0.8)
    return np.stack([_look_at(np.array([distance * np.cos(a), distance * np.sin(a), h]), np.zeros(3))
                     for a, h in zip(angles, heights)])


def _pixel_dirs(c2w: np.ndarray) -> np.ndarray:
    """[H, W, 3] world directions through the pixel centres (camera z = -1), numpy."""
    i, j = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    cam = np.stack([(i - W / 2) / FOCAL, -(j - H / 2) / FOCAL, -np.ones_like(i)], -1)
    return cam @ c2w[:3, :3].T.astype(np.float64)


def _sphere_distance(origin: np.ndarray, dirs: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Distance along unit rays to the sphere (nan: a miss)."""
    u = dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)
    oc = origin - centre
    b = u @ oc
    disc = b * b - (oc @ oc - RADIUS**2)
    return np.where(disc > 0, -b - np.sqrt(np.maximum(disc, 0)), np.nan)


@pytest.fixture(scope="module")
def sphere_run() -> LoadedRun:
    return _run(_orbit(10), _sphere_field(np.zeros(3)))


@pytest.fixture(scope="module")
def depth_dir(sphere_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("depth") / "out"
    export_depth(sphere_run, out, DepthExportConfig(cameras="train", frame="world"), progress=False)
    return out


def test_exported_depth_is_the_ray_sphere_intersection(sphere_run, depth_dir):
    scene = sphere_run.scene
    for view in scene.i_train:
        c2w = scene.poses[view].astype(np.float64)
        dirs = _pixel_dirs(c2w)
        expected = 2.0 * _sphere_distance(c2w[:, 3], dirs, np.zeros(3))  # world units: scale 2
        ray = np.load(depth_dir / f"train_{view:03d}_depth.npy")
        z = np.load(depth_dir / f"train_{view:03d}_z.npy")
        inner = expected < np.nanmin(expected) + 0.5  # away from the rim
        hit = ~np.isnan(expected)
        error = np.abs(ray[hit & inner] - expected[hit & inner])
        assert error.max() < 0.025 and np.median(error) < 0.004  # depth about 3.5, sample spacing 0.07
        assert (ray[~hit] == 0).mean() > 0.95  # the background has no surface
        cos = 1.0 / np.linalg.norm(dirs, axis=-1)  # camera z component is -1
        assert np.allclose(z, ray * cos, atol=1e-4)


def test_depth_png_times_scale_round_trips(depth_dir):
    for png in sorted(depth_dir.glob("*_z.png")) + sorted(depth_dir.glob("*_depth.png")):
        codes = iio.imread(png)
        assert codes.dtype == np.uint16
        scale = json.loads(png.with_suffix(".json").read_text())["scale"]
        exact = np.load(png.with_suffix(".npy"))
        assert np.abs(codes * scale - exact).max() <= scale / 2 + 1e-7
        assert np.array_equal(codes == 0, exact == 0)
    codes, scale = quantize_depth(np.array([[0.0, 3.0], [1.5, 1e-9]]))
    assert codes.tolist() == [[0, 65535], [32768, 1]] and scale == pytest.approx(3.0 / 65535)


def test_exported_normals_are_radial(sphere_run, depth_dir):
    rot = TO_WORLD[:3, :3] / 2.0
    centre_world = TO_WORLD[:3, 3]
    for view in sphere_run.scene.i_train[:3]:
        normals = np.load(depth_dir / f"train_{view:03d}_normal.npy")
        ray = np.load(depth_dir / f"train_{view:03d}_depth.npy")
        c2w = sphere_run.scene.poses[view].astype(np.float64)
        dirs = _pixel_dirs(c2w)
        unit = dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)
        points_world = (c2w[:, 3] + unit * (ray / 2.0)[..., None]) @ TO_WORLD[:3, :3].T + centre_world
        radial = points_world - centre_world
        radial /= np.linalg.norm(radial, axis=-1, keepdims=True)
        hit = ray > 0
        dot = np.sum(normals[hit] * radial[hit], -1)  # depth-map normals: pixels span 20 degrees of the sphere
        assert np.median(dot) > 0.995 and np.mean(dot > 0.95) > 0.9
        assert np.allclose(np.linalg.norm(normals[hit] @ rot, axis=-1), 1.0, atol=1e-4)


def test_transforms_json_loads_back_as_the_exported_cameras(sphere_run, depth_dir):
    meta = json.loads((depth_dir / "transforms.json").read_text())
    assert [f["file_path"] for f in meta["frames"]] == [f"train_{v:03d}.png" for v in sphere_run.scene.i_train]
    scene = load_nerfstudio(depth_dir, factor=1, llffhold=0)
    back = np.einsum("ij,njk->nik", scene.scene_to_world[:3, :3], scene.poses[:, :3, :4].astype(np.float64))
    back[:, :, 3] += scene.scene_to_world[:3, 3]
    back[:, :, :3] /= np.linalg.norm(back[:, :, :3], axis=1, keepdims=True)
    for k, view in enumerate(sphere_run.scene.i_train):
        c2w = sphere_run.scene.poses[view].astype(np.float64)
        expected_rot = TO_WORLD[:3, :3] @ c2w[:, :3] / 2.0
        expected_t = TO_WORLD[:3, :3] @ c2w[:, 3] + TO_WORLD[:3, 3]
        assert np.allclose(back[k][:, :3], expected_rot, atol=1e-4)
        assert np.allclose(back[k][:, 3], expected_t, atol=1e-4)
    assert scene.focal == pytest.approx(FOCAL, rel=1e-5) and (scene.width, scene.height) == (W, H)


def test_ndc_depth_converts_back_to_metric():
    """A forward-facing scene with NDC rays: the field lives in NDC, the export in metric units."""
    centre = np.array([0.1, 0.0, -3.0])
    poses = np.stack([_look_at(np.array([x, y, 0.0]), np.array([x, y, -1.0])) for x, y in
                      [(0, 0), (0.2, 0), (0, 0.2), (-0.2, 0.1)]])

    def to_scene(q):
        return ndc_to_world(q, H, W, FOCAL, 1.0)

    run = _run(poses, _sphere_field(centre, to_scene), use_ndc=True, near=1.0, far=10.0)
    from enerf.data.camera_paths import select_cameras
    from enerf.views import render_views

    for view in render_views(run, select_cameras(run.scene, "test", 1), normals=True, progress=False):
        c2w = poses[int(view.name.split("_")[1])].astype(np.float64)
        dirs = _pixel_dirs(c2w)
        expected = _sphere_distance(c2w[:, 3], dirs, centre)
        hit = ~np.isnan(expected)
        inner = expected < np.nanmin(expected) + 0.3
        error = np.abs(view.ray_depth[hit & inner] - expected[hit & inner])
        assert error.max() < 0.05 and np.median(error) < 0.003  # depth about 2.7
        radial = view.points[hit & inner] - centre
        assert np.median(np.abs(np.linalg.norm(radial, axis=-1) - RADIUS)) < 0.003
        unit = radial / np.linalg.norm(radial, axis=-1, keepdims=True)
        assert np.median(np.sum(view.normals[hit & inner] * unit, -1)) > 0.99


def test_pointcloud_lies_on_the_sphere_with_radial_normals(sphere_run, tmp_path):
    out = tmp_path / "cloud.ply"
    info = export_pointcloud(sphere_run, out, PointCloudConfig(points=500, bbox=(-1, -1, -1, 1, 1, 1)), progress=False)
    cloud = trimesh.load(out)
    raw = cloud.metadata["_ply_raw"]["vertex"]["data"]
    points = np.asarray(cloud.vertices, np.float64)
    normals = np.stack([raw["nx"], raw["ny"], raw["nz"]], -1)
    assert len(points) == info["points"] == 500 < info["candidates"]
    radial = points - TO_WORLD[:3, 3]
    dist = np.linalg.norm(radial, axis=-1)
    assert np.abs(dist - 2.0 * RADIUS).max() < 0.03  # world units: scale 2
    dot = np.sum(normals * radial / dist[:, None], -1)
    assert np.median(dot) > 0.995 and np.mean(dot > 0.95) > 0.9
    # a box that cuts the sphere in half keeps only that half
    half = tmp_path / "half.ply"
    export_pointcloud(sphere_run, half, PointCloudConfig(cameras="test", frame="scene", bbox=(-1, -1, 0, 1, 1, 1)), progress=False)
    assert np.asarray(trimesh.load(half).vertices)[:, 2].min() >= 0.0


def test_even_subsample():
    assert even_subsample(5, 10).tolist() == [0, 1, 2, 3, 4]
    index = even_subsample(1000, 10)
    assert index.tolist() == list(range(0, 1000, 100))


def test_tsdf_mesh_lies_within_a_voxel_of_the_sphere(sphere_run):
    cfg = MeshConfig(method="tsdf", resolution=40, bbox=(-1, -1, -1, 1, 1, 1), frame="scene")
    mesh = mesh_from_run(sphere_run, cfg)
    voxel = 2.0 / 40
    dist = np.linalg.norm(mesh.vertices, axis=-1)
    assert len(mesh.faces) > 500
    assert np.mean(np.abs(dist - RADIUS) < voxel) > 0.99 and np.abs(dist - RADIUS).max() < 2 * voxel
    assert np.median(np.abs(dist - RADIUS)) < voxel / 4
    # outward winding: face normals point away from the centre
    centres = mesh.triangles_center
    assert np.mean(np.sum(mesh.face_normals * centres, -1) > 0) > 0.99
    world = mesh_from_run(sphere_run, MeshConfig(method="tsdf", resolution=40, bbox=(-1, -1, -1, 1, 1, 1)))
    assert np.allclose(world.vertices, mesh.vertices @ TO_WORLD[:3, :3].T + TO_WORLD[:3, 3], atol=1e-9)


def test_tsdf_fuses_only_the_cameras_asked_for(sphere_run):
    """--cameras test: the two held-out views' depth alone gives the part of the sphere they see
    (every vertex faces one of their camera centres), still within a voxel of the sphere, and less
    of it than the training views give."""
    voxel = 2.0 / 40
    box = dict(method="tsdf", resolution=40, bbox=(-1, -1, -1, 1, 1, 1), frame="scene")
    seen = mesh_from_run(sphere_run, MeshConfig(cameras="test", **box))
    everything = mesh_from_run(sphere_run, MeshConfig(**box))
    assert 100 < len(seen.faces) < 0.8 * len(everything.faces)
    dist = np.linalg.norm(seen.vertices, axis=-1)
    assert np.abs(dist - RADIUS).max() < 2 * voxel
    centres = sphere_run.scene.poses[sphere_run.scene.i_test][:, :3, 3]  # [2, 3]
    to_camera = centres[None] - seen.vertices[:, None]  # [V, 2, 3]
    cos = np.sum(to_camera * (seen.vertices / dist[:, None])[:, None], -1) / np.linalg.norm(to_camera, axis=-1)
    assert np.mean(cos.max(1) > -0.1) > 0.99


# ----------------------------------------------------------------------------- portable checkpoints

TINY = ["--preset", "none", "--factor", "1", "--llffhold", "4", "--netdepth", "2", "--netwidth", "16", "--view_width", "8",
        "--multires", "2", "--multires_views", "1", "--N_samples", "8", "--N_rand", "64", "--no_lpips", "--quiet",
        "--device", "cpu", "--kappa_every", "0"]


def test_a_checkpoint_renders_meshes_and_exports_without_its_scene_folder(scene_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scene = tmp_path / "scene"
    shutil.copytree(scene_dir, scene)
    assert main(["train", "--datadir", "scene", "--basedir", "runs", "--expname", "r", "--iters", "3", *TINY]) == 0
    ckpt = "runs/r/checkpoints/latest.pt"
    scene.rename(tmp_path / "moved")
    capsys.readouterr()
    video = ["--ckpt", ckpt, "--frames", "2", "--quiet", "--out", "video"]
    assert main(["render", *video]) == 0
    said = capsys.readouterr().out
    assert main(["export", "video", *video]) == 0  # the one door: enerf render is its other name
    assert capsys.readouterr().out == said and "wrote 2 frames" in said
    assert main(["export", "depth", "--ckpt", ckpt, "--out", "depth", "--quiet"]) == 0
    assert main(["export", "pointcloud", "--ckpt", ckpt, "--out", "cloud.ply", "--min_acc", "0.01", "--quiet"]) == 0
    mesh = ["--ckpt", ckpt, "--method", "tsdf", "--resolution", "16", "--out", "m.ply", "--quiet"]
    capsys.readouterr()
    assert main(["mesh", *mesh]) == 0
    said, written = capsys.readouterr().out, (tmp_path / "m.ply").read_bytes()
    assert main(["export", "mesh", *mesh]) == 0  # enerf mesh is the same export
    assert capsys.readouterr().out == said and (tmp_path / "m.ply").read_bytes() == written
    assert len(list((tmp_path / "depth").glob("test_*_z.npy"))) == 2
    assert len(trimesh.load(tmp_path / "cloud.ply").vertices) > 0
    capsys.readouterr()
    assert main(["eval", "--ckpt", ckpt, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs the scene's images" in err and "--datadir" in err
    assert main(["eval", "--ckpt", ckpt, "--quiet", "--datadir", "moved"]) == 0
    metrics = json.loads((tmp_path / "runs" / "r" / "metrics.json").read_text())
    assert metrics["steps"] == 3 and np.isfinite(metrics["psnr"])
    # a checkpoint written before the cameras were saved still loads from its folder, and names --datadir without it
    payload = torch.load(ckpt, weights_only=False)
    del payload["extra"]["cameras"]
    old = tmp_path / "old" / "checkpoints" / "latest.pt"
    old.parent.mkdir(parents=True)
    torch.save(payload, old)
    capsys.readouterr()
    assert main(["render", "--ckpt", str(old), "--frames", "2", "--quiet", "--out", "video_old"]) == 2
    assert "--datadir" in capsys.readouterr().err
    assert main(["render", "--ckpt", str(old), "--frames", "2", "--quiet", "--out", "video_old", "--datadir", "moved"]) == 0


def test_export_refuses_a_read_only_folder(tmp_path, monkeypatch, capsys):
    import os

    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == tmp_path else real(path, mode))
    assert main(["export", "pointcloud", "--ckpt", str(tmp_path / "x.pt"), "--out", str(tmp_path / "p.ply")]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot write in" in err and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_tsdf_mesh_simplified_and_textured_from_the_field(sphere_run):
    """--method tsdf --faces N --texture: at most N faces, still on the sphere, and the texture read at
    every vertex's UV (nearest texel) is the field's colour there (sigmoid of the scene position)."""
    pytest.importorskip("xatlas")
    cfg = MeshConfig(method="tsdf", resolution=40, bbox=(-1, -1, -1, 1, 1, 1), frame="scene", faces=400, texture=True,
                     texture_size=128)
    mesh = mesh_from_run(sphere_run, cfg)
    assert len(mesh.faces) <= 400
    assert np.abs(np.linalg.norm(mesh.vertices, axis=-1) - RADIUS).max() < 2 * 2.0 / 40
    image = np.asarray(mesh.visual.material.baseColorTexture.convert("RGB"), np.float64) / 255.0
    uv = np.asarray(mesh.visual.uv)
    col = np.clip((uv[:, 0] * 128).astype(int), 0, 127)
    row = np.clip(((1.0 - uv[:, 1]) * 128).astype(int), 0, 127)
    expected = 1.0 / (1.0 + np.exp(-np.asarray(mesh.vertices)))
    assert np.abs(image[row, col] - expected).mean() < 0.01


def test_spread_is_small_on_a_surface_and_the_exponentials_in_fog(sphere_run):
    """``ViewDepth.spread``: on the sphere the ray's weight sits at one depth; in uniform fog of density s the
    weight along t decays as l exp(-l (t - near)), l = s |d|, so the expected and median depths are analytic."""
    from enerf.data.camera_paths import select_cameras
    from enerf.views import render_views

    view = next(render_views(sphere_run, select_cameras(sphere_run.scene, "test", 1), normals=False, progress=False))
    assert view.spread[view.acc > 0.99].max() < 0.02
    density, near, far = 2.0, 0.5, 4.0
    fog = _Field(lambda p: torch.full(p.shape[:-1], density), lambda p, v: torch.full(p.shape, 0.5))
    run = _run(_orbit(4), fog, near=near, far=far)
    view = next(render_views(run, select_cameras(run.scene, "test", 1), normals=False, progress=False))
    rate = density * np.linalg.norm(_pixel_dirs(run.scene.poses[int(view.name.split("_")[1])]), axis=-1)  # [H, W]
    tail = np.exp(-rate * (far - near))
    mean = near + 1.0 / rate - (far - near) * tail / (1.0 - tail)
    median = near - np.log(1.0 - 0.5 * (1.0 - tail)) / rate
    expected = np.abs(mean - median) / median
    assert expected.min() > 0.15  # fog, far from a surface's 0.02
    assert np.abs(view.spread - expected).max() < 0.03
