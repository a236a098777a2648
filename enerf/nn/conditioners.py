"""The conditioners of a weight matrix (E W, weight standardization, weight normalization) and
``ConditionedWeight``, the behaviour ``ConditionedLinear`` and ``ConditionedConv2d`` share.

Every conditioner maps a matrix [out, in] to a matrix of the same shape; the modes, their
layout and their degenerate cases are described in ``enerf.nn.conditioning``. A convolution
kernel [out, in/groups, kh, kw] is conditioned as the matrix [out, in/groups · kh · kw] (one
row per output channel: the layout of BNP's Algorithm 3 and of ``weight_norm(dim=0)``), so
``row`` gives every (input channel, kernel position) column unit norm across the output
channels, ``col`` / ``ws`` / ``wn`` act on each output channel's whole kernel.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor, nn

from ..errors import ConfigError

__all__ = ["CONDITIONERS", "PARAMETRIZATIONS", "ConditionedWeight", "equilibrate"]


def equilibrate(weight: Tensor, dim: int, eps: float, detach: bool = False) -> Tensor:
    """Unit 2-norm slices of ``weight`` along ``dim``: w / max(||w||_2, eps), the one place E is made.

    E is computed from W in every call and autograd differentiates through it (per vector with
    ||w|| > eps: d(w/||w||) = (I - ŵŵᵀ) dw / ||w||; where the norm is clamped to eps, E is the
    constant 1/eps). With ``detach`` the norms are constants in backprop: dw / ||w||.
    Any backward works (``loss.backward()``, ``torch.autograd.grad``, double backprop).

    weight: Tensor  # [out, in] -> Tensor  # [out, in]
    """
    norms = torch.linalg.vector_norm(weight, dim=dim, keepdim=True).clamp_min(eps)
    return weight / (norms.detach() if detach else norms)


def _row(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """Paper's E W (rows of W = inputs): unit-norm input columns of weight [out, in]."""
    return equilibrate(weight, 0, eps, detach)


def _col(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """Paper's W E (columns of W = outputs): unit-norm output rows of weight [out, in]."""
    return equilibrate(weight, 1, eps, detach)


def _rowcol(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """``row`` then ``col``, ``passes`` times."""
    for _ in range(passes):
        weight = _col(_row(weight, eps, detach=detach), eps, detach=detach)
    return weight


def _none(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    return weight


def _ws(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """Weight standardization: (w - mean) / sqrt(var + eps) over the inputs of each output row."""
    if detach:  # mean and scale computed under detach: constants in backprop
        with torch.no_grad():
            var, mean = torch.var_mean(weight, dim=1, keepdim=True, correction=0)
            scale = torch.rsqrt(var + eps)
        return (weight - mean) * scale
    var, mean = torch.var_mean(weight, dim=1, keepdim=True, correction=0)
    return (weight - mean) * torch.rsqrt(var + eps)


def _wn(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """Weight normalization: ``weight`` is already g·v/||v|| (torch's parametrization, see
    ``PARAMETRIZATIONS``), so this entry passes it through."""
    return weight


def _register_weight_norm(layer: nn.Module) -> None:
    torch.nn.utils.parametrizations.weight_norm(layer, name="weight", dim=0)


# mode -> f(weight [out, in], eps, passes, *, detach=False) -> conditioned weight [out, in]
CONDITIONERS: dict[str, Callable[..., Tensor]] = {
    "none": _none,
    "row": _row,
    "col": _col,
    "rowcol": _rowcol,
    "wn": _wn,
    "ws": _ws,
}

# mode -> f(layer) registering a torch parametrization on ``layer.weight`` at construction
# (the modes whose reparameterisation owns extra parameters).
PARAMETRIZATIONS: dict[str, Callable[[nn.Module], None]] = {
    "wn": _register_weight_norm,
}


def check_conditioning(conditioning: str, eps: float, detach_conditioner: bool, passes: int) -> None:
    """Raise ``ConfigError`` on a mode, eps or passes a conditioned layer cannot take."""
    if conditioning not in CONDITIONERS:
        raise ConfigError(f"conditioning {conditioning!r} is not one of {', '.join(CONDITIONERS)}")
    if int(passes) < 1:
        raise ConfigError(f"conditioning passes must be >= 1, got {passes}")
    if not eps > 0:
        raise ConfigError(f"conditioning eps must be > 0, got {eps}")
    if detach_conditioner and conditioning in PARAMETRIZATIONS:
        raise ConfigError(f"detach_conditioner is not available with conditioning {conditioning}; turn it off",
                          ("detach_conditioner", "conditioning"))


class ConditionedWeight:
    """Mixin for a torch layer with a ``weight`` [out, ...] that it applies conditioned.

    Put it before the torch class (``class ConditionedLinear(ConditionedWeight, nn.Linear)``);
    the layer's ``__init__`` calls ``check_conditioning`` before building its parameters and
    ``_set_conditioning`` after.
    """

    conditioning: str = "none"
    eps: float = 1e-8
    detach_conditioner: bool = False
    passes: int = 1

    def _set_conditioning(self, conditioning: str, eps: float, detach_conditioner: bool, passes: int) -> None:
        """Validate and store the mode; register its parametrization (``wn``) on ``weight``."""
        check_conditioning(conditioning, eps, detach_conditioner, passes)
        self.conditioning = conditioning
        self.eps = float(eps)
        self.detach_conditioner = bool(detach_conditioner)
        self.passes = int(passes)
        if conditioning in PARAMETRIZATIONS:
            PARAMETRIZATIONS[conditioning](self)

    def stored_weight(self) -> Tensor:
        """The trained parameter the conditioner reads: ``weight`` itself, or v
        (``parametrizations.weight.original1``) for ``wn``. Tensor  # same shape as weight"""
        if self.conditioning == "wn":
            return self.parametrizations.weight.original1
        return self.weight

    def conditioned_weight(self) -> Tensor:
        """The weight the layer applies (the paper's (E W)^T in torch layout for ``row``),
        recomputed from ``weight`` in every call, so gradients reach W through E.
        Tensor  # same shape as weight: [out, in] or [out, in/groups, kh, kw]
        """
        weight, fn = self.weight, CONDITIONERS[self.conditioning]
        if weight.dim() == 2:
            return fn(weight, self.eps, self.passes, detach=self.detach_conditioner)
        return fn(weight.flatten(1), self.eps, self.passes, detach=self.detach_conditioner).view_as(weight)

    def extra_repr(self) -> str:
        text = f"{super().extra_repr()}, conditioning={self.conditioning}"
        if self.conditioning == "rowcol":
            text += f", passes={self.passes}"
        if self.detach_conditioner:
            text += ", detach_conditioner=True"
        return text
