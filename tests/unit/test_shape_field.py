"""Shape networks: layer layout against a numpy forward pass, losses against hand formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.config import ShapeFieldConfig

from enerf.config import FieldConfig

from enerf.errors import ConfigError
from enerf.fields.shape import ShapeField
from enerf.shapes.extract import extract_mesh
from enerf.shapes.losses import shape_losses


def _numpy_forward(field: ShapeField, x: np.ndarray, row_layers: set[str]) -> np.ndarray:
    """Independent forward pass: row equilibration = unit-norm input columns of weight [out, in]."""
    enc = [x]
    for k in range(field.encoding.n_freqs):
        enc += [np.sin(2.0**k * x), np.cos(2.0**k * x)]
    encoded = np.concatenate(enc, axis=-1)
    h = encoded
    for name, layer in zip(field.layer_names(), [*field.hidden, field.output]):
        w = layer.weight.detach().double().numpy()
        if name in row_layers:
            w = w / np.linalg.norm(w, axis=0, keepdims=True)
        h = h @ w.T + layer.bias.detach().double().numpy()
        if name != "output":
            h = np.maximum(h, 0.0)
            i = int(name.split(".")[1])
            if i in field.skips:
                h = np.concatenate([encoded, h], axis=-1)
    return h[:, 0]


def test_forward_matches_numpy_with_skip_and_encoding():
    torch.manual_seed(0)
    field = ShapeField(ShapeFieldConfig(netdepth=4, netwidth=16, skips=(1,), multires=3, conditioning="row")).double()
    assert field.layer_names() == ["hidden.0", "hidden.1", "hidden.2", "hidden.3", "output"]
    assert field.hidden[2].in_features == 16 + 3 * 7 and field.output.conditioning == "none"
    x = np.random.default_rng(0).uniform(-0.5, 0.5, (32, 3))
    out = field(torch.from_numpy(x)).detach().numpy()
    expected = _numpy_forward(field, x, {f"hidden.{i}" for i in range(4)})
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_conditioned_layers_selection_and_bad_values():
    f = ShapeField(ShapeFieldConfig(netdepth=2, netwidth=8, skips=(), conditioning="col", conditioned_layers="hidden.1,output"))
    assert [m.conditioning for m in [*f.hidden, f.output]] == ["none", "col", "col"]
    with pytest.raises(ConfigError, match="unknown layer"):
        ShapeField(ShapeFieldConfig(netdepth=2, netwidth=8, conditioned_layers="trunk.0"))
    with pytest.raises(ConfigError, match="^kind 'density' is not one of occupancy, sdf$"):
        ShapeField(ShapeFieldConfig(kind="density"))
    with pytest.raises(ConfigError, match=r"^skips must be in 0\.\.1 \(or >= 3, ignored\) for netdepth 3, got 2$"):
        ShapeField(ShapeFieldConfig(netdepth=3, skips=(2,)))


def test_losses_match_hand_formulas():
    torch.manual_seed(1)
    x = torch.rand(64, 3) - 0.5
    occ = (torch.rand(64) > 0.5).float()
    sdf = torch.randn(64) * 0.2
    f_occ = ShapeField(ShapeFieldConfig(kind="occupancy", netdepth=2, netwidth=8, skips=()))
    logits = f_occ(x).detach().double().numpy()
    p = 1 / (1 + np.exp(-logits))
    y = occ.double().numpy()
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()
    assert shape_losses(f_occ, x, occ, sdf, 0.1, 0.0)["bce"].item() == pytest.approx(bce, rel=1e-5)

    f_sdf = ShapeField(ShapeFieldConfig(kind="sdf", netdepth=2, netwidth=8, skips=(), activation="softplus")).double()
    xd = x.double()
    losses = shape_losses(f_sdf, xd, occ.double(), sdf.double(), 0.1, 0.5)
    pred = f_sdf(xd).detach().numpy()
    l1 = np.abs(np.clip(pred, -0.1, 0.1) - np.clip(sdf.double().numpy(), -0.1, 0.1)).mean()
    assert losses["l1"].item() == pytest.approx(l1, rel=1e-9)
    # eikonal: gradient by central differences
    eps = 1e-6
    grad = np.stack([(f_sdf(xd + eps * e).detach().numpy() - f_sdf(xd - eps * e).detach().numpy()) / (2 * eps)
                     for e in torch.eye(3, dtype=torch.float64)], axis=1)
    eik = 0.5 * ((np.linalg.norm(grad, axis=1) - 1) ** 2).mean()
    assert losses["eikonal"].item() == pytest.approx(eik, rel=1e-5)


def test_extracted_surface_follows_the_iso_conventions_on_a_plane():
    """f(x) = x_0 - 0.13 as an SDF (level 0, solid below) and as occupancy logits 50 (0.13 - x_0)
    (level 0.5 of the sigmoid, solid above): both give the plane x_0 = 0.13 with +x normals."""
    f = ShapeField(ShapeFieldConfig(kind="sdf", netdepth=1, netwidth=2, skips=()))
    with torch.no_grad():
        f.hidden[0].weight.zero_()
        f.hidden[0].weight[0, 0], f.hidden[0].weight[1, 0] = 1.0, -1.0
        f.hidden[0].bias.zero_()
        f.output.weight.copy_(torch.tensor([[1.0, -1.0]]))  # relu(x) - relu(-x) = x
        f.output.bias.fill_(-0.13)
    mesh = extract_mesh(f, np.full(3, -0.5), np.full(3, 0.5), 11, torch.device("cpu"))
    np.testing.assert_allclose(mesh.vertices[:, 0], 0.13, atol=1e-6)  # linear between grid points
    assert np.all(mesh.face_normals[:, 0] > 0.99)  # the solid is x < 0.13: normals point to +x

    occ = ShapeField(ShapeFieldConfig(kind="occupancy", netdepth=1, netwidth=2, skips=()))
    occ.load_state_dict(f.state_dict())
    with torch.no_grad():
        occ.output.weight.mul_(-50.0)
        occ.output.bias.fill_(6.5)
    mesh = extract_mesh(occ, np.full(3, -0.5), np.full(3, 0.5), 11, torch.device("cpu"))
    s1, s2 = (1 / (1 + np.exp(-50 * (0.13 - x))) for x in (0.1, 0.2))  # probabilities at the grid points
    expected = 0.1 + 0.1 * (s1 - 0.5) / (s1 - s2)  # marching cubes interpolates linearly
    np.testing.assert_allclose(mesh.vertices[:, 0], expected, atol=1e-5)
    assert np.all(mesh.face_normals[:, 0] > 0.99)
