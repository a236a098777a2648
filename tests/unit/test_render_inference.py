"""Rendering's own shortcuts on a CPU give the image of the plain path: the triplane look-ups and the
proposal levels' baked tables compiled (``enerf.nn.compiled``, used without autograd), and whole
images rendered at most ``CPU_CHUNK`` rays a pass (``Renderer.render_image``)."""

from __future__ import annotations

import math

import numpy as np
import torch

from enerf.cameras.rays import Rays, flatten_rays, make_rays
from enerf.config import FieldConfig, RenderConfig
from enerf.render.build import build_fields
import pytest

from enerf.fields.proposal import ProposalField
from enerf.nn import compiled
from enerf.nn.triplane import TriPlaneEncoding
from enerf.render.build import build_renderer
from enerf.render.renderer import CPU_CHUNK

CPU = torch.device("cpu")


def _numpy_features(planes: np.ndarray, lines: np.ndarray, t: np.ndarray) -> np.ndarray:
    """One level's 3 C features of one point, t in [0, 1]^3 (clamped: border), from the definition:
    plane k bilinear over axes (a, b) = (0, 1), (0, 2), (1, 2) (columns along a), times line k
    linear along axis 2, 1, 0."""
    r = planes.shape[-1]
    c = np.clip(t, 0.0, 1.0) * (r - 1)
    out = []
    for k, ((a, b), axis) in enumerate((((0, 1), 2), ((0, 2), 1), ((1, 2), 0))):
        x0, y0, z0 = (min(int(np.floor(c[i])), r - 2) for i in (a, b, axis))
        fx, fy, fz = c[a] - x0, c[b] - y0, c[axis] - z0
        p = planes[k]
        plane = ((1 - fx) * (1 - fy) * p[:, y0, x0] + fx * (1 - fy) * p[:, y0, x0 + 1]
                 + (1 - fx) * fy * p[:, y0 + 1, x0] + fx * fy * p[:, y0 + 1, x0 + 1])
        line = (1 - fz) * lines[k, :, z0, 0] + fz * lines[k, :, z0 + 1, 0]
        out.append(plane * line)
    return np.concatenate(out)


needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba does not import")


