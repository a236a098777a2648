"""Camera paths and mesh boxes for captures around an object: the look-at point, the ellipse, the focus box."""

import numpy as np
import pytest

from enerf.cameras.paths import ellipse_path, focus_box, look_at_point
from enerf.data.scene import Scene
from enerf.errors import ConfigError
from enerf.export.nerf_mesh import default_bbox
from enerf.data.camera_paths import camera_path


def _aimed_at(target, n=30, seed=0, up=(0.0, 0.0, 1.0)):
    """Cameras [n, 3, 4] at random places on an arc around ``target``, each looking exactly at it
    (columns right, up, back, centre; built independently of enerf's viewmatrix)."""
    rng = np.random.default_rng(seed)
    up = np.asarray(up, float)
    poses = []
    for _ in range(n):
        az, el, r = rng.uniform(-2.0, 2.0), rng.uniform(-0.2, 0.6), rng.uniform(2.0, 4.0)
        centre = target + r * np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        back = (centre - target) / np.linalg.norm(centre - target)
        right = np.cross(up, back)
        right /= np.linalg.norm(right)
        poses.append(np.stack([right, np.cross(back, right), back, centre], 1))
    return np.stack(poses)


def _distance_to_axes(poses, point):
    """Distance of ``point`` from every camera's optical axis (the line through its centre along -back)."""
    d = -poses[:, :3, 2] / np.linalg.norm(poses[:, :3, 2], axis=1, keepdims=True)
    rel = point - poses[:, :3, 3]
    return np.linalg.norm(rel - (rel * d).sum(1, keepdims=True) * d, axis=1), (rel * d).sum(1)


def test_look_at_point_of_cameras_aimed_at_a_known_point():
    target = np.array([0.3, -1.2, 0.7])
    poses = _aimed_at(target)
    np.testing.assert_allclose(look_at_point(poses), target, atol=1e-6)


def test_look_at_point_is_the_least_squares_point():
    """With axes that miss each other, the answer minimises the summed squared distance (scipy)."""
    from scipy.optimize import minimize

    poses = _aimed_at(np.zeros(3), n=12, seed=1)
    rng = np.random.default_rng(5)
    poses[:, :3, 3] += rng.normal(scale=0.2, size=(12, 3))  # axes no longer meet
    p = look_at_point(poses)
    cost = lambda q: float((_distance_to_axes(poses, q)[0] ** 2).sum())  # noqa: E731
    best = minimize(cost, np.zeros(3), method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose(p, best, atol=1e-5)
    assert cost(p) <= cost(best) + 1e-9


def test_parallel_axes_have_no_look_at_point():
    poses = np.tile(np.eye(3, 4), (5, 1, 1))
    poses[:, 0, 3] = np.arange(5.0)  # a row of cameras all looking down -z
    with pytest.raises(ValueError, match="parallel"):
        look_at_point(poses)


def test_ellipse_frames_look_at_the_focus():
    target = np.array([1.0, 2.0, -0.5])
    poses = _aimed_at(target, seed=3)
    path = ellipse_path(poses, 40)
    assert path.shape == (40, 3, 4)
    dist, depth = _distance_to_axes(path, target)
    assert dist.max() < 1e-9 and (depth > 0).all()  # the target lies ahead on every frame's axis
    rot = path[:, :3, :3]
    np.testing.assert_allclose(rot @ rot.transpose(0, 2, 1), np.broadcast_to(np.eye(3), (40, 3, 3)), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(rot), 1.0, atol=1e-12)
    # The ellipse: its plane is orthogonal to the cameras' mean up axis, at their mean height.
    up = poses[:, :3, 1].sum(0)
    up /= np.linalg.norm(up)
    np.testing.assert_allclose((path[:, :3, 3] - target) @ up, ((poses[:, :3, 3] - target) @ up).mean(), atol=1e-9)
    # Radii: the 90th percentile of the centres' offsets along the principal axes in that plane.
    e0 = np.cross(up, [1.0, 0.0, 0.0])
    e0 /= np.linalg.norm(e0)
    plane = np.stack([e0, np.cross(up, e0)], 1)  # [3, 2] orthonormal basis of the plane
    planar = (poses[:, :3, 3] - target) @ plane
    vecs = np.linalg.eigh(planar.T @ planar)[1]
    expected = sorted(np.percentile(np.abs(planar @ vecs), 90, axis=0))
    got = (path[:, :3, 3] - target) @ plane @ vecs
    np.testing.assert_allclose(sorted(np.abs(got).max(0)), expected, rtol=1e-2)  # 40 frames: extremes to ~0.3 %
    assert np.all(path[:, :3, 1] @ up > 0)  # frames stay upright


def test_focus_box():
    target = np.array([0.5, 0.0, 0.2])
    poses = _aimed_at(target, seed=4)
    lo, hi = focus_box(poses, fraction=0.25)
    np.testing.assert_allclose((lo + hi) / 2, target, atol=1e-6)
    median = np.median(np.linalg.norm(poses[:, :3, 3] - target, axis=1))
    np.testing.assert_allclose(hi - lo, 0.5 * median, rtol=1e-6)


def _scene(poses, use_ndc=False):
    n = len(poses)
    return Scene(name="arc", images=np.zeros((n, 4, 4, 3), np.float32), poses=poses.astype(np.float32), height=4,
                 width=4, focal=4.0, bounds=np.tile([[0.5, 10.0]], (n, 1)).astype(np.float32), near=0.05, far=1000.0,
                 use_ndc=use_ndc, i_train=np.arange(0, n, 2), i_test=np.arange(1, n, 2),
                 render_poses=poses[:2].astype(np.float32), scene_to_world=np.eye(4), aabb=(-3, -3, -3, 3, 3, 3))


def test_render_path_ellipse_and_mesh_box_on_a_capture():
    target = np.array([0.2, 0.1, -0.3])
    scene = _scene(_aimed_at(target, seed=6))
    path = camera_path(scene, "ellipse", 24)
    assert path.shape == (24, 3, 4) and path.dtype == np.float32
    assert _distance_to_axes(path.astype(np.float64), target)[0].max() < 1e-5
    lo, hi = default_bbox(scene, unbounded=True)
    np.testing.assert_allclose((lo + hi) / 2, target, atol=1e-5)  # float32 poses
    lo, hi = default_bbox(scene)  # bounded fields keep the scene's box
    np.testing.assert_allclose(np.concatenate([lo, hi]), [-3, -3, -3, 3, 3, 3])


def test_ellipse_refused_on_forward_facing_scenes():
    poses = np.tile(np.eye(3, 4), (4, 1, 1))
    poses[:, 0, 3] = np.arange(4.0)
    with pytest.raises(ConfigError, match="NDC"):
        camera_path(_scene(poses, use_ndc=True), "ellipse", 10)
    with pytest.raises(ConfigError, match="parallel"):
        camera_path(_scene(poses), "ellipse", 10)
    with pytest.raises(ConfigError, match="--bbox"):
        default_bbox(_scene(poses), unbounded=True)


def test_far_extends_world_rays_only():
    from enerf.data.loaders import with_far

    scene = _scene(_aimed_at(np.zeros(3), n=4))
    assert with_far(scene, 0.0) is scene
    assert with_far(scene, 250.0).far == 250.0 and with_far(scene, 250.0).near == scene.near
    ndc = _scene(_aimed_at(np.zeros(3), n=4), use_ndc=True)
    assert with_far(ndc, 250.0).far == ndc.far  # NDC rays already reach infinity
    with pytest.raises(ConfigError, match="near"):
        with_far(scene, 0.01)
