"""Frustum counts, the visibility loss, near-camera gradient scaling and the seen-pixel PSNR, each against
an independent computation (OpenCV's projection convention in numpy, analytic distances)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.cameras.rays import pixel_rays
from enerf.cameras.visibility import frustum_counts, seen_pixels
from enerf.config import FieldConfig
from enerf.data.scene import Scene
from enerf.errors import ConfigError
from enerf.nn.contraction import contract, uncontract
from enerf.render.estimator import Samples
from enerf.render.shading import shade
from enerf.cameras.rays import Rays
from enerf.train.evaluate import seen_scores
from enerf.train.visibility import VisibilityLoss

H, W, F = 24, 32, 30.0


def _look_at(centre: np.ndarray, target=np.zeros(3), up=np.array([0.0, 0.0, 1.0])) -> np.ndarray:
    back = centre - target
    back /= np.linalg.norm(back)
    right = np.cross(up, back)
    right /= np.linalg.norm(right)
    return np.stack([right, np.cross(back, right), back, centre], axis=1).astype(np.float32)  # [3, 4]


def _ring(n: int, radius: float = 2.0, height: float = 0.5) -> np.ndarray:
    angles = np.linspace(0, 2 * np.pi, n, endpoint=False)
    return np.stack([_look_at(np.array([radius * np.cos(a), radius * np.sin(a), height])) for a in angles])


def _numpy_counts(points: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """OpenCV's convention: x_cam = R_cv (p - C) with the camera's y and z axes flipped, K projects."""
    k = np.array([[F, 0, W / 2], [0, F, H / 2], [0, 0, 1]])
    counts = np.zeros(len(points), int)
    for c2w in poses.astype(np.float64):
        r_cv = (c2w[:3, :3] @ np.diag([1.0, -1.0, -1.0])).T  # world -> OpenCV camera
        cam = (points - c2w[:3, 3]) @ r_cv.T
        uvw = cam @ k.T
        with np.errstate(divide="ignore", invalid="ignore"):
            u, v = uvw[:, 0] / uvw[:, 2], uvw[:, 1] / uvw[:, 2]
        counts += (cam[:, 2] > 0) & (u >= 0) & (u <= W) & (v >= 0) & (v <= H)
    return counts


def test_frustum_counts_match_opencv_projection():
    poses = _ring(7)
    points = np.random.default_rng(0).uniform(-3, 3, (5000, 3))
    counts = frustum_counts(torch.tensor(points, dtype=torch.float32), torch.tensor(poses), H, W, F, chunk=777)
    expected = _numpy_counts(points, poses)
    assert np.array_equal(counts.numpy(), expected)
    assert 0 < (expected == 0).mean() < 1 and expected.max() >= 3  # both seen and unseen points drawn
    # seen_pixels tests a few cameras a round and drops the points seen: the same as counts > 0
    grid = torch.tensor(points, dtype=torch.float32).view(50, 100, 3)
    seen = seen_pixels(grid, torch.zeros_like(grid), torch.zeros(50, 100), torch.tensor(np.concatenate([poses] * 3)),
                       H, W, F)
    assert np.array_equal(seen.reshape(-1), expected > 0)


def test_every_pixel_ray_is_in_its_own_frustum_and_seen_pixels_follow_the_depth():
    c2w = torch.tensor(_look_at(np.array([2.0, 0.0, 0.0])))
    origins, directions = pixel_rays(H, W, F, c2w)
    assert frustum_counts((origins + 1.3 * directions).reshape(-1, 3), c2w[None], H, W, F).min() == 1
    # another camera sees the left half of this one's image at depth 2 (a camera at the same place,
    # turned 90 degrees: only depth matters for the test) -- compare with numpy's counts
    other = torch.tensor(_look_at(np.array([2.0, 0.0, 0.0]), target=np.array([0.0, 1.5, 0.0])))
    depth = torch.full((H, W), 2.0)
    seen = seen_pixels(origins, directions, depth, other[None], H, W, F)
    expected = _numpy_counts((origins + 2.0 * directions).reshape(-1, 3).numpy().astype(np.float64),
                             other[None].numpy()).reshape(H, W) > 0
    assert np.array_equal(seen, expected) and 0 < seen.mean() < 1


@pytest.mark.parametrize("kind", ["mipnerf360", "linf"])
def test_uncontract_inverts_contract(kind):
    x = torch.randn(2000, 3, dtype=torch.float64) * 4
    assert torch.allclose(uncontract(contract(x, kind), kind), x, atol=1e-9)
    y = contract(x, kind)
    assert torch.allclose(contract(uncontract(y, kind), kind), y, atol=1e-12)


def _scene(poses: np.ndarray, use_ndc: bool = False) -> Scene:
    n = len(poses)
    return Scene("ring", np.zeros((n, H, W, 3), np.float32), poses, H, W, F, np.ones((n, 2), np.float32), 0.1, 6.0,
                 use_ndc, np.arange(n - 1), np.array([n - 1]), poses[:1], np.eye(4))


class _Blob(torch.nn.Module):
    """A density field: a * exp(-|x|^2) with one parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(3.0))

    def densities(self, x):
        return [self.a * torch.exp(-(x ** 2).sum(-1))]


