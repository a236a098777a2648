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

__all__ = ["CONDITIONERS", "PARAMETRIZATIONS", "ConditionedWeight"]


class _Equilibrate(torch.autograd.Function):
    """w / max(||w||_2 along ``dim``, eps), with a hand-written backward.

    Same values and gradients as the autograd graph of ``w / norm(w).clamp_min(eps)``, in
    fewer kernels, which is what the per-step overhead on a GPU is made of. Backward, per
    normalised vector with n = ||w|| > eps: d(w/n) = (I - ŵŵᵀ) dw / n; where the norm is
    clamped to eps, n is a constant: dw / eps.
    """

    @staticmethod
    def forward(ctx, weight: Tensor, dim: int, eps: float) -> Tensor:
        unit, projector, norms = _equilibration(weight, dim, eps)
        ctx.save_for_backward(projector, norms, weight)
        ctx.dim, ctx.eps = dim, eps
        return unit

    @staticmethod
    def backward(ctx, grad: Tensor):
        projector, norms, weight = ctx.saved_tensors
        if torch.is_grad_enabled():
            # create_graph=True (double backprop, e.g. gradient regularization): recompute the
            # same formula from the input with differentiable ops, so the graph reaches weight.
            norms = torch.linalg.vector_norm(weight, dim=ctx.dim, keepdim=True).clamp_min(ctx.eps)
            unit = weight / norms
            along = (grad * unit).sum(ctx.dim, keepdim=True) * (norms > ctx.eps)
            return (grad - unit * along) / norms, None, None
        return _equilibrate_vjp(grad, projector, norms, ctx.dim), None, None


def _equilibration(weight: Tensor, dim: int, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """``weight / max(||weight||, eps)`` along ``dim`` and what its gradient needs.

    Returns (unit, projector, norms): unit = weight / norms; norms = max(||w||, eps) (keepdim);
    projector = unit where the norm is above eps and 0 where it was clamped (there E is the
    constant 1/eps, so the vjp projects nothing out).
    """
    norms = torch.linalg.vector_norm(weight, dim=dim, keepdim=True).clamp_min_(eps)
    unit = weight / norms
    return unit, unit * (norms > eps), norms


def _equilibrate_vjp(grad: Tensor, projector: Tensor, norms: Tensor, dim: int, out: Tensor | None = None) -> Tensor:
    """The gradient w.r.t. w of ``w / max(||w||, eps)`` (along ``dim``) given the gradient
    ``grad`` w.r.t. its output: (I - ûûᵀ) grad / n per vector (``_equilibration``'s projector
    and norms). ``out``: a tensor to write into (may be ``grad`` itself)."""
    along = (grad * projector).sum(dim, keepdim=True)
    return torch.addcmul(grad, projector, along, value=-1.0, out=out).div_(norms)


def _equilibrate(weight: Tensor, dim: int, eps: float, detach: bool) -> Tensor:
    """Unit 2-norm slices of ``weight`` along ``dim`` (norms clamped to >= eps)."""
    if detach:  # E's diagonal computed under detach: a constant scaling in backprop
        with torch.no_grad():
            scale = 1.0 / torch.linalg.vector_norm(weight, dim=dim, keepdim=True).clamp_min_(eps)
        return weight * scale
    return _Equilibrate.apply(weight, dim, eps)


# modes whose E W is w / ||w|| along one dimension of weight [out, in] (also what
# ``conditioned_weights_once``'s leaf_grads handles)
_EQUILIBRATED_DIM = {"row": 0, "col": 1}


def _row(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """Paper's E W (rows of W = inputs): unit-norm input columns of weight [out, in]."""
    return _equilibrate(weight, _EQUILIBRATED_DIM["row"], eps, detach)


def _col(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """Paper's W E (columns of W = outputs): unit-norm output rows of weight [out, in]."""
    return _equilibrate(weight, _EQUILIBRATED_DIM["col"], eps, detach)


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
    _weight_cache: dict | None = None  # set by ``conditioned_weights_once``: {grad mode: E W, "leaves": _LeafGroup}

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

    def _condition(self) -> Tensor:
        weight = self.weight
        fn = CONDITIONERS[self.conditioning]
        if weight.dim() == 2:
            return fn(weight, self.eps, self.passes, detach=self.detach_conditioner)
        return fn(weight.flatten(1), self.eps, self.passes, detach=self.detach_conditioner).view_as(weight)

    def conditioned_weight(self) -> Tensor:
        """The weight the layer applies (the paper's (E W)^T in torch layout for ``row``).
        Tensor  # same shape as weight: [out, in] or [out, in/groups, kh, kw]

        Inside ``conditioned_weights_once`` it is computed once per grad mode and reused (once
        for both, as part of a leaf, with ``leaf_grads``).
        """
        cache = self._weight_cache
        if cache is None:
            return self._condition()
        if "leaves" in cache:
            return cache["leaves"].conditioned_weight(self)
        grad = torch.is_grad_enabled()
        if grad not in cache:
            cache[grad] = self._condition()
        return cache[grad]

    def equilibrated_along(self) -> int | None:
        """The dimension of ``weight`` [out, in] that E W normalises to unit length (``row``: 0,
        ``col``: 1), or None when E W is not one such normalisation (other modes, detached E,
        kernels of more than two dimensions)."""
        if self.detach_conditioner or self.stored_weight().dim() != 2:
            return None
        return _EQUILIBRATED_DIM.get(self.conditioning)

    def extra_repr(self) -> str:
        text = f"{super().extra_repr()}, conditioning={self.conditioning}"
        if self.conditioning == "rowcol":
            text += f", passes={self.passes}"
        if self.detach_conditioner:
            text += ", detach_conditioner=True"
        return text
