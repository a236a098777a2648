"""NeRF field: architecture arithmetic, a numpy forward pass, layer selection, encodings, ranges."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.config import FieldConfig
from enerf.errors import ConfigError
from enerf.fields.nerf import NeRFField
from enerf.nn.conditioning import ConditionedLinear
from enerf.nn.encoding import PositionalEncoding

SMALL = dict(netdepth=4, netwidth=16, skips=(1,), multires=3, multires_views=2, view_width=8)


def nerf_pytorch_param_count(D, W, skips, L_pos, L_dir, view_width, use_viewdirs):
    """Parameters of nerf-pytorch's NeRF, written out from its __init__ (pts_linears, ...).

    nerf-pytorch also builds an unused ``views_linears`` when use_viewdirs is False; that
    dead layer is not part of the architecture and is not counted.
    """
    in_ch, dir_ch = 3 + 6 * L_pos, 3 + 6 * L_dir
    total = in_ch * W + W  # pts_linears[0]
    for i in range(D - 1):  # pts_linears[i + 1]
        fan_in = W + in_ch if i in skips else W
        total += fan_in * W + W
    if use_viewdirs:
        total += W * 1 + 1  # alpha_linear
        total += W * W + W  # feature_linear
        total += (W + dir_ch) * view_width + view_width  # views_linears[0]
        total += view_width * 3 + 3  # rgb_linear
    else:
        total += W * 4 + 4  # output_linear
    return total


def numpy_encoding(x: np.ndarray, n_freqs: int) -> np.ndarray:
    parts = [x]
    for k in range(n_freqs):
        parts += [np.sin(2.0**k * x), np.cos(2.0**k * x)]
    return np.concatenate(parts, axis=-1)


def numpy_nerf(field: NeRFField, x: np.ndarray, d: np.ndarray, L_pos: int, L_dir: int, skips) -> tuple:
    """nerf-pytorch's NeRF.forward + raw2outputs activations, in numpy, from the folded weights."""
    layers = {name: (m.conditioned_weight().detach().double().numpy(), m.bias.detach().double().numpy())
              for name, m in field.named_modules() if isinstance(m, ConditionedLinear)}
    dense = lambda name, h: h @ layers[name][0].T + layers[name][1]
    relu = lambda v: np.maximum(v, 0.0)
    pts = numpy_encoding(x, L_pos)
    h = pts
    n_trunk = sum(name.startswith("trunk.") for name in layers)
    for i in range(n_trunk):
        h = relu(dense(f"trunk.{i}", h))
        if i in skips:
            h = np.concatenate([pts, h], axis=-1)
    if "output" in layers:
        raw = dense("output", h)
        return 1 / (1 + np.exp(-raw[..., :3])), relu(raw[..., 3])
    sigma = relu(dense("density_head", h)[..., 0])
    v = relu(dense("view.0", np.concatenate([dense("feature", h), numpy_encoding(d, L_dir)], axis=-1)))
    return 1 / (1 + np.exp(-dense("rgb_head", v))), sigma


@pytest.mark.parametrize("use_viewdirs", [True, False])
def test_parameter_count_matches_nerf_pytorch(use_viewdirs):
    field = NeRFField(FieldConfig(use_viewdirs=use_viewdirs))
    expected = nerf_pytorch_param_count(8, 256, (4,), 10, 4, 128, use_viewdirs)
    assert sum(p.numel() for p in field.parameters()) == expected
    assert expected == (595844 if use_viewdirs else 494084)  # hand-summed once for 8x256
    assert field.trunk[0].in_features == 63
    assert field.trunk[5].in_features == 256 + 63  # the skip after trunk.4 re-reads gamma(x)
    assert [field.trunk[i].in_features for i in (1, 2, 3, 4, 6, 7)] == [256] * 6
    if use_viewdirs:
        assert field.view[0].in_features == 256 + 27


