"""Regularization in the original parameters p or in the preconditioned ones z, where p = P z.

Source: Ye et al., "Preconditioning, adaptive learning rates and regularization"
(``../shared/papers/preconditioning-adaptive-lr-regularization.txt``). A preconditioned
update p_{t+1} = p_t - α M ∇L(p_t) with M = P Pᵀ is gradient descent in z = P⁻¹ p (its
eqs. 4-5). Adam is such an update with M_t = diag(1 / (sqrt(v̂_t) + ε)) (its section on
adaptive learning rates), and BNP contributes its P Pᵀ / q² (``enerf.optim.bnp``).

L2 regularization, two spaces (λ is the coefficient of the squared norm; p is every trained
parameter: weights, biases and wn gains, as torch's Adam / AdamW weight_decay treat them):

* ``p`` (eq. 10): L_p(p) = L(p) + λ ||p||²; the penalty is a loss term, so the optimizer
  preconditions its gradient too: p_{t+1} = p_t - α M (∇L(p_t) + 2 λ p_t).
  With Adam this is torch's ``Adam(weight_decay=2λ)``.
* ``z`` (eq. 9): L_z = L(P z) + λ ||z||² = L(p) + λ ||P⁻¹ p||². Gradient descent in z,
  multiplied by P, gives the decoupled update (the equation right after eq. 9)

      p_{t+1} = p_t - α M ∇L(p_t) - 2 α λ p_t,

  whatever M is: weight decay. With Adam this is exactly AdamW with weight_decay = 2λ
  (AdamW shrinks p_t by (1 - α·wd) before its Adam step, which does not depend on p_t).
  ``decoupled_decay_`` applies the -2αλp_t part before the optimizer step.

Gradient regularization R = ||∇L||² (eq. 11), in z (eq. 12): L(Pz) + λ ||∇_z L(Pz)||², whose
gradient step, multiplied by P, is

      p_{t+1} = p_t - α M ∇L(p_t) - 2 α λ M ∇²L(p_t) M ∇L(p_t).

``gradient_regularized_grads`` returns g + 2λ ∇²L·(M g) (one Hessian-vector product by
double backprop, with M g held constant); the optimizer then multiplies the sum by M.
In ``p`` space M is left out of the Hessian-vector product: g + 2λ ∇²L g = ∇(L + λ||∇L||²).
For Adam, M g uses the second-moment estimate this step will have from g alone,
v̂ = (β₂ v + (1 - β₂) g²) / (1 - β₂^t); momentum is not part of M.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import Tensor

__all__ = ["l2_penalty", "decoupled_decay_", "adam_diagonal", "gradient_regularized_grads"]


def l2_penalty(params: Iterable[Tensor], lam: float) -> Tensor:
    """λ Σ ||p||² over ``params`` (eq. 10's regularizer): Tensor  # [] (differentiable)."""
    params = list(params)
    return lam * sum(p.square().sum() for p in params)


@torch.no_grad()
def decoupled_decay_(params: Iterable[Tensor], lr: float, lam: float) -> None:
    """p <- (1 - 2 α λ) p in place: the z-space decay term of the update after eq. 9."""
    for p in params:
        p.mul_(1.0 - 2.0 * lr * lam)


@torch.no_grad()
def adam_diagonal(optimizer: torch.optim.Optimizer, params: list[Tensor], grads: list[Tensor | None]) -> list[Tensor | None]:
    """M g for the optimizer's diagonal preconditioner M: Adam / AdamW's 1 / (sqrt(v̂) + ε)
    with v̂ updated by g as this step will (bias-corrected); identity for SGD."""
    groups = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    adaptive = isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW))
    out: list[Tensor | None] = []
    for p, g in zip(params, grads):
        if g is None or not adaptive:
            out.append(g)
            continue
        group = groups[id(p)]
        beta2, eps = group["betas"][1], group["eps"]
        state = optimizer.state.get(p, {})
        step = int(state["step"]) + 1 if "step" in state else 1
        v = state["exp_avg_sq"] * beta2 + (1 - beta2) * g.square() if "exp_avg_sq" in state else (1 - beta2) * g.square()
        v_hat = v / (1 - beta2 ** step)
        out.append(g / (v_hat.sqrt() + eps))
    return out


def gradient_regularized_grads(
    loss: Tensor,
    params: list[Tensor],
    lam: float,
    precondition: Callable[[list[Tensor | None]], list[Tensor | None]] | None = None,
) -> list[Tensor | None]:
    """g + 2λ ∇²L (M g) for every parameter (None where ``loss`` does not depend on it).

    ``precondition`` maps a gradient list to M·(gradient list) (z space, eq. 12); None means
    M = I (p space, eq. 11). Costs one extra backward pass through the graph of the gradient.
    """
    grads = torch.autograd.grad(loss, params, create_graph=True, allow_unused=True)
    plain = [None if g is None else g.detach() for g in grads]
    direction = precondition(plain) if precondition is not None else plain
    used = [(i, g) for i, g in enumerate(grads) if g is not None and g.requires_grad]
    if not used:
        return plain
    hvp = torch.autograd.grad(
        [g for _, g in used], params, grad_outputs=[direction[i].detach() for i, _ in used], allow_unused=True,
    )
    return [
        None if g is None else (g if h is None else g + 2.0 * lam * h)
        for g, h in zip(plain, hvp)
    ]
