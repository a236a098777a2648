"""wn / ws conditioning against their formulas (numpy), double backprop through the
equilibration, the config / CLI plumbing of the new methods, and the Hessian κ tool."""

from __future__ import annotations


import numpy as np
import pytest
import torch

from enerf.cli import build_train_parser, run_config_from_args
from enerf.config import FieldConfig, TrainConfig
from enerf.errors import ConfigError
from enerf.fields.nerf import NeRFField
from enerf.nn.conditioning import ConditionedLinear, condition_number, fold_module



def numpy_wn(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Salimans & Kingma eq. 2 in torch layout: w_j = g_j v_j / ||v_j|| per output row j."""
    return g.reshape(-1, 1) * v / np.sqrt((v ** 2).sum(axis=1, keepdims=True))


def numpy_ws(w: np.ndarray, eps: float) -> np.ndarray:
    """Qiao et al. eq. 5: per output row, subtract the mean and divide by sqrt(var + eps)."""
    n = w.shape[1]
    mean = w.sum(axis=1, keepdims=True) / n
    var = ((w - mean) ** 2).sum(axis=1, keepdims=True) / n
    return (w - mean) / np.sqrt(var + eps)


def test_wn_matches_formula_and_torch_semantics():
    torch.manual_seed(0)
    layer = ConditionedLinear(7, 5, conditioning="wn").double()
    plain = torch.nn.Linear(7, 5).double()
    # torch's weight_norm initialises g = ||v||, so the layer starts as the plain one would
    v = layer.parametrizations.weight.original1.detach().numpy()
    np.testing.assert_allclose(layer.weight.detach().numpy(), v, rtol=1e-6)  # g = ||v|| held in float32
    with torch.no_grad():
        layer.parametrizations.weight.original0.copy_(torch.rand(5, 1, dtype=torch.float64) * 3 + 0.1)
        layer.parametrizations.weight.original1.mul_(torch.rand(5, 1, dtype=torch.float64) * 10)
    g = layer.parametrizations.weight.original0.detach().numpy()
    v = layer.parametrizations.weight.original1.detach().numpy()
    x = torch.randn(11, 7, dtype=torch.float64)
    expected = x.numpy() @ numpy_wn(g, v).T + layer.bias.detach().numpy()
    np.testing.assert_allclose(layer(x).detach().numpy(), expected, rtol=1e-10, atol=1e-12)
    # the same numbers as torch's own nn.utils.parametrizations.weight_norm on a plain layer
    torch.nn.utils.parametrizations.weight_norm(plain, dim=0)
    plain.load_state_dict(layer.state_dict())
    torch.testing.assert_close(plain(x), layer(x), rtol=0, atol=0)
    # both g and v are trained
    layer(x).sum().backward()
    assert layer.parametrizations.weight.original0.grad.abs().sum() > 0
    assert layer.parametrizations.weight.original1.grad.abs().sum() > 0


def test_ws_matches_formula_and_gradients():
    torch.manual_seed(1)
    layer = ConditionedLinear(9, 4, conditioning="ws", eps=1e-5).double()
    with torch.no_grad():
        layer.weight.mul_(torch.logspace(-2, 2, 9, dtype=torch.float64)).add_(0.3)
    w = layer.weight.detach().numpy()
    ws = layer.conditioned_weight().detach().numpy()
    np.testing.assert_allclose(ws, numpy_ws(w, 1e-5), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ws.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(ws.var(axis=1), 1.0 / (1.0 + 1e-5 / w.var(axis=1)), rtol=1e-10)
    # gradient against central finite differences of the numpy formula
    x = np.random.default_rng(0).normal(size=(6, 9))
    xt = torch.from_numpy(x)
    layer(xt).square().sum().backward()

    def f(weight):
        return ((x @ numpy_ws(weight, 1e-5).T + layer.bias.detach().numpy()) ** 2).sum()

    num = np.zeros_like(w)
    for idx in np.ndindex(*w.shape):
        step = np.zeros_like(w)
        step[idx] = 1e-6
        num[idx] = (f(w + step) - f(w - step)) / 2e-6
    np.testing.assert_allclose(layer.weight.grad.numpy(), num, rtol=1e-5, atol=1e-6)
    # detached statistics: same forward value, gradient = (scale) * upstream only
    det = ConditionedLinear(9, 4, conditioning="ws", eps=1e-5, detach_conditioner=True).double()
    det.load_state_dict(layer.state_dict())
    torch.testing.assert_close(det.conditioned_weight(), layer.conditioned_weight())


@pytest.mark.parametrize("mode", ["wn", "ws"])
def test_fold_and_condition_number(mode):
    torch.manual_seed(2)
    layer = ConditionedLinear(6, 5, conditioning=mode).double()
    with torch.no_grad():
        layer.bias.normal_()
        if mode == "wn":
            layer.parametrizations.weight.original0.mul_(torch.rand(5, 1, dtype=torch.float64) + 0.5)
    x = torch.randn(8, 6, dtype=torch.float64)
    folded = layer.fold()
    assert type(folded) is torch.nn.Linear
    torch.testing.assert_close(folded(x), layer(x), rtol=1e-12, atol=1e-12)
    seq = fold_module(torch.nn.Sequential(layer, torch.nn.ReLU()))
    torch.testing.assert_close(seq(x), torch.relu(layer(x)), rtol=1e-12, atol=1e-12)
    stored = layer.parametrizations.weight.original1 if mode == "wn" else layer.weight
    s_w = np.linalg.svd(stored.detach().numpy(), compute_uv=False)
    s_ew = np.linalg.svd(layer.conditioned_weight().detach().numpy(), compute_uv=False)
    k_w, k_ew = condition_number(layer)
    assert k_w == pytest.approx(s_w[0] / s_w[-1], rel=1e-10)
    assert k_ew == pytest.approx(s_ew[0] / s_ew[-1], rel=1e-10)


@pytest.mark.parametrize("mode", ["wn", "ws"])
def test_nerf_field_with_method(mode):
    torch.manual_seed(3)
    field = NeRFField(FieldConfig(netdepth=3, netwidth=16, skips=(1,), multires=2, multires_views=1, view_width=8,
                      conditioning=mode))
    modes = {n: m.conditioning for n, m in field.named_modules() if isinstance(m, ConditionedLinear)}
    assert {n for n, m in modes.items() if m == mode} == {"trunk.0", "trunk.1", "trunk.2"}
    x, d = torch.rand(5, 3), torch.nn.functional.normalize(torch.randn(5, 3), dim=-1)
    rgb, sigma = field(x, d)
    rgb_f, sigma_f = fold_module(field)(x, d)
    torch.testing.assert_close(rgb_f, rgb, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sigma_f, sigma, rtol=1e-5, atol=1e-6)


def test_wn_refuses_detach():
    with pytest.raises(ConfigError, match="detach_conditioner"):
        ConditionedLinear(3, 2, conditioning="wn", detach_conditioner=True)


@pytest.mark.parametrize("mode", ["row", "rowcol"])
def test_equilibration_double_backward_matches_autograd(mode):
    """create_graph through the conditioned layer equals autograd of the plain formula (second derivative)."""
    torch.manual_seed(4)
    layer = ConditionedLinear(5, 4, conditioning=mode).double()
    x = torch.randn(7, 5, dtype=torch.float64)

    def plain_weight(w):
        w = w / w.norm(dim=0, keepdim=True)
        if mode == "rowcol":
            w = w / w.norm(dim=1, keepdim=True)
        return w

    def loss_of(w, fn):
        return torch.tanh(torch.nn.functional.linear(x, fn(w), layer.bias)).square().sum()

    w = layer.weight
    (g_fast,) = torch.autograd.grad(loss_of(w, lambda t: layer.conditioned_weight()), w, create_graph=True)
    (g_ref,) = torch.autograd.grad(loss_of(w, plain_weight), w, create_graph=True)
    torch.testing.assert_close(g_fast, g_ref, rtol=1e-10, atol=1e-12)
    u = torch.randn_like(w)
    (h_fast,) = torch.autograd.grad(g_fast, w, u)
    (h_ref,) = torch.autograd.grad(g_ref, w, u)
    torch.testing.assert_close(h_fast, h_ref, rtol=1e-9, atol=1e-11)


def test_config_and_cli_accept_methods():
    args = build_train_parser().parse_args(
        ["--conditioning", "ws", "--precond", "bnp", "--weight_decay", "0.01", "--decay_space", "p", "--grad_reg", "0.1"]
    )
    cfg = run_config_from_args(args)
    assert (cfg.field.conditioning, cfg.train.precond, cfg.train.weight_decay, cfg.train.decay_space,
            cfg.train.grad_reg) == ("ws", "bnp", 0.01, "p", 0.1)
    assert TrainConfig().precond == "none" and TrainConfig().decay_space == "z"
    FieldConfig(conditioning="wn")
    with pytest.raises(ConfigError, match="precond"):
        TrainConfig(precond="kfac")
    with pytest.raises(ConfigError, match="decay_space"):
        TrainConfig(decay_space="q")
    with pytest.raises(ConfigError, match="weight_decay"):
        TrainConfig(weight_decay=-1.0)


def test_cli_rejects_bad_precond(capsys):
    from enerf.cli import main

    assert main(["train", "--precond", "kfac"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--precond" in err and "'kfac'" in err


def _load_tool():
    from studies import hessian_kappa

    return hessian_kappa


def test_hessian_kappa_tool(record_property, capsys):
    """studies/hessian_kappa.py on a tiny setting: its exact Hessian for ``none`` equals the
    Gauss-Newton closed form (output layer linear, MSE), its κ values equal numpy's, row
    equilibration undoes a bad input scaling of a trained weight (κ(EW) <= κ(W), Prop. 1 in
    its regime), and the measured Hessian κ values are reported."""
    hk = _load_tool()
    torch.set_num_threads(1)
    settings = dict(steps=(0, 30), size=16, freqs=2, width=12, batch=48, lr=3e-3)
    rows = hk.run(methods=("none", "row", "bnp"), **settings)
    by = {(r["method"], r["step"]): r for r in rows}
    assert set(by) == {(m, s) for m in ("none", "row", "bnp") for s in (0, 30)}

    # independent check of the Hessian: rebuild the trained `none` model at step 0 in numpy
    torch.set_default_dtype(torch.float64)
    try:
        feats, rgb = hk.photo_data(16, 2)
        gen = torch.Generator().manual_seed(0)
        probe = torch.randperm(feats.shape[0], generator=gen)[:48]
        torch.manual_seed(0)
        model = hk.MLP(feats.shape[1], 12, 3, "none")
        x = feats[probe]
        with torch.no_grad():
            h = torch.relu(model.hidden[1](torch.relu(model.hidden[0](x)))).numpy()
        hess = hk.layer_hessian(model, model.output, x, rgb[probe])
    finally:
        torch.set_default_dtype(torch.float32)
    n, width = h.shape
    ext = np.hstack([h, np.ones((n, 1))])
    gram = 2.0 / (n * 3) * ext.T @ ext  # per output unit, over [w_j, b_j]
    expected = np.zeros((3 * width + 3, 3 * width + 3))
    for j in range(3):
        idx = [j * width + i for i in range(width)] + [3 * width + j]
        expected[np.ix_(idx, idx)] = gram
    np.testing.assert_allclose(hess, expected, rtol=1e-9, atol=1e-12)
    lam = np.abs(np.linalg.eigvalsh(expected))
    lam = lam[lam > 1e-10 * lam.max()]
    assert by[("none", 0)]["kappa_hessian"] == pytest.approx(lam.max() / lam.min(), rel=1e-6)

    # weight κ: the tool's values are numpy SVD values, and row equilibration removes a bad
    # per-input scaling: κ(row(W D)) = κ(row(W)) <= κ(W D) for D spanning six decades
    torch.manual_seed(0)
    layer = ConditionedLinear(12, 12, conditioning="row").double()
    with torch.no_grad():
        layer.weight.mul_(torch.logspace(-3, 3, 12, dtype=torch.float64))
    w = layer.weight.detach().numpy()
    s_w = np.linalg.svd(w, compute_uv=False)
    s_ew = np.linalg.svd(w / np.linalg.norm(w, axis=0, keepdims=True), compute_uv=False)
    k_w, k_ew = condition_number(layer)
    assert (k_w, k_ew) == (pytest.approx(s_w[0] / s_w[-1]), pytest.approx(s_ew[0] / s_ew[-1]))
    assert k_ew <= k_w

    report = {f"{m}@{s}": round(by[(m, s)]["kappa_hessian"], 1) for m, s in sorted(by)}
    record_property("hessian_kappa", report)
    with capsys.disabled():
        print(f"\nHessian κ (output layer, tiny setting): {report}")
