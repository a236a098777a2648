"""TriPlaneEncoding (TensoRF VM features) against a numpy bilinear interpolation, and its wiring
into the NeRF field, the loss and the optimizer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.config import FieldConfig, TrainConfig
from enerf.errors import ConfigError
from enerf.fields.nerf import NeRFField
from enerf.nn.triplane import TriPlaneEncoding
from enerf.train.nerf import nerf_losses
from enerf.train.state import set_learning_rates
from enerf.train.state import optimizer_from_config


def _bilinear(grid: np.ndarray, u: float, v: float) -> np.ndarray:
    """grid [C, H, W] at continuous pixel coordinates (u along W, v along H), clamped to the border."""
    h, w = grid.shape[1:]
    u, v = min(max(u, 0.0), w - 1.0), min(max(v, 0.0), h - 1.0)
    u0, v0 = min(int(np.floor(u)), w - 2) if w > 1 else 0, min(int(np.floor(v)), h - 2) if h > 1 else 0
    fu, fv = (u - u0) if w > 1 else 0.0, (v - v0) if h > 1 else 0.0
    u1, v1 = min(u0 + 1, w - 1), min(v0 + 1, h - 1)
    return ((1 - fu) * (1 - fv) * grid[:, v0, u0] + fu * (1 - fv) * grid[:, v0, u1]
            + (1 - fu) * fv * grid[:, v1, u0] + fu * fv * grid[:, v1, u1])


def _reference(enc: TriPlaneEncoding, x: np.ndarray, aabb: np.ndarray) -> np.ndarray:
    """VM features of one point: for each level, plane_xy(x, y) * line_z(z), plane_xz * line_y, plane_yz * line_x."""
    out = []
    t = (x - aabb[:3]) / (aabb[3:] - aabb[:3])  # [0, 1] inside the box
    for planes, lines, r in zip(enc.planes, enc.lines, enc.resolutions):
        p, ln = planes.detach().numpy().astype(np.float64), lines.detach().numpy().astype(np.float64)
        c = t * (r - 1)  # continuous index (align_corners=True)
        for k, ((a, b), axis) in enumerate((((0, 1), 2), ((0, 2), 1), ((1, 2), 0))):
            out.append(_bilinear(p[k], c[a], c[b]) * _bilinear(ln[k], 0.0, c[axis]))
    return np.concatenate(out)


def test_features_equal_numpy_bilinear_products():
    torch.manual_seed(0)
    aabb = np.array([-1.5, -1.0, -0.5, 1.5, 2.0, 1.0])
    enc = TriPlaneEncoding((5, 9), components=3, aabb=tuple(aabb))
    rng = np.random.default_rng(1)
    points = rng.uniform(aabb[:3] - 0.2, aabb[3:] + 0.2, size=(40, 3))  # some outside: border values
    x = torch.tensor(points, dtype=torch.float32)
    got = enc(x).detach().numpy()
    assert got.shape == (40, enc.out_dim) == (40, 3 * 3 * 2)
    for i, p in enumerate(points):
        np.testing.assert_allclose(got[i], _reference(enc, p, aabb), rtol=1e-5, atol=1e-6)
    with torch.no_grad():  # the path without autograd (compiled on a CPU): the same values to float rounding
        torch.testing.assert_close(enc(x), torch.from_numpy(got), rtol=0, atol=1e-6)
        assert torch.equal(enc(x.view(5, 8, 3)), enc(x).view(5, 8, -1))


def _features_and_gradients(enc: TriPlaneEncoding, x: torch.Tensor, weights: torch.Tensor):
    for q in enc.parameters():
        q.grad = None
    feats = enc(x)
    (feats * weights).sum().backward()
    return feats.detach(), [q.grad.clone() for q in enc.parameters()]


def test_training_lookup_gradients_equal_grid_sample(monkeypatch):
    """Training on a CPU reads the grids through enerf.nn.compiled.TriplaneLevel (a compiled forward and
    backward); its features and its gradients into planes and lines equal F.grid_sample's autograd."""
    from enerf.nn import compiled

    torch.manual_seed(0)
    aabb = (-1.5, -1.0, -0.5, 1.5, 2.0, 1.0)
    enc = TriPlaneEncoding((4, 17), components=5, aabb=aabb)
    lo, hi = torch.tensor(aabb[:3]), torch.tensor(aabb[3:])
    x = lo - 0.2 + torch.rand(3000, 3) * (hi - lo + 0.4)  # some outside the box: border values
    weights = torch.randn(3000, enc.out_dim)
    feats, grads = _features_and_gradients(enc, x, weights)
    assert compiled.available()
    with monkeypatch.context() as m:
        m.setattr(compiled, "available", lambda: False)  # the torch path: F.grid_sample and its autograd
        ref_feats, ref_grads = _features_and_gradients(enc, x, weights)
    torch.testing.assert_close(feats, ref_feats, rtol=0, atol=1e-6)
    for got, ref in zip(grads, ref_grads):
        assert got.shape == ref.shape and got.abs().sum() > 0
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    # each gradient value sums its points in one order whatever the thread count: the same bits
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _, one_thread = _features_and_gradients(enc, x, weights)
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(a, b) for a, b in zip(one_thread, grads))
    # positions that need a gradient take the torch path, which gives them one
    x.requires_grad_(True)
    (enc(x) * weights).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_leading_dimensions_are_kept():
    enc = TriPlaneEncoding((4,), components=2)
    x = torch.rand(2, 3, 5, 3) * 2 - 1
    np.testing.assert_allclose(enc(x).reshape(-1, enc.out_dim).detach(), enc(x.reshape(-1, 3)).detach())