@pytest.mark.parametrize("use_viewdirs", [True, False])
@pytest.mark.parametrize("conditioning", ["none", "rowcol"])
def test_forward_matches_a_numpy_nerf(use_viewdirs, conditioning):
    torch.manual_seed(0)
    field = NeRFField(FieldConfig(**SMALL, use_viewdirs=use_viewdirs, conditioning=conditioning)).double()
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (11, 3))
    d = rng.standard_normal((11, 3))
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    rgb, sigma = field(torch.from_numpy(x), torch.from_numpy(d))
    rgb_np, sigma_np = numpy_nerf(field, x, d, 3, 2, (1,))
    np.testing.assert_allclose(rgb.detach().numpy(), rgb_np, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sigma.detach().numpy(), sigma_np, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(field.density(torch.from_numpy(x))[0].detach().numpy(), sigma_np, atol=1e-12)


def test_outputs_have_the_right_shapes_and_ranges():
    torch.manual_seed(0)
    field = NeRFField(FieldConfig(**SMALL, conditioning="row"))
    x = torch.randn(7, 5, 3) * 3
    d = torch.nn.functional.normalize(torch.randn(7, 5, 3), dim=-1)
    rgb, sigma = field(x, d)
    assert rgb.shape == (7, 5, 3) and sigma.shape == (7, 5)
    assert (rgb >= 0).all() and (rgb <= 1).all() and (sigma >= 0).all()
    assert (sigma > 0).any()  # not all clipped away
    torch.testing.assert_close(field.density(x)[0], sigma)
    torch.manual_seed(1)
    noisy = field.density(x, noise_std=1.0)[0]
    assert noisy.shape == (7, 5) and (noisy >= 0).all() and not torch.equal(noisy, sigma)
    # The noise is added before the relu: with the raw density known, relu(raw + n) is exact.
    with torch.no_grad():
        raw = field.density_head(field._trunk(x))[..., 0]
    torch.manual_seed(1)
    torch.testing.assert_close(noisy, torch.relu(raw + torch.randn_like(raw)))


def test_conditioned_layers_selection_and_names():
    def modes(**kwargs):
        field = NeRFField(FieldConfig(netdepth=4, netwidth=8, **kwargs))
        return {n: m.conditioning for n, m in field.named_modules() if isinstance(m, ConditionedLinear)}

    names = ["trunk.0", "trunk.1", "trunk.2", "trunk.3", "density_head", "feature", "view.0", "rgb_head"]
    assert NeRFField(FieldConfig(netdepth=4, netwidth=8)).layer_names() == names
    assert NeRFField(FieldConfig(netdepth=2, netwidth=8, use_viewdirs=False)).layer_names() == ["trunk.0", "trunk.1", "output"]

    hidden = modes(conditioning="col")
    assert hidden == {n: ("col" if n.startswith("trunk.") else "none") for n in names}
    assert set(modes(conditioning="col", conditioned_layers="all").values()) == {"col"}
    assert set(modes(conditioning="col", conditioned_layers="none").values()) == {"none"}
    picked = modes(conditioning="row", conditioned_layers="feature, rgb_head")
    assert {n for n, c in picked.items() if c == "row"} == {"feature", "rgb_head"}
    mixed = modes(conditioning="rowcol", conditioned_layers="hidden,view.0")
    assert {n for n, c in mixed.items() if c == "rowcol"} == set(names[:4]) | {"view.0"}
    with pytest.raises(ConfigError, match="trunk.9") as info:
        NeRFField(FieldConfig(netdepth=4, netwidth=8, conditioning="row", conditioned_layers="trunk.0,trunk.9"))
    assert "\n" not in str(info.value)


def test_from_config_passes_every_field():
    cfg = FieldConfig(netdepth=3, netwidth=12, skips=(0,), multires=2, multires_views=1, view_width=6,
                      conditioning="rowcol", conditioned_layers="all", detach_conditioner=True,
                      conditioning_passes=3)
    field = NeRFField(cfg)
    layers = [m for m in field.modules() if isinstance(m, ConditionedLinear)]
    assert len(layers) == 7 and all(
        (m.conditioning, m.detach_conditioner, m.passes, m.eps) == ("rowcol", True, 3, 1e-8) for m in layers
    )
    assert field.trunk[1].in_features == 12 + 15 and field.view[0].in_features == 12 + 9
    assert field.rgb_head.in_features == 6


def test_skips_beyond_the_trunk_are_inert_and_after_the_last_layer_rejected():
    shallow = NeRFField(FieldConfig(netdepth=4, netwidth=8, multires=1, skips=(4,)))  # as nerf-pytorch with D=4
    assert shallow.skips == () and [m.in_features for m in shallow.trunk] == [9, 8, 8, 8]
    with pytest.raises(ConfigError, match="skips"):
        NeRFField(FieldConfig(netdepth=4, netwidth=8, skips=(3,)))  # the heads would get W + in_ch inputs


def test_row_conditioned_density_head_collapses_to_sign():
    """The documented degenerate case: a single-output layer under row equilibration."""
    field = NeRFField(FieldConfig(netdepth=2, netwidth=8, skips=(), conditioning="row", conditioned_layers="density_head"))
    w = field.density_head.weight.detach()
    torch.testing.assert_close(field.density_head.conditioned_weight().detach(), torch.sign(w))


def test_positional_encoding_hand_example():
    x = np.array([[0.5, -1.0, 2.0]])
    # Written out by hand for L = 2: [x, sin x, cos x, sin 2x, cos 2x].
    expected = np.array([[0.5, -1.0, 2.0,
                          np.sin(0.5), np.sin(-1.0), np.sin(2.0), np.cos(0.5), np.cos(-1.0), np.cos(2.0),
                          np.sin(1.0), np.sin(-2.0), np.sin(4.0), np.cos(1.0), np.cos(-2.0), np.cos(4.0)]])
    enc = PositionalEncoding(2)
    assert enc.out_dim == 15
    np.testing.assert_allclose(enc(torch.from_numpy(x)).numpy(), expected, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(PositionalEncoding(2, include_input=False)(torch.from_numpy(x)).numpy(),
                               expected[:, 3:], rtol=1e-15, atol=1e-15)
    assert PositionalEncoding(2, include_input=False).out_dim == 12


def test_positional_encoding_against_numpy_and_identity():
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (4, 6, 3)).astype(np.float32)
    enc = PositionalEncoding(10)
    assert enc.out_dim == 63
    got = enc(torch.from_numpy(x))
    assert got.shape == (4, 6, 63) and got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), numpy_encoding(x.astype(np.float64), 10), atol=1e-5)
    torch.testing.assert_close(PositionalEncoding(0)(torch.from_numpy(x)), torch.from_numpy(x))
    assert PositionalEncoding(0).out_dim == 3


def test_mean_density_is_the_expected_noisy_relu():
    """E[relu(raw + N(0, s^2))] against numerical integration (scipy), and relu(raw) at s = 0."""
    from scipy import integrate, stats

    torch.manual_seed(0)
    field = NeRFField(FieldConfig(netdepth=2, netwidth=16, skips=(), multires=2, multires_views=1, view_width=8)).double()
    x = torch.randn(6, 3, dtype=torch.float64)
    with torch.no_grad():
        field.density_head.weight.mul_(30.0)  # raw densities of both signs, a few units apart
        field.density_head.bias.fill_(-0.3)
        raw = field._raw_density(x).numpy()
        for s in (0.3, 1.0):
            expected = [integrate.quad(lambda n, r=r: max(r + n, 0.0) * stats.norm.pdf(n, scale=s), -12 * s, 12 * s,
                                       points=[-r], limit=200)[0] for r in raw]
            np.testing.assert_allclose(field.mean_density(x, s).numpy(), expected, rtol=1e-7, atol=1e-10)
            assert (field.mean_density(x, s) > 0).all()
        np.testing.assert_allclose(field.mean_density(x, 0.0).numpy(), np.maximum(raw, 0.0))
        assert (raw < 0).any() and (raw > 0).any()
