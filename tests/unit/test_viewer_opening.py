"""The viewer's first picture (``enerf.viewer.scene``): on a ring of cameras looking at a known point, the
frustums are smaller than half the spacing of neighbouring cameras (an analytic distance: the chord
``2 r sin(pi / n)``), and the opening camera stands a little behind and above the first camera and looks at
that point (numpy: its forward axis against the direction to the point); on a forward-facing row of
cameras it looks ahead at the mean depth bound."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from enerf.viewer.scene import camera_spacing, frustum_scale, initial_view, scene_centre


def _look_at(position: np.ndarray, target: np.ndarray, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """[3, 4] an OpenGL camera-to-world (columns right, up, back, centre) at ``position`` facing ``target``."""
    forward = (target - position) / np.linalg.norm(target - position)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    return np.stack([right, np.cross(right, forward), -forward, position], axis=1)


def _run(poses: np.ndarray, use_ndc: bool = False, bounds=(2.0, 6.0)) -> SimpleNamespace:
    """What the scene functions read of a LoadedRun: its scene's poses, split, bounds, intrinsics."""
    n = len(poses)
    scene = SimpleNamespace(poses=np.asarray(poses, np.float32), i_train=np.arange(0, n, 1)[np.arange(n) % 4 != 3],
                            i_test=np.arange(3, n, 4), bounds=np.array([bounds] * n, np.float32), use_ndc=use_ndc,
                            focal=50.0, height=60, width=80, aabb=None)
    return SimpleNamespace(scene=scene)


def _ring(n: int, radius: float, centre: np.ndarray, height: float = 0.5) -> np.ndarray:
    angles = 2 * math.pi * np.arange(n) / n
    return np.stack([_look_at(centre + np.array([radius * math.cos(a), radius * math.sin(a), height]), centre)
                     for a in angles])


@pytest.mark.parametrize("n, radius", [(12, 1.0), (60, 4.0), (200, 2.5)])
def test_frustums_are_smaller_than_half_the_ring_spacing(n, radius):
    centre = np.array([0.3, -0.2, 0.1])
    run = _run(_ring(n, radius, centre))
    chord = 2 * radius * math.sin(math.pi / n)  # distance between neighbouring centres on the ring
    assert camera_spacing(run.scene.poses[:, :3, 3]) == pytest.approx(chord, rel=1e-5)
    scale = frustum_scale(run)
    assert 0.1 * chord < scale < 0.5 * chord


def test_cameras_at_one_point_fall_back_to_the_depth_range():
    poses = np.stack([_look_at(np.zeros(3), np.array([math.cos(a), math.sin(a), 0.0])) for a in (0.0, 1.0, 2.0, 3.0)])
    run = _run(poses, bounds=(3.0, 9.0))
    assert camera_spacing(poses[:, :3, 3]) == 0.0
    assert frustum_scale(run) == pytest.approx(0.03)


def test_the_first_view_looks_at_the_ring_centre_from_behind_and_above_the_first_camera():
    centre = np.array([0.3, -0.2, 0.1])
    run = _run(_ring(24, 3.0, centre))
    np.testing.assert_allclose(scene_centre(run), centre, atol=1e-5)
    view = initial_view(run)
    first = run.scene.poses[int(run.scene.i_train[0])].astype(np.float64)
    c2w = view["c2w"]
    np.testing.assert_allclose(c2w[:, :3].T @ c2w[:, :3], np.eye(3), atol=1e-9)  # a rotation
    assert np.linalg.det(c2w[:, :3]) == pytest.approx(1.0)
    np.testing.assert_allclose(c2w[:, 3], view["position"])
    to_centre = (centre - view["position"]) / np.linalg.norm(centre - view["position"])
    assert float(-c2w[:, 2] @ to_centre) == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(view["look_at"], centre, atol=1e-5)
    # behind the camera (farther from the centre) and above it (along its up axis), by a little
    offset = view["position"] - first[:3, 3]
    dist = np.linalg.norm(first[:3, 3] - centre)
    assert np.linalg.norm(view["position"] - centre) > dist
    assert 0.0 < float(offset @ first[:3, 1]) < 0.2 * dist and np.linalg.norm(offset) < 0.2 * dist
    # no other camera's frustum lies in the near view: each is farther than the frustum size from the view
    # axis or behind the camera, except the first camera's (hidden by the viewer until the camera leaves)
    others = np.delete(run.scene.poses[:, :3, 3].astype(np.float64), int(run.scene.i_train[0]), axis=0)
    rel = others - view["position"]
    depth = rel @ -c2w[:, 2]
    lateral = np.linalg.norm(rel - depth[:, None] * -c2w[:, 2][None], axis=1)
    near = (depth > 0) & (depth < 0.5 * dist)
    assert np.all(lateral[near] > np.tan(view["fov"] / 2) * depth[near] + frustum_scale(run))


def test_a_forward_facing_row_looks_ahead_at_the_mean_depth():
    """Parallel cameras (NDC rays) look at no one point: the centre is the mean depth bound ahead."""
    poses = np.stack([_look_at(np.array([x, 0.0, 0.0]), np.array([x, 0.0, -5.0]), up=(0.0, 1.0, 0.0))
                      for x in np.linspace(-0.5, 0.5, 8)])
    run = _run(poses, use_ndc=True, bounds=(1.0, 5.0))
    np.testing.assert_allclose(scene_centre(run), [np.mean(poses[run.scene.i_train, 0, 3]), 0.0, -3.0], atol=1e-6)
    view = initial_view(run)
    to_centre = (view["look_at"] - view["position"]) / np.linalg.norm(view["look_at"] - view["position"])
    assert float(-view["c2w"][:, 2] @ to_centre) == pytest.approx(1.0, abs=1e-9)
    assert view["position"][2] > 0.0 and view["position"][1] > 0.0  # behind (+z) and above (+y)