@needs_numba
def test_compiled_lookups_equal_grid_sample_and_the_definition(monkeypatch):
    torch.manual_seed(0)
    aabb = np.array([-2.0, -1.0, -0.5, 2.0, 3.0, 1.5])
    enc = TriPlaneEncoding((2, 5, 9), components=16, aabb=tuple(aabb))
    rng = np.random.default_rng(0)
    points = rng.uniform(aabb[:3] - 0.5, aabb[3:] + 0.5, size=(300, 3))  # a third outside: border values
    points[:3] = [aabb[:3], aabb[3:], [aabb[3], aabb[1], 0.25]]  # the box's corners and a face: the far border
    x = torch.tensor(points, dtype=torch.float32)
    calls = []
    real = compiled.triplane_level
    monkeypatch.setattr(compiled, "triplane_level", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad():
        bags = enc(x)
    assert len(calls) == 3  # one per level: the compiled path ran
    reference = enc(x).detach()  # with autograd: F.grid_sample
    torch.testing.assert_close(bags, reference, atol=1e-7, rtol=0)
    t = (points - aabb[:3]) / (aabb[3:] - aabb[:3])
    for i in range(0, 300, 7):
        expected = np.concatenate([_numpy_features(p.detach().numpy().astype(np.float64),
                                                   ln.detach().numpy().astype(np.float64), t[i])
                                   for p, ln in zip(enc.planes, enc.lines)])
        np.testing.assert_allclose(bags[i].numpy(), expected, rtol=1e-5, atol=1e-7)
    with torch.no_grad():  # leading dimensions are kept
        assert torch.equal(enc(x.view(10, 30, 3)), bags.view(10, 30, -1))
    with torch.no_grad():  # new weights: the channels-last tables are made again
        enc.planes[1].mul_(-2.0)
        moved = enc(x)
    torch.testing.assert_close(moved, enc(x).detach(), atol=1e-6, rtol=0)
    assert not torch.allclose(moved, bags)


@needs_numba
@pytest.mark.parametrize("contraction", ["linf", "mipnerf360", "none"])
def test_baked_proposal_density_equals_the_network(contraction):
    """A proposal level read from its baked table (no autograd) against the level's own network
    (autograd on: F.grid_sample, the MLP in torch), inside and outside the box; a table made again
    after the weights change; torch's thread count left as it was."""
    torch.manual_seed(1)
    level = ProposalField(9, 8, contraction, aabb=(-1.0, -2.0, -0.5, 1.5, 1.0, 0.5))
    with torch.no_grad():  # densities across several decades
        for table in [*level.pos_encoding.planes, *level.pos_encoding.lines]:
            table.mul_(10.0)
        level.mlp[0].weight.mul_(10.0)
        level.mlp[2].weight.mul_(3.0)
    x = torch.randn(4000, 3) * 1.5
    torch.set_num_threads(1)
    with torch.no_grad():
        fast = level(x)
    assert torch.get_num_threads() == 1
    reference = level(x).detach()
    assert float(reference.max()) / float(reference.min()) > 1e5
    torch.testing.assert_close(fast, reference, rtol=2e-5, atol=0)
    with torch.no_grad():
        level.mlp[0].bias.add_(0.5)
        again = level(x)
    torch.testing.assert_close(again, level(x).detach(), rtol=2e-5, atol=0)
    assert not torch.allclose(again, fast)


def _capture_model():
    """A tiny model of configs/capture_cpu.txt's kind: contraction, 16-channel triplane field,
    a proposal network, the colour mask."""
    field = FieldConfig(encoding="triplane", grid_resolutions=(8, 32), grid_components=16, contraction="linf",
                        netdepth=2, netwidth=32, view_width=16, multires_views=2)
    render = RenderConfig(sampler="proposal", n_samples=16, proposal_samples=(32,), proposal_resolutions=(16,),
                          proposal_components=8, lindisp_from=1.0, rgb_weight_threshold=1e-4, chunk=8192)
    torch.manual_seed(3)
    fields = build_fields(field, CPU, render)
    with torch.no_grad():  # density that varies in space, so that the image is not flat
        for planes in fields["coarse"].pos_encoding.planes:
            planes.mul_(3.0)
        fields["coarse"].density_head.weight.abs_()
    for f in fields.values():
        f.eval()
    return fields, render


def test_render_image_equals_the_plain_path_to_float_rounding():
    """A 48 x 30 view (1,440 rays: two CPU passes) through ``render_image`` (no autograd: compiled
    look-ups and baked proposal, 1,024 rays a pass) against ``render_rays`` on all rays at once with autograd on
    (F.grid_sample, one pass): the same image within 1e-5 and the same PSNR to 2 decimals."""
    fields, render = _capture_model()
    renderer = build_renderer(render, CPU)
    c2w = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, -1.2], [0.0, 1.0, 0.0, 0.3]])
    rays = make_rays(30, 48, 40.0, c2w, 0.05, 4.0, False)
    passes = []
    fast = renderer.render_image(rays, fields, progress=passes.append)
    assert passes == [CPU_CHUNK, 30 * 48 - CPU_CHUNK]  # chunk 8192, capped on a CPU
    with torch.enable_grad():
        plain = renderer.render_rays(flatten_rays(rays), fields, train=False)
    for key in ("rgb", "depth", "acc"):
        reference = plain[key].detach().reshape(fast[key].shape)
        torch.testing.assert_close(fast[key], reference, atol=1e-5 * (1 + reference.abs().max().item()), rtol=0)
    assert 0.2 < float(fast["acc"].mean()) < 0.8 and float(fast["rgb"].std()) > 0.005  # not a flat image
    target = torch.rand(30, 48, 3, generator=torch.Generator().manual_seed(1))

    def psnr(img):
        return -10 * math.log10(float(((img.clamp(0, 1) - target) ** 2).mean()))

    assert f"{psnr(fast['rgb']):.2f}" == f"{psnr(plain['rgb'].detach().reshape(30, 48, 3)):.2f}"


def test_a_smaller_chunk_is_kept():
    fields, render = _capture_model()
    renderer = build_renderer(render, CPU)
    rays = Rays(*(t[:10] for t in flatten_rays(make_rays(4, 5, 4.0, torch.eye(4)[:3], 0.05, 1000.0, False))))
    passes = []
    renderer.render_image(rays, fields, chunk=3, progress=passes.append)
    assert passes == [3, 3, 3, 1]
