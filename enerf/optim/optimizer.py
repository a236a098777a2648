"""One entry point the training loops call: Adam (or SGD with momentum, ``optimizer="sgd"``)
plus, per config, BNP gradient preconditioning, L2 regularization in p or z, and gradient
regularization.

    optimizer = build_optimizer(models, lr=cfg.lrate, precond=cfg.precond,
                                weight_decay=cfg.weight_decay, decay_space=cfg.decay_space,
                                grad_reg=cfg.grad_reg)
    ...
    losses.update(optimizer.penalties())       # {"weight_decay": λ||p||²} in p space, else {}
    loss = sum(losses.values())
    optimizer.zero_grad(set_to_none=True)
    optimizer.backward(loss)                    # loss.backward(), or g + 2λ∇²L(Mg) with grad_reg
    optimizer.step()                            # BNP transform, z-space decay, Adam step

Build it after the models are on their device (BNP keeps its statistics beside the weights).
``param_groups``, ``state_dict`` and ``load_state_dict`` behave as the wrapped optimizer's;
the state dict also carries BNP's running statistics, and a plain torch optimizer state dict
(older checkpoints) loads too.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import Tensor, nn

from ..config import DECAY_SPACES, OPTIMIZERS, PRECOND_MODES
from ..errors import ConfigError
from .bnp import BNP
from .regularization import adam_diagonal, decoupled_decay_, gradient_regularized_grads, l2_penalty

__all__ = ["PreconditionedOptimizer", "build_optimizer", "BNP_UNDER_ADAM"]

# What ``--precond bnp`` does under Adam, in one line (the training commands print it).
BNP_UNDER_ADAM = ("--precond bnp under Adam: Adam's per-coordinate normalisation cancels BNP's 1/q² and 1/σ̃² "
                  "scaling (exactly and nearly), so mostly its centring by the input means acts; --optimizer sgd "
                  "runs BNP as its paper does")


class PreconditionedOptimizer:
    """A torch optimizer with optional BNP, weight decay (p or z space) and gradient
    regularization around its step (see ``enerf.optim.regularization`` for the formulas).

    Args:
        params: the trained parameters (in optimizer order).
        optimizer: the wrapped torch optimizer over ``params``.
        bnp: a ``BNP`` over the models' layers, or None.
        weight_decay, decay_space, grad_reg: λ of the L2 term, "p" or "z", λ of ||∇L||².
    """

    def __init__(self, params: list[Tensor], optimizer: torch.optim.Optimizer, bnp: BNP | None = None,
                 weight_decay: float = 0.0, decay_space: str = "z", grad_reg: float = 0.0) -> None:
        if decay_space not in DECAY_SPACES:
            raise ConfigError(f"decay_space {decay_space!r} is not one of {', '.join(DECAY_SPACES)}", ("decay_space",))
        if weight_decay < 0 or grad_reg < 0:
            raise ConfigError(f"weight_decay and grad_reg must be >= 0, got {weight_decay}, {grad_reg}",
                              ("weight_decay", "grad_reg"))
        self.params = list(params)
        self.optimizer = optimizer
        self.bnp = bnp
        self.weight_decay = float(weight_decay)
        self.decay_space = decay_space
        self.grad_reg = float(grad_reg)

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def penalties(self) -> dict[str, Tensor]:
        """Loss terms this optimizer adds: λ||p||² in p space (eq. 10), nothing otherwise."""
        if self.weight_decay > 0 and self.decay_space == "p":
            return {"weight_decay": l2_penalty(self.params, self.weight_decay)}
        return {}

    def _preconditioner(self, grads: list[Tensor | None]) -> list[Tensor | None]:
        """M g with M = (Adam's diagonal) · (BNP's P Pᵀ / q²), as the step will apply them."""
        if self.bnp is not None:
            if self.bnp.pending:
                self.bnp.update_statistics()
            grads = self.bnp.transform(self.params, grads)
        return adam_diagonal(self.optimizer, self.params, grads)

    def backward(self, loss: Tensor) -> None:
        """Accumulate d(loss)/dp into ``.grad``, plus 2λ∇²L(Mg) when gradient regularization
        is on (M = I in p space)."""
        if self.grad_reg == 0:
            loss.backward()
            return
        precondition = self._preconditioner if self.decay_space == "z" else None
        grads = gradient_regularized_grads(loss, self.params, self.grad_reg, precondition)
        for p, g in zip(self.params, grads):
            if g is None:
                continue
            if p.grad is None:
                p.grad = g
            else:
                p.grad.add_(g)

    def step(self) -> None:
        """BNP gradient transform, z-space decay (-2αλp), then the optimizer's step."""
        if self.bnp is not None:
            self.bnp.precondition()
        if self.weight_decay > 0 and self.decay_space == "z":
            for group in self.optimizer.param_groups:
                decoupled_decay_([p for p in group["params"] if p.grad is not None], group["lr"], self.weight_decay)
        self.optimizer.step()

    def state_dict(self) -> dict:
        return {"optimizer": self.optimizer.state_dict(), "bnp": None if self.bnp is None else self.bnp.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if "param_groups" in state:  # a bare torch optimizer state dict
            self.optimizer.load_state_dict(state)
            return
        self.optimizer.load_state_dict(state["optimizer"])
        if self.bnp is not None and state.get("bnp") is not None:
            self.bnp.load_state_dict(state["bnp"])


def build_optimizer(
    models: nn.Module | Iterable[nn.Module],
    lr: float,
    precond: str = "none",
    weight_decay: float = 0.0,
    decay_space: str = "z",
    grad_reg: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    lr_scale: Callable[[str], float] | None = None,
    optimizer: str = "adam",
    momentum: float = 0.9,
    reduce_moments: Callable[[list], None] | None = None,
) -> PreconditionedOptimizer:
    """Adam (``optimizer="adam"``, ``betas``) or SGD with heavy-ball ``momentum`` (``"sgd"``: the
    optimiser of BNP's paper, where its 1/q² and 1/σ̃² scaling survives) over every parameter of
    ``models`` (each once), wrapped with the chosen preconditioner and regularizers.
    ``precond``: one of ``PRECOND_MODES``.

    ``lr_scale(name)`` (name as in ``named_parameters``) puts a parameter in a group whose
    learning rate is ``lr * lr_scale(name)``; each group records its ``lr_scale`` so that a
    schedule can set ``group["lr"] = lr(step) * group["lr_scale"]``. None: one group, scale 1.
    ``reduce_moments``: BNP's (``BNP``), for data-parallel runs."""
    if precond not in PRECOND_MODES:
        raise ConfigError(f"precond {precond!r} is not one of {', '.join(PRECOND_MODES)}", ("precond",))
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"optimizer {optimizer!r} is not one of {', '.join(OPTIMIZERS)}", ("optimizer",))
    models = [models] if isinstance(models, nn.Module) else list(models)
    params, seen, groups = [], set(), {}
    for model in models:
        for name, p in model.named_parameters():
            if id(p) not in seen:
                seen.add(id(p))
                params.append(p)
                groups.setdefault(1.0 if lr_scale is None else float(lr_scale(name)), []).append(p)
    param_groups = [{"params": ps, "lr": lr * scale, "lr_scale": scale} for scale, ps in groups.items()]
    if optimizer == "sgd":
        inner: torch.optim.Optimizer = torch.optim.SGD(param_groups, lr=lr, momentum=momentum)
    else:
        inner = torch.optim.Adam(param_groups, lr=lr, betas=betas)
    bnp = BNP(models, reduce_moments=reduce_moments) if precond == "bnp" else None
    return PreconditionedOptimizer(params, inner, bnp, weight_decay, decay_space, grad_reg)
