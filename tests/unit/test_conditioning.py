"""Equilibrated weight conditioning against independent numpy computations.

The paper's layout is W in R^{n_{k-1} x n_k} (rows = input units); torch stores weight = W^T.
The numpy references below work in the paper's layout on purpose, so the layout mapping is
tested as well as the arithmetic.

What is and is not true (found numerically while writing these tests, numpy SVD, float64):
* Prop. 1, κ(EW) ≤ κ(W), is not a theorem: for plain Gaussian matrices it fails for about
  3-10 % of draws (10x6: row 28/300, col 17/300, rowcol 9/300; worst ratio 1.21). On badly
  row/column-scaled matrices (the case equilibration is for) it held in every draw (1,500 per
  mode). The tests assert the latter and that a counterexample to the former exists.
* Van der Sluis's theorem holds with its factor: κ(EA) ≤ sqrt(m) · κ(DA) for m rows and every
  positive diagonal D; the paper quotes it without sqrt(m). Against D drawn log-uniformly in
  [e^-3, e^3] the strict κ(EA) ≤ κ(DA) held in all 20,000 (A, D) pairs tried (shapes 12x5,
  12x12, 5x12, 30x8), and is asserted for the seeded cases here; for D close to E itself
  (E · e^{N(0, 0.3²)}) it fails in up to 13 % of pairs (worst ratio 1.25), and a Nelder-Mead
  search over D found min_D κ(DA) up to 2.1x below κ(EA) (still below sqrt(m)). So E is a
  good, not an optimal, diagonal scaling; a counterexample is asserted too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.config import FieldConfig
from enerf.errors import ConfigError
from enerf.nn.conditioning import (
    CONDITIONERS,
    ConditionedLinear,
    condition_number,
    condition_numbers,
    fold_module,
)
from equilibration_reference import MODES, conditioned, eq_rows, kappa, layer_with, paper_reference


@pytest.mark.parametrize("mode,passes", [("none", 1), ("row", 1), ("col", 1), ("rowcol", 1), ("rowcol", 3)])
def test_conditioned_weight_matches_paper_layout_reference(mode, passes):
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((7, 5)) * np.exp(rng.uniform(-2, 2, (1, 5))) * np.exp(rng.uniform(-2, 2, (7, 1)))
    got = conditioned(weight, mode, passes=passes)
    np.testing.assert_allclose(got, paper_reference(weight, mode, passes), rtol=1e-12, atol=1e-12)
    # The registry functions give the same thing as the layer.
    direct = CONDITIONERS[mode](torch.from_numpy(weight), 1e-8, passes).numpy()
    np.testing.assert_allclose(direct, got, rtol=0, atol=0)


def test_row_mode_normalises_input_columns_in_torch_layout():
    """Hand example: row = the paper's rows = inputs = torch columns weight[:, i]."""
    weight = np.array([[3.0, 0.0, 1.0], [4.0, 2.0, -1.0]])  # [out=2, in=3]
    expected_row = np.array([[0.6, 0.0, 1 / np.sqrt(2)], [0.8, 1.0, -1 / np.sqrt(2)]])
    np.testing.assert_allclose(conditioned(weight, "row"), expected_row, rtol=1e-12)
    expected_col = weight / np.array([[np.sqrt(10.0)], [np.sqrt(21.0)]])
    np.testing.assert_allclose(conditioned(weight, "col"), expected_col, rtol=1e-12)


