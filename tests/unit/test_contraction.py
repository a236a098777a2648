"""Scene contraction (enerf.nn.contraction) against numpy, analytic properties, and its place in the field."""

import dataclasses

import numpy as np
import pytest
import torch

from enerf.config import CONTRACTIONS as CONFIG_CONTRACTIONS
from enerf.config import FieldConfig
from enerf.fields.nerf import NeRFField
from enerf.nn.contraction import CONTRACTED_BOX, CONTRACTIONS, contract


def numpy_contract(x: np.ndarray, order: float) -> np.ndarray:
    """mip-NeRF 360 eq. 10 with the given norm, one point at a time (float64)."""
    out = np.empty_like(x)
    for i, p in enumerate(x):
        n = np.linalg.norm(p, ord=order)
        out[i] = p if n <= 1 else (2.0 - 1.0 / n) * p / n
    return out


def _points(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(n, 3))
    radii = np.exp(rng.uniform(np.log(1e-3), np.log(1e4), size=(n, 1)))  # from near the origin to very far
    return dirs / np.linalg.norm(dirs, axis=1, keepdims=True) * radii


def test_choices_agree_with_the_config():
    assert tuple(CONTRACTIONS) == tuple(CONFIG_CONTRACTIONS)


@pytest.mark.parametrize("kind, order", [("mipnerf360", 2), ("linf", np.inf)])
def test_matches_numpy(kind, order):
    x = _points()
    got = contract(torch.tensor(x), kind).numpy()
    np.testing.assert_allclose(got, numpy_contract(x, order), rtol=1e-12, atol=1e-12)
    got32 = contract(torch.tensor(x, dtype=torch.float32), kind).numpy()
    np.testing.assert_allclose(got32, numpy_contract(x, order), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind, order", [("mipnerf360", 2), ("linf", np.inf)])
def test_analytic_properties(kind, order):
    x = torch.tensor(_points(seed=1))
    y = contract(x, kind)
    norm_x = torch.linalg.vector_norm(x, ord=order, dim=-1)
    norm_y = torch.linalg.vector_norm(y, ord=order, dim=-1)
    inside = norm_x <= 1
    assert inside.any() and (~inside).any()
    assert torch.equal(y[inside], x[inside])  # identity in the unit ball / cube
    assert bool((norm_y < 2).all())  # everything lands inside radius 2
    # Directions kept; outside, the norm is 2 - 1 / |x|.
    cos = (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1))
    np.testing.assert_allclose(cos.numpy(), 1.0, atol=1e-12)
    np.testing.assert_allclose(norm_y[~inside].numpy(), (2 - 1 / norm_x[~inside]).numpy(), rtol=1e-12)
    # Inside the box every contraction leaves the point within CONTRACTED_BOX.
    lo, hi = torch.tensor(CONTRACTED_BOX[:3], dtype=y.dtype), torch.tensor(CONTRACTED_BOX[3:], dtype=y.dtype)
    assert bool(((y > lo) & (y < hi)).all())


@pytest.mark.parametrize("kind", ["mipnerf360", "linf"])
def test_continuous_at_the_unit_sphere(kind):
    order = 2 if kind == "mipnerf360" else np.inf
    u = torch.tensor(_points(500, seed=2))
    u = u / torch.linalg.vector_norm(u, ord=order, dim=-1, keepdim=True)  # on the unit sphere of the norm
    for eps in (1e-6, 1e-9):
        below, above = contract(u * (1 - eps), kind), contract(u * (1 + eps), kind)
        assert float((below - above).abs().max()) < 5 * eps


@pytest.mark.parametrize("kind", ["mipnerf360", "linf"])
def test_monotone_along_rays(kind):
    """Along any ray o + t d, the distance travelled in contracted space only grows (the map is
    injective and continuous, so contracted samples stay in the order of t)."""
    gen = torch.Generator().manual_seed(3)
    origins = torch.rand(200, 3, generator=gen, dtype=torch.float64) * 2 - 1  # cameras inside the unit box
    dirs = torch.nn.functional.normalize(torch.randn(200, 3, generator=gen, dtype=torch.float64), dim=-1)
    t = torch.logspace(-3, 4, 400, dtype=torch.float64)
    y = contract(origins[:, None] + t[None, :, None] * dirs[:, None], kind)  # [200, 400, 3]
    along = (y - y[:, :1]).norm(dim=-1)
    step = (y[:, 1:] - y[:, :-1]).norm(dim=-1)
    assert bool((step > 0).all())
    # The contracted path from the origin along a radial ray: |contract(t d)| is increasing in t.
    radial = contract(t[:, None] * dirs[0], kind).norm(dim=-1)
    assert bool((radial[1:] > radial[:-1]).all())
    assert float(along[:, -1].min()) > 0.5  # the far end is well away from the start in contracted space


