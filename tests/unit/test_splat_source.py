"""``enerf.render.sources`` (one camera in, an image out) and ``enerf.splats.source`` (the splats as
such a source): the views' rays are the scene's, a strided view is the whole image subsampled, and
the splats' depth reads as the field's does (the NDC ray parameter on forward-facing scenes,
checked against ``ndc_rays``)."""

from __future__ import annotations

import numpy as np
import torch

import enerf.splats.rasterize as rasterize_module
from enerf.cameras.rays import ndc_rays, pixel_rays
from enerf.data.scene import Scene
from enerf.cameras.rays import world_to_ndc
from enerf.splats import Splats
from enerf.splats.source import splat_source

H, W, F = 9, 12, 10.0


def _scene(use_ndc: bool) -> Scene:
    rot = torch.linalg.matrix_exp(torch.tensor([[0.0, -0.1, 0.05], [0.1, 0.0, -0.2], [-0.05, 0.2, 0.0]])).numpy()
    poses = np.concatenate([rot, [[0.1], [-0.2], [0.3]]], 1)[None].repeat(2, 0).astype(np.float32)
    return Scene("s", np.zeros((2, H, W, 3), np.float32), poses, H, W, F, np.ones((2, 2), np.float32), 0.5, 6.0,
                 use_ndc, np.arange(1), np.arange(1, 2), poses, np.eye(4))


def test_a_scene_view_has_the_scenes_rays_bit_for_bit():
    for use_ndc in (False, True):
        scene = _scene(use_ndc)
        for stride in (1, 2):
            mine = scene.camera(1, stride).rays(scene.near, scene.far, scene.use_ndc)
            theirs = scene.rays(1, stride=stride)
            for a, b in zip(mine, theirs):
                assert torch.equal(a, b)


def _fake_rasterize(record: list):
    """Stands in for the rasterizer: a fixed image whose pixel (row, col) has colour (row, col, 1) / 100,
    acc 0.5 and weighted z-depth 0.5 * (2 + col / 10)."""

    def rasterize(splats, camera, background=None):
        record.append((camera, background))
        rows, cols = torch.meshgrid(torch.arange(camera.height, dtype=torch.float32),
                                    torch.arange(camera.width, dtype=torch.float32), indexing="ij")
        rgb = torch.stack([rows, cols, torch.ones_like(rows)], -1) / 100.0
        acc = torch.full_like(rows, 0.5)
        return {"rgb": rgb, "acc": acc, "depth": acc * (2.0 + cols / 10.0)}

    return rasterize


def _splats() -> Splats:
    return Splats(torch.zeros(1, 3), torch.zeros(1, 3), torch.tensor([[1.0, 0, 0, 0]]), torch.zeros(1), torch.zeros(1, 1, 3))


class _Bar:
    n = 0

    def update(self, k):
        self.n += k


def test_splat_source_renders_the_camera_asked_for_and_subsamples_a_strided_view(monkeypatch):
    record: list = []
    monkeypatch.setattr(rasterize_module, "rasterize", _fake_rasterize(record))
    scene = _scene(False)
    source = splat_source(_splats(), scene, torch.ones(3))
    bar = _Bar()
    out = source(scene.camera(1, stride=2), bar)
    camera, background = record[-1]
    assert (camera.width, camera.height, camera.focal) == (W, H, F)
    np.testing.assert_array_equal(camera.c2w.numpy(), scene.poses[1])
    assert torch.equal(background, torch.ones(3))
    assert out["rgb"].shape == (5, 6, 3) and bar.n == 30
    assert out["rgb"][2, 3].tolist() == torch.tensor([4.0, 6.0, 1.0]).div(100).tolist()  # row 4, column 6
    torch.testing.assert_close(out["depth"][2, 3], torch.tensor(0.5 * 2.6))  # world rays: z-depth as it is


def test_ndc_scenes_get_the_ndc_ray_parameter_of_the_mean_depth_point(monkeypatch):
    monkeypatch.setattr(rasterize_module, "rasterize", _fake_rasterize([]))
    scene = _scene(True)
    view = scene.camera(0)
    out = splat_source(_splats(), scene)(view)
    # independently: the mean point at z-depth z along each pixel's ray, its NDC point, and the parameter t of
    # that point along the pixel's NDC ray (ndc_rays), as the field's depth for NDC rays
    origins, dirs = pixel_rays(H, W, F, torch.as_tensor(scene.poses[0]))
    z = 2.0 + torch.arange(W, dtype=torch.float32) / 10.0
    point = origins + z[None, :, None] * dirs
    o, d = ndc_rays(H, W, F, 1.0, origins, dirs)
    t = (world_to_ndc(point, H, W, F) - o)[..., 2] / d[..., 2]
    torch.testing.assert_close(out["depth"], 0.5 * t, rtol=1e-4, atol=1e-5)