def test_equilibrated_norms():
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((6, 9)) * 10.0 ** rng.uniform(-3, 3, (6, 9))  # torch [out, in]
    row = conditioned(weight, "row").T  # paper layout [9, 6]
    col = conditioned(weight, "col").T
    np.testing.assert_allclose(np.linalg.norm(row, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(col, axis=0), 1.0, rtol=1e-12)

    square = rng.standard_normal((8, 8)) * 10.0 ** rng.uniform(-2, 2, (8, 8))
    one = conditioned(square, "rowcol", passes=1).T
    many = conditioned(square, "rowcol", passes=200).T
    np.testing.assert_allclose(np.linalg.norm(many, axis=0), 1.0, rtol=1e-12)  # col is applied last
    np.testing.assert_allclose(np.linalg.norm(many, axis=1), 1.0, rtol=1e-6)
    err_one = np.abs(np.linalg.norm(one, axis=1) - 1).max()
    assert np.abs(np.linalg.norm(many, axis=1) - 1).max() < err_one

    # A 9x6 matrix cannot have unit rows and unit columns (squared norms sum to 9 vs 6): the
    # alternating passes converge to unit columns and rows of equal norm sqrt(6/9).
    many_rect = conditioned(weight, "rowcol", passes=200).T
    np.testing.assert_allclose(np.linalg.norm(many_rect, axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(many_rect, axis=1), np.sqrt(6 / 9), rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
def test_proposition_1_on_badly_scaled_matrices(mode):
    rng = np.random.default_rng(2)
    for _ in range(60):
        n_in, n_out = rng.integers(3, 20, size=2)
        paper = rng.standard_normal((n_in, n_out))
        if mode in ("row", "rowcol"):
            paper = paper * np.exp(rng.uniform(-4, 4, (n_in, 1)))
        if mode in ("col", "rowcol"):
            paper = paper * np.exp(rng.uniform(-4, 4, (1, n_out)))
        kappa_w, kappa_ew = condition_number(layer_with(paper.T, mode))
        assert kappa_w == pytest.approx(kappa(paper), rel=1e-9)
        assert kappa_ew == pytest.approx(kappa(paper_reference(paper.T, mode)), rel=1e-9)
        assert kappa_ew <= kappa_w


def test_proposition_1_is_not_a_theorem_for_every_matrix():
    rng = np.random.default_rng(4)
    worse = [kappa(eq_rows(a)) / kappa(a) for a in (rng.standard_normal((10, 6)) for _ in range(100))]
    assert max(worse) > 1.0  # a seeded Gaussian counterexample to κ(EW) ≤ κ(W)
    assert np.mean(np.array(worse) <= 1.0) > 0.8  # ... but most draws improve


def test_van_der_sluis_row_equilibration_against_random_diagonal_scalings():
    rng = np.random.default_rng(3)
    for shape in [(12, 5), (12, 12), (5, 12)]:
        m = shape[0]
        for _ in range(25):
            a = rng.standard_normal(shape) * np.exp(rng.uniform(-3, 3, (m, 1)))
            kappa_ea = condition_number(layer_with(a.T, "row"))[1]
            for _ in range(30):
                d = np.exp(rng.uniform(-3, 3, (m, 1)))
                kappa_da = kappa(d * a)
                # Van der Sluis (Thm 5.1 with the factor the paper omits).
                assert kappa_ea <= np.sqrt(m) * kappa_da * (1 + 1e-12)
                # The strict form holds for every one of these seeded, widely spread D.
                assert kappa_ea <= kappa_da * (1 + 1e-12)


def test_van_der_sluis_strict_form_fails_near_e_but_the_sqrt_bound_holds():
    rng = np.random.default_rng(5)
    ratios = []
    for _ in range(40):
        a = rng.standard_normal((12, 5))
        e = 1.0 / np.linalg.norm(a, axis=1, keepdims=True)
        kappa_ea = kappa(e * a)
        for _ in range(25):
            ratios.append(kappa_ea / kappa(e * np.exp(rng.normal(0.0, 0.3, (12, 1))) * a))
    assert max(ratios) > 1.0  # some D beats E: equilibration is not the optimal diagonal scaling
    assert max(ratios) <= np.sqrt(12)


@pytest.mark.parametrize("mode", ["none", *MODES])
def test_fold_gives_the_same_outputs(mode):
    torch.manual_seed(0)
    layer = ConditionedLinear(13, 9, conditioning=mode, passes=2)
    x = torch.randn(64, 13)
    folded = layer.fold()
    assert type(folded) is torch.nn.Linear and folded.weight.requires_grad
    torch.testing.assert_close(folded(x), layer(x), rtol=0, atol=1e-6)
    torch.testing.assert_close(folded.weight, layer.conditioned_weight().detach(), rtol=0, atol=0)
    assert folded.weight.data_ptr() != layer.weight.data_ptr()
    nobias = ConditionedLinear(4, 3, bias=False, conditioning=mode).double()
    x64 = torch.randn(5, 4, dtype=torch.float64)
    torch.testing.assert_close(nobias.fold()(x64), nobias(x64), rtol=0, atol=1e-12)


def test_fold_module_on_a_nerf_field_and_into_a_vanilla_field():
    from enerf.fields.nerf import NeRFField

    torch.manual_seed(0)
    kwargs = dict(netdepth=3, netwidth=16, skips=(1,), multires=2, multires_views=1, view_width=8)
    field = NeRFField(FieldConfig(**kwargs, conditioning="rowcol", conditioned_layers="all"))
    folded = fold_module(field)
    assert not any(isinstance(m, ConditionedLinear) for m in folded.modules())
    assert any(isinstance(m, ConditionedLinear) for m in field.modules())  # the original is untouched
    x, d = torch.randn(50, 3), torch.nn.functional.normalize(torch.randn(50, 3), dim=-1)
    expected = field(x, d)
    for a, b in zip(expected, folded(x, d)):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-6)
    vanilla = NeRFField(FieldConfig(**kwargs))
    vanilla.load_state_dict(folded.state_dict())
    for a, b in zip(expected, vanilla(x, d)):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_zero_rows_and_columns_stay_finite(mode):
    weight = np.zeros((4, 3))
    weight[0, 0] = 2.0
    layer = layer_with(weight, mode)
    out = layer.conditioned_weight()
    assert torch.isfinite(out).all() and out[0, 0].item() == pytest.approx(1.0)
    assert (out.detach().numpy()[1:] == 0).all() and (out.detach().numpy()[:, 1:] == 0).all()
    layer(torch.randn(2, 3, dtype=torch.float64)).sum().backward()
    assert torch.isfinite(layer.weight.grad).all()
    assert condition_number(layer) == (float("inf"), float("inf"))


def test_condition_numbers_listing_repr_and_config_errors():
    net = torch.nn.Sequential(
        ConditionedLinear(3, 4, conditioning="row"), torch.nn.ReLU(), ConditionedLinear(4, 2, conditioning="rowcol")
    )
    kappas = condition_numbers(net)
    assert set(kappas) == {"0", "2"}
    w = net[0].weight.detach().double().numpy()
    assert kappas["0"][0] == pytest.approx(kappa(w), rel=1e-9)
    assert kappas["0"][1] == pytest.approx(kappa(eq_rows(w.T)), rel=1e-5)  # E W formed in float32
    assert "conditioning=row" in repr(net[0]) and "passes=1" in repr(net[2])
    for bad in (dict(conditioning="diagonal"), dict(conditioning="row", passes=0), dict(eps=0.0)):
        with pytest.raises(ConfigError) as info:
            ConditionedLinear(3, 4, **bad)
        assert "\n" not in str(info.value)