def test_gradients_finite_at_the_origin_and_far():
    x = torch.tensor([[0.0, 0.0, 0.0], [1e8, -3e7, 2.0], [1.0, 0.0, 0.0]], dtype=torch.float64, requires_grad=True)
    for kind in ("mipnerf360", "linf"):
        (g,) = torch.autograd.grad(contract(x, kind).sum(), x)
        assert bool(torch.isfinite(g).all())
        assert torch.equal(g[0], torch.ones(3, dtype=torch.float64))  # identity near the origin


def test_none_is_the_field_of_before():
    """contraction none: the same weights and outputs as a config without the option."""
    cfg = FieldConfig(netdepth=2, netwidth=16, multires=4, multires_views=2, view_width=8)
    assert cfg.contraction == "none"
    torch.manual_seed(0)
    a = NeRFField(cfg)
    torch.manual_seed(0)
    b = NeRFField(dataclasses.replace(cfg, contraction="mipnerf360"))
    assert a.contraction is None and list(a.state_dict()) == list(b.state_dict())
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(va, vb), k
    x = torch.rand(64, 3) * 1.6 - 0.8  # within the unit ball: both fields agree
    x = x[x.norm(dim=-1) < 1]
    d = torch.nn.functional.normalize(torch.randn(x.shape[0], 3), dim=-1)
    assert torch.equal(a(x, d)[1], b(x, d)[1])
    far = torch.tensor([[30.0, -4.0, 2.0]])  # outside: the contracted field reads contract(far)
    assert torch.equal(b.density(far)[0], a.density(contract(far))[0])


@pytest.mark.parametrize("kind", ["mipnerf360", "linf"])
def test_triplane_covers_the_contracted_box(kind):
    cfg = FieldConfig(netdepth=1, netwidth=8, encoding="triplane", grid_resolutions=(8,), grid_components=2,
                      view_width=4, contraction=kind)
    field = NeRFField(cfg)
    enc = field.pos_encoding
    np.testing.assert_allclose(enc.lo.numpy(), [-2.0, -2.0, -2.0])
    np.testing.assert_allclose(enc.scale.numpy(), [0.5, 0.5, 0.5])  # 2 / (hi - lo)
    # Far points read distinct features (no clamping at the border as without contraction).
    pts = torch.tensor([[5.0, 0.0, 0.0], [50.0, 0.0, 0.0], [500.0, 0.0, 0.0]])
    with torch.no_grad():
        h = enc(field.contraction(pts))
    assert float((h[0] - h[1]).abs().max()) > 0 and float((h[1] - h[2]).abs().max()) > 0


def test_piecewise_spacing_matches_nerfacto():
    """lindisp_from = c: s evenly spaced in g(t) (t / 2c before c, 1 - c / 2t beyond), computed here
    independently in numpy; half of the samples of [0, inf) fall before c."""
    from enerf.render.sampling import stratified_samples

    near, far, n, c = 0.05, 1000.0, 64, 1.5
    t = stratified_samples(torch.full((3, 1), near, dtype=torch.float64), torch.full((3, 1), far, dtype=torch.float64),
                           n, False, False, None, c).numpy()
    g = lambda x: x / (2 * c) if x < c else 1 - c / (2 * x)  # noqa: E731
    expected = []
    for u in np.linspace(g(near), g(far), n):
        expected.append(2 * c * u if u < 0.5 else c / (2 * (1 - u)))
    np.testing.assert_allclose(t[0], expected, rtol=1e-12)
    assert t[0, 0] == pytest.approx(near) and t[0, -1] == pytest.approx(far)
    assert np.all(np.diff(t[0]) > 0)
    t_all = stratified_samples(torch.zeros(1, 1, dtype=torch.float64), torch.full((1, 1), 1e12, dtype=torch.float64),
                               10, False, False, None, c).numpy()[0]
    assert (t_all < c).sum() == 5
    jittered = stratified_samples(torch.full((4, 1), near), torch.full((4, 1), far), n, True, False,
                                  torch.Generator().manual_seed(0), c)
    assert bool((jittered[:, 1:] >= jittered[:, :-1]).all()) and float(jittered.min()) >= near


def test_lindisp_and_lindisp_from_are_exclusive():
    from enerf.config import RenderConfig
    from enerf.errors import ConfigError

    with pytest.raises(ConfigError, match="one of them"):
        RenderConfig(lindisp=True, lindisp_from=1.0)
