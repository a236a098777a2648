"""Gradients through equilibrated weight conditioning: autograd against finite differences, closed forms, the
numpy projection formula and the explicit formula's Jacobian, with E's gradient kept or detached."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import functional_call

from enerf.nn.conditioning import ConditionedLinear
from equilibration_reference import MODES, layer_with, paper_reference


@pytest.mark.parametrize("mode", MODES)
def test_gradcheck_through_the_layer(mode):
    """Numerical vs autograd derivatives of the layer's output w.r.t. its weight and bias."""
    torch.manual_seed(0)
    layer = ConditionedLinear(4, 3, conditioning=mode, passes=2).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    params = (layer.weight.detach().clone().requires_grad_(), layer.bias.detach().clone().requires_grad_())
    assert torch.autograd.gradcheck(lambda w, b: functional_call(layer, {"weight": w, "bias": b}, (x,)), params)


def test_gradient_through_e_and_detached_gradient_match_closed_forms():
    torch.manual_seed(0)
    x = torch.randn(5, 4, dtype=torch.float64)
    upstream = torch.randn(5, 3, dtype=torch.float64)
    layer = ConditionedLinear(4, 3, conditioning="row").double()
    w = layer.weight.detach().clone()
    g = upstream.T @ x  # dL/d(EW) in torch layout [out, in]
    norms = w.norm(dim=0, keepdim=True)  # per input column
    w_hat = w / norms

    layer(x).mul(upstream).sum().backward()
    full = layer.weight.grad.clone()
    # d(w/||w||) = (I - ŵŵᵀ) dw / ||w||, column by column.
    expected_full = (g - w_hat * (g * w_hat).sum(dim=0, keepdim=True)) / norms
    torch.testing.assert_close(full, expected_full, rtol=1e-12, atol=1e-12)

    layer.weight.grad = None
    layer.detach_conditioner = True
    layer(x).mul(upstream).sum().backward()
    torch.testing.assert_close(layer.weight.grad, g / norms, rtol=1e-12, atol=1e-12)  # E constant
    assert not torch.allclose(layer.weight.grad, full)


