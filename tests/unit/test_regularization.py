"""Weight decay in p and z space and gradient regularization (enerf.optim.regularization)
against torch's Adam / AdamW and against full Hessians computed independently."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from enerf.optim import build_optimizer


def tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()


def data(seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(9, 3, generator=g, dtype=torch.float64), torch.randn(9, 2, generator=g, dtype=torch.float64)


def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()


def run_wrapped(model, lam, space, lrs, grad_reg=0.0, precond="none"):
    opt = build_optimizer(model, lr=lrs[0], precond=precond, weight_decay=lam, decay_space=space, grad_reg=grad_reg)
    for step, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = data(step)
        losses = {"mse": loss_fn(model, x, y), **opt.penalties()}
        opt.zero_grad()
        opt.backward(sum(losses.values()))
        opt.step()
    return opt


def run_torch(model, opt, lrs):
    for step, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = data(step)
        opt.zero_grad()
        loss_fn(model, x, y).backward()
        opt.step()


LRS = [0.05, 0.04, 0.03, 0.02, 0.01]


def test_z_space_decay_with_adam_is_adamw():
    lam = 0.3
    ours, ref = tiny_model(0), tiny_model(0)
    run_wrapped(ours, lam, "z", LRS)
    run_torch(ref, torch.optim.AdamW(ref.parameters(), lr=LRS[0], weight_decay=2 * lam), LRS)
    plain = tiny_model(0)
    run_torch(plain, torch.optim.Adam(plain.parameters(), lr=LRS[0]), LRS)
    for a, b, c in zip(ours.parameters(), ref.parameters(), plain.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
        assert (a - c).abs().max() > 1e-4  # the decay changed something


def test_p_space_decay_with_adam_is_coupled_l2():
    lam = 0.3
    ours, ref = tiny_model(1), tiny_model(1)
    opt = run_wrapped(ours, lam, "p", LRS)
    run_torch(ref, torch.optim.Adam(ref.parameters(), lr=LRS[0], weight_decay=2 * lam), LRS)
    for a, b in zip(ours.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    expected = lam * sum(float((p.detach() ** 2).sum()) for p in ours.parameters())
    assert float(opt.penalties()["weight_decay"].detach()) == pytest.approx(expected, rel=1e-12)
    assert run_wrapped(tiny_model(1), lam, "z", LRS[:1]).penalties() == {}


def flat_problem(model, x, y):
    """(loss of a flat parameter vector, flat parameters, names/shapes) for full Hessians."""
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def f(vec):
        parts = torch.split(vec, sizes)
        params = {n: t.reshape(s) for n, t, s in zip(names, parts, shapes)}
        return loss_fn_functional(model, params, x, y)

    return f, flat


def loss_fn_functional(model, params, x, y):
    return ((torch.func.functional_call(model, params, (x,)) - y) ** 2).mean()


def grads_of(opt) -> np.ndarray:
    return torch.cat([p.grad.reshape(-1) for p in opt.params]).numpy()


def test_gradient_regularization_p_space_is_gradient_of_penalized_loss():
    lam = 0.7
    model = tiny_model(2)
    x, y = data(5)
    opt = build_optimizer(model, lr=0.01, grad_reg=lam, decay_space="p")
    opt.zero_grad()
    opt.backward(loss_fn(model, x, y))
    f, flat = flat_problem(model, x, y)
    g = torch.autograd.functional.jacobian(f, flat).numpy()
    H = torch.autograd.functional.hessian(f, flat).numpy()
    np.testing.assert_allclose(grads_of(opt), g + 2 * lam * H @ g, rtol=1e-10, atol=1e-12)
    assert np.abs(2 * lam * H @ g).max() > 1e-3


def test_gradient_regularization_z_space_uses_adams_preconditioner():
    """g + 2λ ∇²L M g with M = diag(1 / (sqrt(v̂) + ε)) of the step about to be taken (eq. 12)."""
    lam = 0.7
    model = tiny_model(3)
    opt = run_wrapped(model, 0.0, "z", [0.01, 0.01])  # two plain Adam steps: state exists
    opt.grad_reg = lam
    adam = opt.optimizer
    v_prev = torch.cat([adam.state[p]["exp_avg_sq"].reshape(-1) for p in opt.params]).numpy()
    t = int(adam.state[opt.params[0]]["step"]) + 1
    x, y = data(6)
    opt.zero_grad()
    opt.backward(loss_fn(model, x, y))
    f, flat = flat_problem(model, x, y)
    g = torch.autograd.functional.jacobian(f, flat).numpy()
    H = torch.autograd.functional.hessian(f, flat).numpy()
    v_hat = (0.999 * v_prev + 0.001 * g ** 2) / (1 - 0.999 ** t)
    Mg = g / (np.sqrt(v_hat) + 1e-8)
    np.testing.assert_allclose(grads_of(opt), g + 2 * lam * H @ Mg, rtol=1e-9, atol=1e-10)


def test_gradient_regularization_z_space_with_bnp():
    """With BNP, M g = Adam's diagonal applied to eq. (15)'s (1/q²) P Pᵀ g, per layer."""
    from test_bnp import eq15

    lam = 0.2
    model = tiny_model(4)
    x, y = data(7)
    opt = build_optimizer(model, lr=0.01, precond="bnp", grad_reg=lam, decay_space="z")
    opt.zero_grad()
    opt.backward(loss_fn(model, x, y))
    f, flat = flat_problem(model, x, y)
    g = torch.autograd.functional.jacobian(f, flat).numpy()
    H = torch.autograd.functional.hessian(f, flat).numpy()
    # inputs of the two linear layers, and their BNP statistics after one update (ρ = 0.99)
    h0 = x.numpy()
    with torch.no_grad():
        h1 = torch.tanh(model[0](x)).numpy()
    parts, offset = [], 0
    for (n_out, n_in), h in (((4, 3), h0), ((2, 4), h1)):
        gw = g[offset:offset + n_out * n_in].reshape(n_out, n_in)
        gb = g[offset + n_out * n_in:offset + n_out * n_in + n_out]
        var = 0.99 + 0.01 * h.var(axis=0)
        new_w, new_b = eq15(gw, gb, 0.01 * h.mean(axis=0), var + 1e-2 * var.max() + 1e-4, max(n_in / 9, 1.0))
        parts += [new_w.reshape(-1), new_b]
        offset += n_out * n_in + n_out
    Pg = np.concatenate(parts)
    Mg = Pg / (np.abs(Pg) + 1e-8)  # first Adam step: v̂ = (M_bnp g)²
    np.testing.assert_allclose(grads_of(opt), g + 2 * lam * H @ Mg, rtol=1e-9, atol=1e-10)
