"""The bake's pieces against hand-made geometry: the free-space test of depth-map fusion, the pooling of
candidates per surface cell, the discs' orientation."""

from __future__ import annotations

import numpy as np
import torch

from enerf.config import SplatConfig
from enerf.splats.bake import _disc_quats, free_space_violations, merge_candidates, splats_from_candidates
from enerf.splats.gaussians import quat_to_rotmat


def _camera_at(z: float) -> np.ndarray:
    """[3, 4] a camera on the z axis at height z looking down -z (OpenGL axes), columns right, up, back, t."""
    pose = np.eye(4)[:3]
    pose[:, 3] = [0.0, 0.0, z]
    return pose


def test_free_space_counts_the_views_that_see_through_a_point():
    # two cameras looking down at the plane z = 0 from z = 2 and z = 3: each sees the plane everywhere
    poses = np.stack([_camera_at(2.0), _camera_at(3.0)])
    depths = np.stack([np.full((20, 20), 2.0), np.full((20, 20), 3.0)])
    points = np.array([[0.0, 0.0, 0.0],    # on the plane: no view sees through it
                       [0.0, 0.0, 1.0],    # in the air between both cameras and the plane: both see through it
                       [0.1, 0.0, -1.0],   # behind the plane: hidden, never seen through
                       [0.0, 0.0, 2.5]])   # behind camera 1, in front of camera 2: only camera 2 sees through it
    assert free_space_violations(points, poses, depths, focal=10.0).tolist() == [0, 2, 0, 1]


def test_candidates_pool_per_cell_and_average():
    # 3 candidates in one cell (footprint 0.25 x downscale 4 = cell 1.0), 1 in another
    data = {"points": np.array([[0.1, 0.1, 0.1], [0.3, 0.2, 0.9], [0.8, 0.7, 0.5], [1.5, 0.2, 0.2]], np.float32),
            "rgb": np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], np.float32),
            "normals": np.array([[0, 0, 1]] * 4, np.float32),
            "footprint": np.full(4, 0.25, np.float32)}
    cells = merge_candidates(data, downscale=4)
    order = np.argsort(cells["points"][:, 0])
    np.testing.assert_allclose(cells["points"][order], [data["points"][:3].mean(0), data["points"][3]], atol=1e-6)
    np.testing.assert_allclose(cells["rgb"][order][0], [1 / 3, 1 / 3, 1 / 3], atol=1e-6)
    np.testing.assert_allclose(cells["size"], [1.0, 1.0])
    splats = splats_from_candidates(data, SplatConfig(init_downscale=4, init_opacity=0.5, init_flatness=0.2))
    np.testing.assert_allclose(torch.exp(splats.log_scales).numpy(), [[0.5, 0.5, 0.1]] * 2, rtol=1e-5)
    np.testing.assert_allclose(torch.sigmoid(splats.opacity_logits).numpy(), [0.5, 0.5], rtol=1e-5)


def test_discs_face_their_normals():
    rng = np.random.default_rng(0)
    normals = rng.normal(size=(50, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    normals[0] = [0.0, 0.0, -1.0]  # the opposite of the disc's own axis
    rot = quat_to_rotmat(torch.as_tensor(_disc_quats(normals))).numpy()
    np.testing.assert_allclose(rot[:, :, 2], normals, atol=1e-5)  # the thin axis (z) onto the normal
