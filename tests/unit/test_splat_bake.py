"""The bake's pieces against hand-made geometry: the free-space test of depth-map fusion, the pooling of
candidates per surface cell, the discs' orientation, the fit's background."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from enerf.config import SplatConfig
from enerf.splats import bake
from enerf.splats.bake import _disc_quats, fit_splats, free_space_violations, merge_candidates, splats_from_candidates
from enerf.splats.gaussians import quat_to_rotmat
from enerf.splats.rasterize import rasterize
from enerf.splats.teacher import fit_loss, ssim_map, surface_mask, taught_target, teacher_poses, turned_poses
from helpers import camera_on_z, faint_splats, plain_photo_run


def test_free_space_counts_the_views_that_see_through_a_point():
    # two cameras looking down at the plane z = 0 from z = 2 and z = 3: each sees the plane everywhere
    poses = np.stack([camera_on_z(2.0), camera_on_z(3.0)])
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


def test_a_hazy_cell_starts_a_faint_gaussian():
    # two cells: one where the field is opaque (acc 1), one hazy (mean acc of its candidates 0.2)
    data = {"points": np.array([[0.1, 0.1, 0.1], [1.5, 0.2, 0.2], [1.6, 0.3, 0.3]], np.float32),
            "rgb": np.full((3, 3), 0.5, np.float32), "normals": np.zeros((3, 3), np.float32),
            "footprint": np.full(3, 0.25, np.float32), "acc": np.array([1.0, 0.1, 0.3], np.float32)}
    splats = splats_from_candidates(data, SplatConfig(init_downscale=4, init_opacity=0.6))
    order = np.argsort(splats.means[:, 0].numpy())
    np.testing.assert_allclose(torch.sigmoid(splats.opacity_logits).numpy()[order], [0.6, 0.6 * 0.2], rtol=1e-5)


def test_teacher_cameras_lie_between_neighbours_or_on_a_cameras_axis():
    # six cameras on a ring of radius 3 looking at the origin (OpenGL: column 2 points away from it)
    poses = []
    for k in range(6):
        a = 2 * np.pi * k / 6
        back = np.array([np.cos(a), np.sin(a), 0.0])
        right = np.cross([0.0, 0.0, 1.0], back)
        poses.append(np.concatenate([np.stack([right, np.cross(back, right), back], 1), 3 * back[:, None]], 1))
    poses = np.stack(poses)
    new = teacher_poses(poses, np.full(6, 3.0), count=10, push=0.2, seed=1)
    for k, pose in enumerate(new):
        np.testing.assert_allclose(pose[:, :3].T @ pose[:, :3], np.eye(3), atol=1e-5)  # a rotation
        if k % 2 == 0:  # on the chord between two neighbours at t in [0.25, 0.75], the axis turned by t of their angle
            found = []
            for i in range(6):
                j = (i + 1) % 6
                ci, cj = poses[i][:, 3], poses[j][:, 3]
                t = float(np.dot(pose[:, 3] - ci, cj - ci) / np.dot(cj - ci, cj - ci))
                if np.linalg.norm((1 - t) * ci + t * cj - pose[:, 3]) < 1e-5 and 0.25 - 1e-6 <= t <= 0.75 + 1e-6:
                    angle = 2 * np.pi * (i + t) / 6
                    found.append(np.allclose(pose[:, 2], [np.cos(angle), np.sin(angle), 0.0], atol=1e-5))
            assert found == [True]
        else:  # a ring camera moved along its axis by at most 0.2 x its depth
            radius = np.linalg.norm(pose[:, 3])
            assert 3 - 0.6 - 1e-5 <= radius <= 3 + 0.6 + 1e-5
            np.testing.assert_allclose(pose[:, 2], pose[:, 3] / radius, atol=1e-5)
            assert np.min(np.linalg.norm(poses[:, :, 2] - pose[:, 2], axis=1)) < 1e-5  # one of the ring's axes


def test_turned_cameras_keep_their_centre_and_look_that_far_up_down_left_and_right():
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(3)
    rot = Rotation.random(5, random_state=4).as_matrix()  # [5, 3, 3] columns: right, up, back (OpenGL)
    poses = np.concatenate([rot, rng.normal(size=(5, 3, 1))], -1)
    turned = turned_poses(poses, 25.0)
    assert turned.shape == (20, 3, 4)
    for i, pose in enumerate(poses):
        right, up, back = pose[:, 0], pose[:, 1], pose[:, 2]
        for k, (axis, sign) in enumerate([(right, 1), (right, -1), (up, 1), (up, -1)]):  # up, down, left, right
            new = turned[4 * i + k]
            np.testing.assert_allclose(new[:, 3], pose[:, 3], atol=1e-6)  # the same centre
            # scipy: the pose turned about its own right (or up) axis, in the world frame
            expected = Rotation.from_rotvec(sign * math.radians(25.0) * axis).as_matrix() @ pose[:, :3]
            np.testing.assert_allclose(new[:, :3], expected, atol=1e-5)
            look = -new[:, 2]
            assert math.degrees(math.acos(np.clip(np.dot(look, -back), -1, 1))) == pytest.approx(25.0, abs=1e-3)
        looks = -turned[4 * i:4 * i + 4, :, 2]  # up, down, left, right: toward +up, -up, -right, +right
        assert np.dot(looks[0], up) > 0.4 and np.dot(looks[1], up) < -0.4
        assert np.dot(looks[2], right) < -0.4 and np.dot(looks[3], right) > 0.4


def test_the_fits_ssim_is_scikit_images():
    from skimage.metrics import structural_similarity

    rng = np.random.default_rng(0)
    a = rng.random((30, 41, 3))
    b = np.clip(a + 0.1 * rng.standard_normal(a.shape), 0, 1)
    ours = float(ssim_map(torch.tensor(a), torch.tensor(b)).mean())
    ref = structural_similarity(a, b, channel_axis=-1, data_range=1.0, gaussian_weights=True, sigma=1.5,
                                use_sample_covariance=False)
    assert abs(ours - ref) < 1e-9
    pred = torch.tensor(b, requires_grad=True)
    loss = fit_loss(pred, torch.tensor(a), 0.2)
    loss.backward()
    expected = 0.8 * np.abs(b - a).mean() + 0.2 * (1 - ref)
    assert abs(loss.item() - expected) < 1e-9 and torch.isfinite(pred.grad).all()


@pytest.mark.parametrize("random_background, rises", [(True, True), (False, False)])
def test_a_random_background_makes_the_splats_cover_a_black_photo(random_background, rises):
    """Black photos on a black background need no opacity: the fit leaves faint black Gaussians as they
    are (zero loss, zero gradient). On a random background the background would show, so the fit makes
    them opaque."""
    cfg = SplatConfig(random_background=random_background, teacher_views=0, fit_ssim=0.0, fit_lr=10.0)
    start = faint_splats(0.0)
    fitted, steps, _ = fit_splats(plain_photo_run(white=False), start, cfg, seconds=1.5, progress=False)
    assert steps > 0
    if rises:
        assert float(fitted.opacities.mean()) > 0.3  # from 0.1
    else:
        torch.testing.assert_close(fitted.opacities, start.opacities)


@pytest.mark.parametrize("white", [False, True])
def test_a_white_background_run_keeps_its_white(white, monkeypatch):
    """The background of every fitting step: random colours for a run on black, the run's white for a
    white_bkgd one (its photos' transparent pixels are white)."""
    seen = []

    def drawn(splats, camera, background=None, **kwargs):
        seen.append(background.clone())
        return rasterize(splats, camera, background, **kwargs)

    monkeypatch.setattr(bake, "rasterize", drawn)
    fit_splats(plain_photo_run(white), faint_splats(0.0), SplatConfig(teacher_views=0), seconds=0.5, progress=False)
    backgrounds = torch.stack(seen)
    if white:
        torch.testing.assert_close(backgrounds, torch.ones_like(backgrounds))
    else:
        assert len(seen) > 2 and float(backgrounds.std(0).min()) > 0.1  # a new colour each step


@pytest.mark.parametrize("max_spread", [0.25, 0.0])
def test_no_splat_spreads_wider_than_its_distance_allows(max_spread):
    """A Gaussian 5 units wide 3 units in front of the cameras: with ``max_spread`` its standard deviations end
    at most max_spread x its distance from the nearest camera (numpy's distance to the two camera centres);
    with 0 nothing caps them."""
    start = faint_splats(0.5)
    start.log_scales[12] = math.log(5.0)  # the centre one
    cfg = SplatConfig(teacher_views=0, max_spread=max_spread)
    run = plain_photo_run(white=False)
    fitted, steps, _ = fit_splats(run, start, cfg, seconds=0.5, progress=False)
    assert steps > 0
    centres = run.scene.poses[:, :3, 3]
    nearest = np.linalg.norm(fitted.means.numpy()[:, None] - centres[None], axis=-1).min(1)
    widest = fitted.scales.max(1).values.numpy()
    if max_spread > 0:
        assert (widest <= max_spread * nearest * (1 + 1e-4)).all()
        assert widest.max() > 0.5 * max_spread * nearest.min()  # the capped one sits at its cap
    else:
        assert widest.max() > 3.0


def test_a_turned_view_teaches_only_where_the_field_draws_a_surface():
    """surface_mask: opaque and concentrated pixels only; taught_target: no gradient reaches the others."""
    view = SimpleNamespace(hit=np.array([[True, True, True, False]]), acc=np.array([[0.9, 0.9, 0.3, 0.0]]),
                           spread=np.array([[0.01, 0.4, 0.01, 0.0]]))
    mask = surface_mask(view, 0.1)
    assert mask.tolist() == [[True, False, False, False]]
    field = torch.cat([torch.rand(1, 4, 3) * 0.5, torch.full((1, 4, 1), 0.5),
                       torch.as_tensor(mask, dtype=torch.float32)[..., None]], -1)
    bg = torch.tensor([0.2, 0.4, 0.6])
    pred = torch.rand(1, 4, 3, requires_grad=True)
    target = taught_target(field, bg, pred)
    assert torch.allclose(target[0, 0], field[0, 0, :3] + 0.5 * bg)
    (target - pred).abs().sum().backward()
    assert pred.grad[0, 0].abs().sum() == 3.0 and pred.grad[0, 1:].abs().sum() == 0.0
    four = field[..., :4]  # a teacher view without a mask teaches every pixel
    assert torch.allclose(taught_target(four, bg, pred), four[..., :3] + 0.5 * bg)