def test_visibility_loss_is_the_mean_log_density_at_the_points_no_training_camera_sees():
    scene = _scene(_ring(6))
    loss = VisibilityLoss(scene, FieldConfig(contraction="mipnerf360"), 0.5, 1, torch.device("cpu"), points=3000)
    field = _Blob()
    value = loss({"coarse": field}, torch.Generator().manual_seed(4))
    # the same draws, filtered by numpy's counts
    u = torch.rand((3000, 3), generator=torch.Generator().manual_seed(4)).numpy().astype(np.float64)
    y = -2 + 4 * u
    y = y[np.linalg.norm(y, axis=1) < 1.99]
    x = uncontract(torch.tensor(y), "mipnerf360").numpy()
    unseen = x[_numpy_counts(x, scene.poses[scene.i_train]) < 1]
    expected = 0.5 * np.mean(np.log1p(3.0 * np.exp(-(unseen ** 2).sum(1))))
    assert 100 < len(unseen) < 2900
    assert value.item() == pytest.approx(expected, rel=1e-5)
    value.backward()
    assert field.a.grad > 0  # it lowers the density there


def test_visibility_loss_refuses_ndc_scenes_in_one_line():
    with pytest.raises(ConfigError, match="--no_ndc"):
        VisibilityLoss(_scene(_ring(4), use_ndc=True), FieldConfig(), 1.0, 1, torch.device("cpu"))


class _Leaves(torch.nn.Module):
    """A field whose densities and colours are the leaves given, one per sample."""

    def __init__(self, sigma, rgb):
        super().__init__()
        self.sigma, self.rgb = sigma, rgb

    def density(self, x, noise_std=0.0):
        return self.sigma.reshape(x.shape[:-1]), self.rgb.reshape(*x.shape[:-1], 3)

    def color(self, h, dirs):
        return h


def test_gradient_scaling_multiplies_each_samples_gradient_by_its_squared_distance_ratio():
    gen = torch.Generator().manual_seed(0)
    n_rays, k = 5, 9
    directions = torch.randn(n_rays, 3, generator=gen)  # not unit: distances are t |d|
    rays = Rays(torch.zeros(n_rays, 3), directions, torch.nn.functional.normalize(directions, dim=-1),
                torch.full((n_rays,), 0.1), torch.full((n_rays,), 3.0))
    t = torch.sort(torch.rand(n_rays, k, generator=gen) * 3 + 0.05, dim=-1).values
    samples = Samples(t=t)
    target = torch.rand(n_rays, 3, generator=gen)
    grads = []
    for scaling in (0.0, 1.5):
        sigma = torch.rand(n_rays, k, generator=torch.Generator().manual_seed(1)).requires_grad_()
        rgb = torch.rand(n_rays, k, 3, generator=torch.Generator().manual_seed(2)).requires_grad_()
        out, _ = shade(samples, rays, _Leaves(sigma, rgb), 0.0, False, 0.0, scaling)
        ((out["rgb"] - target) ** 2).sum().backward()
        grads.append((out["rgb"].detach(), sigma.grad, rgb.grad))
    scale = ((t * directions.norm(dim=-1, keepdim=True)) / 1.5).clamp(max=1.0) ** 2
    assert torch.equal(grads[0][0], grads[1][0])  # the same rendering
    assert torch.allclose(grads[1][1], grads[0][1] * scale, atol=1e-7)
    assert torch.allclose(grads[1][2], grads[0][2] * scale[..., None], atol=1e-7)
    assert (scale < 1).any() and (scale == 1).any()


def test_psnr_seen_scores_only_the_pixels_a_training_camera_sees():
    poses = np.stack([_look_at(np.array([2.0, 0.0, 0.0]), target=np.array([0.0, 1.5, 0.0])),
                      _look_at(np.array([2.0, 0.0, 0.0]))])
    scene = _scene(poses)  # view 1 held out, view 0 the one training camera
    rng = np.random.default_rng(3)
    target = rng.uniform(size=(H, W, 3)).astype(np.float32)
    pred = np.clip(target + rng.normal(0, 0.05, target.shape), 0, 1).astype(np.float32)
    out = {"depth_median": torch.full((H, W), 2.0)}
    scores = seen_scores(scene, 1, 1, out, pred, target)
    o, d = pixel_rays(H, W, F, torch.tensor(poses[1]))
    mask = _numpy_counts((o + 2.0 * d).reshape(-1, 3).numpy().astype(np.float64), poses[:1]).reshape(H, W) > 0
    assert scores["seen_fraction"] == pytest.approx(mask.mean())
    assert scores["psnr_seen"] == pytest.approx(-10 * np.log10(np.mean((pred[mask] - target[mask]) ** 2)), rel=1e-6)
    assert seen_scores(_scene(poses, use_ndc=True), 1, 1, out, pred, target) == {"psnr_seen": None,
                                                                               "seen_fraction": None}
