"""Pixel rays and the NDC warp against an independent pinhole model and the NeRF-paper formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from enerf.cameras.rays import flatten_rays, index_rays, make_rays, ndc_rays, pixel_rays

H, W, FOCAL = 5, 7, 6.3


def _c2w(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rot = Rotation.random(random_state=seed).as_matrix()
    return np.concatenate([rot, rng.normal(size=(3, 1))], 1)  # [3, 4]


def _project(points: np.ndarray, c2w: np.ndarray) -> np.ndarray:
    """Pinhole projection with K = [[f, 0, W/2], [0, f, H/2], [0, 0, 1]] of a camera looking down -z,
    image y down (OpenCV pixel coordinates of a camera with axes [right, -up, -back])."""
    cam = (points - c2w[:, 3]) @ c2w[:, :3]  # world -> camera [right, up, back]
    cv = cam * np.array([1.0, -1.0, -1.0])  # -> [right, down, forward]
    K = np.array([[FOCAL, 0, W / 2], [0, FOCAL, H / 2], [0, 0, 1.0]])
    uvw = cv @ K.T
    return uvw[:, :2] / uvw[:, 2:]


@pytest.mark.parametrize("homogeneous", [False, True])
def test_pixel_rays_pass_through_pixel_centres(homogeneous):
    c2w = _c2w(0)
    mat = np.vstack([c2w, [0, 0, 0, 1]]) if homogeneous else c2w
    origins, directions = pixel_rays(H, W, FOCAL, torch.tensor(mat))
    assert origins.shape == directions.shape == (H, W, 3)
    o = origins.double().numpy().reshape(-1, 3)
    d = directions.double().numpy().reshape(-1, 3)
    np.testing.assert_allclose(o, np.broadcast_to(c2w[:, 3], o.shape), atol=1e-6)
    uv = _project(o + 2.5 * d, c2w)
    jj, ii = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    np.testing.assert_allclose(uv[:, 0], ii.ravel() + 0.5, atol=1e-4)
    np.testing.assert_allclose(uv[:, 1], jj.ravel() + 0.5, atol=1e-4)
    # camera-space z of the direction is -1, so the ray parameter t is the z-depth
    np.testing.assert_allclose(d @ c2w[:, 2], -1.0, atol=1e-5)


def _ndc_point(p: np.ndarray, near: float) -> np.ndarray:
    """NeRF paper appendix C: pi(x, y, z) = (-f/(W/2) x/z, -f/(H/2) y/z, 1 + 2n/z) with far = inf."""
    x, y, z = p.T
    return np.stack([-FOCAL / (W / 2) * x / z, -FOCAL / (H / 2) * y / z, 1 + 2 * near / z], -1)


def test_ndc_rays_map_world_points_onto_the_ndc_ray():
    torch.manual_seed(0)
    near = 1.0
    # forward-facing camera near the origin, looking down -z
    c2w = np.concatenate([Rotation.from_euler("xyz", [4, -6, 3], degrees=True).as_matrix(), [[0.1], [-0.2], [0.05]]], 1)
    o, d = pixel_rays(H, W, FOCAL, torch.tensor(c2w, dtype=torch.float64))
    o_ndc, d_ndc = ndc_rays(H, W, FOCAL, near, o.double(), d.double())
    o, d = o.double().numpy().reshape(-1, 3), d.double().numpy().reshape(-1, 3)
    o_ndc, d_ndc = o_ndc.numpy().reshape(-1, 3), d_ndc.numpy().reshape(-1, 3)
    t_near = (-near - o[:, 2]) / d[:, 2]
    # the NDC origin is the projection of the ray's point on the plane z = -near
    np.testing.assert_allclose(o_ndc, _ndc_point(o + t_near[:, None] * d, near), atol=1e-9)
    np.testing.assert_allclose(o_ndc[:, 2], -1.0, atol=1e-9)
    for depth in (1.5, 3.0, 20.0, 1e4):
        t = (-depth - o[:, 2]) / d[:, 2]
        p = o + t[:, None] * d
        target = _ndc_point(p, near)
        # t' from the paper: t' = 1 - o_z / (o_z + t d_z) with o on the near plane
        oz = o[:, 2] + t_near * d[:, 2]
        t_ndc = 1.0 - oz / p[:, 2]
        assert np.all((t_ndc > 0) & (t_ndc < 1))
        np.testing.assert_allclose(o_ndc + t_ndc[:, None] * d_ndc, target, atol=1e-9)


def test_make_rays_ranges_and_viewdirs():
    c2w = torch.tensor(_c2w(1), dtype=torch.float32)
    o, d = pixel_rays(H, W, FOCAL, c2w)
    rays = make_rays(H, W, FOCAL, c2w, near=0.5, far=4.0, use_ndc=False)
    assert rays.origins.shape == (H, W, 3) and rays.near.shape == (H, W, 1)
    assert torch.all(rays.near == 0.5) and torch.all(rays.far == 4.0)
    torch.testing.assert_close(rays.viewdirs, d / d.norm(dim=-1, keepdim=True))
    torch.testing.assert_close(rays.viewdirs.norm(dim=-1), torch.ones(H, W))
    ndc = make_rays(H, W, FOCAL, c2w, near=0.5, far=4.0, use_ndc=True)
    assert torch.all(ndc.near == 0.0) and torch.all(ndc.far == 1.0)
    torch.testing.assert_close(ndc.viewdirs, rays.viewdirs)  # view directions stay in world space
    flat = flatten_rays(rays)
    assert all(f.shape[0] == H * W for f in flat)
    picked = index_rays(flat, torch.tensor([3, 0]))
    torch.testing.assert_close(picked.directions[0], d[0, 3])