def test_total_variation_equals_numpy():
    torch.manual_seed(2)
    enc = TriPlaneEncoding((4, 6), components=2)
    expected = 0.0
    for planes, lines in zip(enc.planes, enc.lines):
        p, ln = planes.detach().numpy().astype(np.float64), lines.detach().numpy().astype(np.float64)
        expected += np.mean(np.diff(p, axis=-2) ** 2) + np.mean(np.diff(p, axis=-1) ** 2) + np.mean(np.diff(ln, axis=-2) ** 2)
    assert float(enc.total_variation().detach()) == pytest.approx(expected, rel=1e-5)


def test_bad_settings_are_config_errors():
    with pytest.raises(ConfigError, match="resolutions"):
        TriPlaneEncoding((1,))
    with pytest.raises(ConfigError, match="aabb"):
        TriPlaneEncoding((4,), aabb=(0, 0, 0, 1, -1, 1))
    with pytest.raises(ConfigError, match="^encoding .hash. is not one of"):
        FieldConfig(encoding="hash")


def test_triplane_field_trains_its_grids_at_their_own_learning_rate():
    cfg = FieldConfig(netdepth=2, netwidth=16, view_width=8, encoding="triplane", grid_resolutions=(4, 8),
                      grid_components=2, conditioning="row")
    field = NeRFField(cfg)
    assert field.trunk[0].in_features == 3 * 2 * 2
    opt = optimizer_from_config([field], TrainConfig(lrate=1e-3, encoding_lrate=2e-2))
    lrs = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    for name, p in field.named_parameters():
        assert lrs[id(p)] == pytest.approx(2e-2 if name.startswith("pos_encoding.") else 1e-3)
    x, d = torch.rand(64, 3) * 2 - 1, torch.nn.functional.normalize(torch.randn(64, 3), dim=-1)
    rgb, sigma = field(x, d)
    with torch.no_grad():  # rendering's path (compiled look-ups, ReLUs in place) gives the same values
        rgb0, sigma0 = field(x, d)
    torch.testing.assert_close(rgb0, rgb.detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(sigma0, sigma.detach(), rtol=0, atol=1e-6)
    losses = nerf_losses({"rgb": rgb}, torch.rand(64, 3), {"coarse": field}, tv_weight=0.5)
    assert float(losses["tv"].detach()) == pytest.approx(0.5 * float(field.pos_encoding.total_variation().detach()), rel=1e-6)
    sum(losses.values()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in field.pos_encoding.parameters())


def test_lrate_scale_multiplies_every_group_along_the_schedule():
    field = NeRFField(FieldConfig(netdepth=2, netwidth=16, view_width=8, encoding="triplane",
                                              grid_resolutions=(4,), grid_components=2))
    train = TrainConfig(lrate=1e-3, encoding_lrate=2e-2, lrate_decay=2, lrate_scale=0.5)
    opt = optimizer_from_config([field], train)
    assert set_learning_rates(opt, train, 1000) == pytest.approx(0.5 * 1e-3 * 0.1 ** 0.5)
    lrs = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    for name, p in field.named_parameters():
        base = 2e-2 if name.startswith("pos_encoding.") else 1e-3
        assert lrs[id(p)] == pytest.approx(0.5 * base * 10 ** -0.5)  # 10x per 2,000 steps, at step 1,000
    with pytest.raises(ConfigError, match="^lrate_scale must be"):
        TrainConfig(lrate_scale=0)