@pytest.mark.parametrize("mode", MODES)
def test_backward_equals_autograd_of_the_plain_formula(mode):
    """Including the clamped case: a zero column/row and one with norm below eps."""
    rng = np.random.default_rng(7)
    weight = rng.standard_normal((5, 6))
    weight[:, 4] = 1e-9  # torch column norm ~2e-9 < eps = 1e-8: clamped
    weight[:, 2] = 0.0
    weight[3, :] = 0.0
    eps = 1e-8

    def plain(w, dim):
        return w / torch.linalg.vector_norm(w, dim=dim, keepdim=True).clamp_min(eps)

    reference = {"row": lambda w: plain(w, 0), "col": lambda w: plain(w, 1),
                 "rowcol": lambda w: plain(plain(plain(plain(w, 0), 1), 0), 1)}[mode]
    layer = layer_with(weight, mode, passes=2, eps=eps)
    x = torch.randn(4, 6, dtype=torch.float64)
    upstream = torch.randn(4, 5, dtype=torch.float64)
    (layer(x) * upstream).sum().backward()
    w = torch.from_numpy(weight).requires_grad_()
    (torch.nn.functional.linear(x, reference(w), layer.bias.detach()) * upstream).sum().backward()
    torch.testing.assert_close(layer.conditioned_weight().detach(), reference(w).detach(), rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(layer.weight.grad, w.grad, rtol=1e-10, atol=1e-12)
    assert torch.isfinite(layer.weight.grad).all()


def test_detached_rowcol_gradient_equals_constant_scalings():
    """rowcol with detach: EW = diag(r) W diag(c) with r, c taken from numpy as constants."""
    rng = np.random.default_rng(6)
    weight = rng.standard_normal((3, 4))
    paper = weight.T
    r = 1.0 / np.linalg.norm(paper, axis=1, keepdims=True)  # [4, 1] over inputs
    c = 1.0 / np.linalg.norm(r * paper, axis=0, keepdims=True)  # [1, 3] over outputs
    scale_torch = torch.from_numpy((r * c).T)  # [out, in]
    x = torch.randn(5, 4, dtype=torch.float64)
    upstream = torch.randn(5, 3, dtype=torch.float64)
    layer = layer_with(weight, "rowcol", detach_conditioner=True)
    layer(x).mul(upstream).sum().backward()
    w = torch.from_numpy(weight).requires_grad_()
    (torch.nn.functional.linear(x, w * scale_torch, layer.bias.detach()) * upstream).sum().backward()
    torch.testing.assert_close(layer.weight.grad, w.grad, rtol=1e-12, atol=1e-12)


def numpy_loss(weights: list[np.ndarray], biases: list[np.ndarray], xs: list[np.ndarray], upstream: np.ndarray,
               mode: str, passes: int = 1) -> float:
    """sum over passes of <upstream, tanh(layer 2(tanh(layer 1(x))))>, every E W from ``paper_reference``."""
    total = 0.0
    for x in xs:
        h = x
        for w, b in zip(weights, biases):
            h = np.tanh(h @ paper_reference(w, mode, passes).T + b)
        total += float((h * upstream[: len(x)]).sum())
    return total


@pytest.mark.parametrize("mode,passes", [("none", 1), ("row", 1), ("col", 1), ("rowcol", 2)])
def test_autograd_grad_reaches_w_through_e_as_finite_differences_say(mode, passes):
    """torch.autograd.grad (not only loss.backward) gives W the derivative of the loss through
    E W, summed over several forward passes (a no-grad pass first, as a grid update): central
    finite differences of the same loss computed in numpy, in the paper's layout."""
    rng = np.random.default_rng(11)
    shapes = [(6, 4), (3, 6)]  # torch [out, in]
    weights = [rng.standard_normal(s) * np.exp(rng.uniform(-1, 1, (1, s[1]))) for s in shapes]
    biases = [rng.standard_normal(s[0]) for s in shapes]
    xs = [rng.standard_normal((n, 4)) for n in (5, 3)]
    upstream = rng.standard_normal((5, 3))
    net = torch.nn.Sequential(layer_with(weights[0], mode, passes=passes), torch.nn.Tanh(),
                              layer_with(weights[1], mode, passes=passes), torch.nn.Tanh())
    for layer, b in zip((net[0], net[2]), biases):
        with torch.no_grad():
            layer.bias.copy_(torch.from_numpy(b))
    with torch.no_grad():
        net(torch.from_numpy(xs[0]))
    loss = sum((net(torch.from_numpy(x)) * torch.from_numpy(upstream[: len(x)])).sum() for x in xs)
    grads = torch.autograd.grad(loss, [net[0].weight, net[2].weight])
    assert loss.item() == pytest.approx(numpy_loss(weights, biases, xs, upstream, mode, passes), rel=1e-12)
    h = 1e-6
    for k, grad in enumerate(grads):
        fd = np.zeros_like(weights[k])
        for idx in np.ndindex(*weights[k].shape):
            plus = [w.copy() for w in weights]
            minus = [w.copy() for w in weights]
            plus[k][idx] += h
            minus[k][idx] -= h
            fd[idx] = (numpy_loss(plus, biases, xs, upstream, mode, passes)
                       - numpy_loss(minus, biases, xs, upstream, mode, passes)) / (2 * h)
        np.testing.assert_allclose(grad.numpy(), fd, rtol=1e-6, atol=1e-8)
    assert net[0].weight.grad is None  # autograd.grad returns the gradients, accumulates nothing


@pytest.mark.parametrize("mode", ["row", "col"])
def test_gradient_is_the_numpy_projection_formula_and_detach_drops_it(mode):
    """dL/dW for E W = w / ||w|| per vector: (g - ŵ <ŵ, g>) / ||w||, written in numpy in the
    paper's layout; with detach_conditioner: g / ||w|| (E a constant). Both by autograd.grad."""
    rng = np.random.default_rng(12)
    weight = rng.standard_normal((4, 7)) * np.exp(rng.uniform(-2, 2, (4, 7)))  # torch [out, in]
    x = rng.standard_normal((9, 7))
    upstream = rng.standard_normal((9, 4))
    paper = weight.T  # [in, out]: row mode normalises its rows, col mode its columns
    axis = 1 if mode == "row" else 0
    norms = np.linalg.norm(paper, axis=axis, keepdims=True)
    unit = paper / norms
    g = (upstream.T @ x).T  # dL/d(E W) in the paper's layout [in, out]
    full = (g - unit * (unit * g).sum(axis=axis, keepdims=True)) / norms
    for detach, expected in ((False, full), (True, g / norms)):
        layer = layer_with(weight, mode, detach_conditioner=detach)
        loss = (layer(torch.from_numpy(x)) * torch.from_numpy(upstream)).sum()
        (grad,) = torch.autograd.grad(loss, layer.weight)
        np.testing.assert_allclose(grad.numpy(), expected.T, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_jacobian_of_the_layer_is_that_of_the_explicit_formula(mode):
    """torch.func.jacrev of the layer's output w.r.t. W against the jacobian of the formula
    written out with torch ops on a plain tensor (w / sqrt(sum w²) along the dimension)."""
    torch.manual_seed(3)
    layer = ConditionedLinear(5, 4, conditioning=mode, passes=2).double()
    x = torch.randn(3, 5, dtype=torch.float64)

    def explicit(w):
        def unit(v, dim):
            return v / (v * v).sum(dim, keepdim=True).sqrt()
        w = {"row": lambda: unit(w, 0), "col": lambda: unit(w, 1),
             "rowcol": lambda: unit(unit(unit(unit(w, 0), 1), 0), 1)}[mode]()
        return x @ w.T + layer.bias.detach()

    def through_layer(w):
        return functional_call(layer, {"weight": w, "bias": layer.bias.detach()}, (x,))

    w = layer.weight.detach().clone()
    torch.testing.assert_close(torch.func.jacrev(through_layer)(w), torch.func.jacrev(explicit)(w),
                               rtol=1e-12, atol=1e-12)
