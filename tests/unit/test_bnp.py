"""BNP (enerf.optim.bnp) against the paper: eq. (15) / (23) as dense matrices, Proposition 7
(one BNP step = one BN step mapped back) for dense and conv layers, and the statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from enerf.config import FieldConfig

from enerf.optim import BNP, build_optimizer
from enerf.optim.bnp import bnp_conv_transform, bnp_linear_transform


def dense_P(mu: np.ndarray, var_tilde: np.ndarray) -> np.ndarray:
    """P = [[1, -μᵀ], [0, I]] · [[1, 0], [0, diag(1/σ̃)]] of eq. (15): [n_in + 1, n_in + 1]."""
    n = mu.size
    U = np.eye(n + 1)
    U[0, 1:] = -mu
    D = np.diag(np.concatenate([[1.0], 1.0 / np.sqrt(var_tilde)]))
    return U @ D


def eq15(gw: np.ndarray, gb: np.ndarray, mu: np.ndarray, var_tilde: np.ndarray, q2: float):
    """(1/q²) P Pᵀ [∂b; ∂Wᵀ] -> (new ∂W [out, in], new ∂b [out])."""
    P = dense_P(mu, var_tilde)
    out = (P @ P.T @ np.vstack([gb[None, :], gw.T])) / q2
    return out[1:].T, out[0]


def test_linear_transform_matches_eq15():
    rng = np.random.default_rng(0)
    gw, gb = rng.normal(size=(5, 7)), rng.normal(size=5)
    mu, var_tilde = rng.normal(size=7) * 3, rng.uniform(0.01, 10, size=7)
    new_w, new_b = bnp_linear_transform(torch.from_numpy(gw), torch.from_numpy(gb), torch.from_numpy(mu),
                                        torch.from_numpy(var_tilde), 2.5)
    ref_w, ref_b = eq15(gw, gb, mu, var_tilde, 2.5)
    np.testing.assert_allclose(new_w.numpy(), ref_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(new_b.numpy(), ref_b, rtol=1e-12, atol=1e-12)


def test_conv_transform_matches_eq23():
    """Eq. (23): the dense form on the reshaped kernel with μ ⊗ e, σ̃ ⊗ e."""
    rng = np.random.default_rng(1)
    c_out, c_in, k = 4, 3, 3
    gw, gb = rng.normal(size=(c_out, c_in, k, k)), rng.normal(size=c_out)
    mu, var_tilde = rng.normal(size=c_in), rng.uniform(0.1, 5, size=c_in)
    new_w, new_b = bnp_conv_transform(torch.from_numpy(gw), torch.from_numpy(gb), torch.from_numpy(mu),
                                      torch.from_numpy(var_tilde), 1.7)
    # torch's [c_out, c_in, k, k] flattened per output = vec over (p, i, j): μ ⊗ e repeats μ(p) k² times
    ref_w, ref_b = eq15(gw.reshape(c_out, -1), gb, np.repeat(mu, k * k), np.repeat(var_tilde, k * k), 1.7)
    np.testing.assert_allclose(new_w.numpy().reshape(c_out, -1), ref_w, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(new_b.numpy(), ref_b, rtol=1e-12, atol=1e-12)


def test_hooks_statistics_and_precondition_match_algorithm2():
    """Running μ, σ² from two pooled forward chunks, σ̃², q² = n_in / N, then eq. (15) on .grad."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(12, 3).double()
    bnp = BNP(layer)
    rng = np.random.default_rng(2)
    h = rng.normal(size=(8, 12)) * rng.uniform(0.1, 5, size=12) + rng.normal(size=12) * 2
    out = torch.cat([layer(torch.from_numpy(h[:5])), layer(torch.from_numpy(h[5:]))])
    (out ** 3).sum().backward()
    gw, gb = layer.weight.grad.numpy().copy(), layer.bias.grad.numpy().copy()
    bnp.precondition()
    mu = 0.01 * h.mean(axis=0)  # ρ = 0.99 from μ = 0, σ = 1
    var = 0.99 + 0.01 * h.var(axis=0)
    var_tilde = var + 1e-2 * var.max() + 1e-4
    ref_w, ref_b = eq15(gw, gb, mu, var_tilde, 12 / 8)
    np.testing.assert_allclose(bnp.states[0].mean.numpy(), mu, rtol=1e-12)
    np.testing.assert_allclose(bnp.states[0].var.numpy(), var, rtol=1e-12)
    np.testing.assert_allclose(layer.weight.grad.numpy(), ref_w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(layer.bias.grad.numpy(), ref_b, rtol=1e-10, atol=1e-12)


def test_minibatch_of_one_uses_running_mean():
    layer = torch.nn.Linear(4, 2).double()
    bnp = BNP(layer)
    h1, h2 = np.array([1.0, -2.0, 0.5, 3.0]), np.array([0.0, 1.0, 2.0, -1.0])
    layer(torch.from_numpy(h1)[None]).sum().backward()
    bnp.precondition()
    mu1, var1 = 0.01 * h1, 0.99 + 0.01 * h1 ** 2  # σ²_H = (h1 - μ_before)², μ_before = 0
    layer(torch.from_numpy(h2)).sum().backward()  # unbatched input: one row as well
    bnp.precondition()
    np.testing.assert_allclose(bnp.states[0].mean.numpy(), 0.99 * mu1 + 0.01 * h2, rtol=1e-12)
    np.testing.assert_allclose(bnp.states[0].var.numpy(), 0.99 * var1 + 0.01 * (h2 - mu1) ** 2, rtol=1e-12)
    assert bnp.states[0].q2 == 4.0  # max(n_in / N, 1) with N = 1


def test_eval_and_no_grad_passes_are_not_statistics():
    layer = torch.nn.Linear(3, 2)
    bnp = BNP(layer)
    with torch.no_grad():
        layer(torch.randn(5, 3))
    layer.eval()
    layer(torch.randn(5, 3))
    assert not bnp.pending
    layer.train()
    layer(torch.randn(5, 3))
    assert bnp.pending
    bnp.remove()
    bnp.update_statistics()
    layer(torch.randn(5, 3))
    assert not bnp.pending


def _downstream(a: torch.Tensor, readout: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Post-activation network after the layer: relu, fixed readout, squared error."""
    return ((torch.relu(a) @ readout - target) ** 2).mean()


@pytest.mark.parametrize("eps", [(0.0, 0.0), (1e-2, 1e-4)])
def test_proposition7_dense(eps):
    """One SGD step of BNP on the vanilla layer = one SGD step of the BN layer, mapped back."""
    eps1, eps2 = eps
    rng = np.random.default_rng(3)
    n_in, n_out, N, lr = 6, 5, 40, 0.1
    H = rng.normal(size=(N, n_in)) * rng.uniform(0.2, 4, size=n_in) + rng.normal(size=n_in) * 3
    W_hat, b_hat = rng.normal(size=(n_out, n_in)) * 0.3, rng.normal(size=n_out) * 0.1
    readout, target = torch.from_numpy(rng.normal(size=(n_out, 2))), torch.from_numpy(rng.normal(size=(N, 2)))
    # BN side, in numpy statistics: g = (h - μ_H) / σ̃, σ̃² = σ_H² + ε₁ max σ_H² + ε₂ (BN's ε)
    mu_H, var_H = H.mean(axis=0), H.var(axis=0)
    sigma = np.sqrt(var_H + eps1 * var_H.max() + eps2)
    G = torch.from_numpy((H - mu_H) / sigma)
    W_bn = torch.tensor(W_hat * sigma, requires_grad=True)  # inverse of Ŵ = W diag(1/σ)
    b_bn = torch.tensor(b_hat + W_hat @ mu_H, requires_grad=True)  # inverse of b̂ = b - W diag(μ/σ)
    _downstream(G @ W_bn.T + b_bn, readout, target).backward()
    with torch.no_grad():
        W_bn -= lr * W_bn.grad
        b_bn -= lr * b_bn.grad
    W_back = W_bn.detach().numpy() / sigma
    b_back = b_bn.detach().numpy() - W_bn.detach().numpy() @ (mu_H / sigma)
    # BNP side: vanilla layer, batch statistics (ρ = 0), same ε, SGD with the same lr
    layer = torch.nn.Linear(n_in, n_out).double()
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(W_hat))
        layer.bias.copy_(torch.from_numpy(b_hat))
    bnp = BNP(layer, rho=0.0, eps1=eps1, eps2=eps2)
    sgd = torch.optim.SGD(layer.parameters(), lr=lr)
    _downstream(layer(torch.from_numpy(H)), readout, target).backward()
    bnp.precondition()
    sgd.step()
    np.testing.assert_allclose(layer.weight.detach().numpy(), W_back, rtol=0, atol=1e-5 * 1e-3)
    np.testing.assert_allclose(layer.bias.detach().numpy(), b_back, rtol=0, atol=1e-5 * 1e-3)
    assert np.abs(W_back - W_hat).max() > 1e-3  # the step moved the weights


def test_proposition7_conv():
    """Same for a Conv2d (valid padding, per-channel statistics over N, r, s; eqs. 21-23),
    with the BN step's learning rate divided by q² = max(c k² / N, sqrt(r s))."""
    rng = np.random.default_rng(4)
    N, c_in, c_out, k, r, s, lr = 3, 2, 4, 3, 7, 6, 0.05
    H = rng.normal(size=(N, c_in, r, s)) * rng.uniform(0.3, 3, size=(1, c_in, 1, 1)) \
        + rng.normal(size=(1, c_in, 1, 1)) * 2
    w_hat, b_hat = rng.normal(size=(c_out, c_in, k, k)) * 0.2, rng.normal(size=c_out) * 0.1
    target = torch.from_numpy(rng.normal(size=(N, c_out, r - k + 1, s - k + 1)))
    q2 = max(c_in * k * k / N, math.sqrt(r * s))
    mu, var = H.mean(axis=(0, 2, 3)), H.var(axis=(0, 2, 3))
    sigma = np.sqrt(var)
    G = torch.from_numpy((H - mu[None, :, None, None]) / sigma[None, :, None, None])
    w_bn = torch.tensor(w_hat * sigma[None, :, None, None], requires_grad=True)
    b_bn = torch.tensor(b_hat + (w_hat * mu[None, :, None, None]).sum(axis=(1, 2, 3)), requires_grad=True)
    ((torch.relu(torch.nn.functional.conv2d(G, w_bn, b_bn)) - target) ** 2).mean().backward()
    with torch.no_grad():
        w_bn -= (lr / q2) * w_bn.grad
        b_bn -= (lr / q2) * b_bn.grad
    w_back = w_bn.detach().numpy() / sigma[None, :, None, None]
    b_back = b_bn.detach().numpy() - (w_back * mu[None, :, None, None]).sum(axis=(1, 2, 3))

    conv = torch.nn.Conv2d(c_in, c_out, k).double()
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(w_hat))
        conv.bias.copy_(torch.from_numpy(b_hat))
    bnp = BNP(conv, rho=0.0, eps1=0.0, eps2=0.0)
    sgd = torch.optim.SGD(conv.parameters(), lr=lr)
    ((torch.relu(conv(torch.from_numpy(H))) - target) ** 2).mean().backward()
    bnp.precondition()
    sgd.step()
    assert bnp.states[0].q2 == pytest.approx(q2)
    np.testing.assert_allclose(conv.weight.detach().numpy(), w_back, rtol=0, atol=1e-8)
    np.testing.assert_allclose(conv.bias.detach().numpy(), b_back, rtol=0, atol=1e-8)
    assert np.abs(w_back - w_hat).max() > 1e-4


def test_bnp_on_wn_field_transforms_v_not_g_and_round_trips():
    """Combined with wn, BNP transforms the gradient of v (and the bias) by eq. (15) and leaves
    the gain g's gradient alone; its statistics survive a state_dict round trip."""
    from enerf.fields.nerf import NeRFField

    torch.manual_seed(5)
    field = NeRFField(FieldConfig(netdepth=2, netwidth=16, skips=(), multires=2, multires_views=1, view_width=8,
                      conditioning="wn")).double()
    opt = build_optimizer(field, lr=1e-2, precond="bnp")
    x = torch.rand(64, 3, dtype=torch.float64)
    d = torch.nn.functional.normalize(torch.randn(64, 3, dtype=torch.float64), dim=-1)
    h = field.pos_encoding(x).numpy()  # the input of trunk.0
    loss = ((field(x, d)[0] - 0.5) ** 2).mean()
    opt.zero_grad()
    opt.backward(loss)
    layer = field.trunk[0]
    v, g = layer.parametrizations.weight.original1, layer.parametrizations.weight.original0
    gv, gg, gb = v.grad.numpy().copy(), g.grad.numpy().copy(), layer.bias.grad.numpy().copy()
    opt.bnp.precondition()
    var = 0.99 + 0.01 * h.var(axis=0)
    ref_w, ref_b = eq15(gv, gb, 0.01 * h.mean(axis=0), var + 1e-2 * var.max() + 1e-4, max(h.shape[1] / 64, 1.0))
    np.testing.assert_allclose(v.grad.numpy(), ref_w, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(layer.bias.grad.numpy(), ref_b, rtol=1e-10, atol=1e-14)
    np.testing.assert_array_equal(g.grad.numpy(), gg)
    other = build_optimizer(field, lr=1e-2, precond="bnp")
    other.load_state_dict(opt.state_dict())
    for a, b in zip(opt.bnp.states, other.bnp.states):
        torch.testing.assert_close(a.mean, b.mean)
        torch.testing.assert_close(a.var, b.var)


def test_enerf_train_with_bnp_and_regularization_resumes_exactly(tmp_path):
    """`enerf train --conditioning ws --precond bnp --weight_decay .. --grad_reg ..` runs end to
    end, and resuming restores BNP's running statistics: 2 + 2 steps = 4 steps."""
    import json

    from enerf.checkpoint import load_checkpoint
    from enerf.cli import main
    from enerf.synthetic.scene import make_synthetic_scene

    scene = make_synthetic_scene(tmp_path / "tiny", n_views=4, width=16, height=12, seed=2)
    tiny = ["--preset", "none", "--datadir", str(scene), "--basedir", str(tmp_path), "--factor", "1", "--llffhold", "4",
            "--netdepth", "2", "--netwidth", "16", "--view_width", "8", "--multires", "2", "--multires_views", "1",
            "--N_samples", "6", "--N_importance", "0", "--N_rand", "64", "--no_lpips", "--quiet", "--chunk", "512",
            "--conditioning", "ws", "--precond", "bnp", "--weight_decay", "1e-3", "--decay_space", "z",
            "--grad_reg", "1e-3", "--lrate", "5e-3"]
    assert main(["train", "--expname", "straight", "--iters", "4", *tiny]) == 0
    assert main(["train", "--expname", "halves", "--iters", "2", *tiny]) == 0
    assert main(["train", "--expname", "halves", "--iters", "4", "--resume", *tiny]) == 0
    straight = json.loads((tmp_path / "straight" / "metrics.json").read_text())
    resumed = json.loads((tmp_path / "halves" / "metrics.json").read_text())
    assert straight["precond"] == "bnp" and straight["conditioning"] == "ws"
    assert resumed["psnr"] == pytest.approx(straight["psnr"], abs=1e-5)
    payload, cfg = load_checkpoint(tmp_path / "halves" / "checkpoints" / "latest.pt")
    assert cfg.train.precond == "bnp" and cfg.train.grad_reg == 1e-3
    layers = payload["optimizer"]["bnp"]["layers"]
    assert len(layers) == 6 and not torch.equal(layers[0]["mean"], torch.zeros_like(layers[0]["mean"]))
    for name, state in payload["fields"].items():
        straight_state = load_checkpoint(tmp_path / "straight" / "checkpoints" / "latest.pt")[0]["fields"][name]
        for key, value in state.items():
            torch.testing.assert_close(value, straight_state[key], rtol=1e-5, atol=1e-6)


def test_column_statistics_match_numpy():
    from enerf.optim.bnp import _column_var_mean

    rng = np.random.default_rng(3)
    x = rng.normal(2.0, 0.3, size=(4096, 37)) * rng.uniform(0.1, 3.0, size=37)
    var, mean = _column_var_mean(torch.from_numpy(x))
    np.testing.assert_allclose(mean.numpy(), x.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), x.var(axis=0), rtol=1e-9)
    var32, mean32 = _column_var_mean(torch.from_numpy(x).float())
    np.testing.assert_allclose(var32.numpy(), x.var(axis=0), rtol=2e-3)


def _bnp_step(optimizer: str, steps: int = 1, momentum: float = 0.9, lr: float = 0.1):
    """A 12 -> 3 layer trained ``steps`` steps with BNP under ``optimizer``; returns (layer, data)."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(12, 3).double()
    opt = build_optimizer(layer, lr=lr, precond="bnp", optimizer=optimizer, momentum=momentum)
    rng = np.random.default_rng(3)
    h = torch.from_numpy(rng.normal(size=(8, 12)) * rng.uniform(0.1, 5, size=12) + rng.normal(size=12) * 2)
    for _ in range(steps):
        opt.zero_grad()
        (layer(h) ** 3).sum().backward()
        opt.step()
    return layer, h.numpy()


def test_sgd_momentum_step_applies_eq15_as_bnp_paper():
    """SGD (the BNP paper's optimiser): two heavy-ball steps of the eq. (15) gradients, in numpy."""
    torch.manual_seed(0)
    w0 = torch.nn.Linear(12, 3).double()
    w, b = w0.weight.detach().numpy().copy(), w0.bias.detach().numpy().copy()
    layer, h = _bnp_step("sgd", steps=2, momentum=0.9, lr=0.01)
    mu, var, buf_w, buf_b = np.zeros(12), np.ones(12), 0.0, 0.0
    for _ in range(2):
        y = h @ w.T + b
        gy = 3 * y**2
        gw, gb = gy.T @ h, gy.sum(axis=0)
        mu, var = 0.99 * mu + 0.01 * h.mean(axis=0), 0.99 * var + 0.01 * h.var(axis=0)
        nw, nb = eq15(gw, gb, mu, var + 1e-2 * var.max() + 1e-4, 12 / 8)
        buf_w, buf_b = 0.9 * buf_w + nw, 0.9 * buf_b + nb
        w, b = w - 0.01 * buf_w, b - 0.01 * buf_b
    np.testing.assert_allclose(layer.weight.detach().numpy(), w, rtol=1e-9)
    np.testing.assert_allclose(layer.bias.detach().numpy(), b, rtol=1e-9)


def test_adam_first_step_cancels_bnp_scaling_sgd_does_not():
    """Adam's first update is lr · g / (|g| + eps) per coordinate: BNP's positive per-input factor
    1/(q² σ̃²) cancels and only the centring's change of sign pattern remains; under SGD it stays."""
    def update(optimizer, transform):
        torch.manual_seed(0)
        layer = torch.nn.Linear(12, 3).double()
        before = layer.weight.detach().clone()
        opt = build_optimizer(layer, lr=0.1, optimizer=optimizer, momentum=0.0)
        rng = np.random.default_rng(3)
        h = torch.from_numpy(rng.normal(size=(8, 12)) * rng.uniform(0.1, 5, size=12) + rng.normal(size=12) * 2)
        opt.zero_grad()
        (layer(h) ** 3).sum().backward()
        mu = 0.01 * h.mean(0)
        var = 0.99 + 0.01 * h.var(0, unbiased=False)
        vt = var + 1e-2 * var.max() + 1e-4
        q2 = 12 / 8
        if transform == "centring":
            vt, q2 = torch.ones_like(vt), 1.0
        nw, nb = bnp_linear_transform(layer.weight.grad, layer.bias.grad, mu, vt, q2)
        layer.weight.grad.copy_(nw)
        layer.bias.grad.copy_(nb)
        opt.step()
        return (layer.weight.detach() - before).numpy()

    adam_full, adam_centring = update("adam", "full"), update("adam", "centring")
    np.testing.assert_allclose(adam_full, adam_centring, rtol=1e-6)
    sgd_full, sgd_centring = update("sgd", "full"), update("sgd", "centring")
    assert np.abs(sgd_full / sgd_centring - 1).max() > 0.1  # the scaling survives plain SGD


def test_precond_bnp_under_adam_says_what_survives(capsys):
    from enerf.config import ShapeTrainConfig
    from enerf.train.state import optimizer_from_config

    layer = torch.nn.Linear(3, 2)
    optimizer_from_config(layer, ShapeTrainConfig(precond="bnp"))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cancels" in err and "centring" in err
    optimizer_from_config(layer, ShapeTrainConfig(precond="bnp", optimizer="sgd"))
    optimizer_from_config(layer, ShapeTrainConfig(precond="none"))
    assert capsys.readouterr().err == ""
