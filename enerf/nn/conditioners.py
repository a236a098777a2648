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

__all__ = ["CONDITIONERS", "PARAMETRIZATIONS", "INIT_WEIGHTS", "ConditionedWeight", "equilibrate"]


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
    """``row`` then ``col``, ``passes`` times: the column norms are those of E_r W (sequential
    reading of the paper's "row equilibration on the left and column equilibration on the right")."""
    for _ in range(passes):
        weight = _col(_row(weight, eps, detach=detach), eps, detach=detach)
    return weight


def _rowcol_indep(weight: Tensor, eps: float, passes: int = 1, *, detach: bool = False) -> Tensor:
    """E_r W E_c with both diagonals read from W itself (the other reading of the paper's
    double-sided equilibration): w_ji / (max(||W[:, i]||, eps) · max(||W[j, :]||, eps)) in torch
    layout. One pass; ``passes`` is not used."""
    in_norms = torch.linalg.vector_norm(weight, dim=0, keepdim=True).clamp_min(eps)
    out_norms = torch.linalg.vector_norm(weight, dim=1, keepdim=True).clamp_min(eps)
    if detach:
        in_norms, out_norms = in_norms.detach(), out_norms.detach()
    return weight / in_norms / out_norms


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
    "rowcol_indep": _rowcol_indep,
    "wn": _wn,
    "ws": _ws,
}

# mode -> f(layer) registering a torch parametrization on ``layer.weight`` at construction
# (the modes whose reparameterisation owns extra parameters).
PARAMETRIZATIONS: dict[str, Callable[[nn.Module], None]] = {
    "wn": _register_weight_norm,
}


# What the layer applies at step 0 (``--init_weights``):
#   native        each mode's own start (none: W0; row: E(W0) W0; ...): the default
#   equilibrated  E(W0) W0, row's start; under ``none`` W0 is replaced by E(W0) W0 at construction
#   vanilla       the applied weight's Frobenius norm at step 0 equals ||W0||_F: a conditioned
#                 layer multiplies its conditioned weight by c = ||W0||_F / ||C(W0)||_F, a constant
#                 computed once and kept in the buffer ``init_gain`` (so a checkpoint restores it)
INIT_WEIGHTS = ("native", "equilibrated", "vanilla")


def check_init_weights(conditioning: str, init_weights: str) -> None:
    """Raise ``ConfigError`` on an ``init_weights`` that is unknown or has no meaning for the mode."""
    if init_weights not in INIT_WEIGHTS:
        raise ConfigError(f"init_weights {init_weights!r} is not one of {', '.join(INIT_WEIGHTS)}", ("init_weights",))
    if init_weights == "equilibrated" and conditioning not in ("none", "row"):
        raise ConfigError(f"init_weights equilibrated is E(W0) W0, row's start: use it with conditioning none or row, "
                          f"not {conditioning}", ("init_weights", "conditioning"))
    if init_weights == "vanilla" and conditioning == "wn":
        raise ConfigError("init_weights vanilla: wn already starts at the plain layer's weights (g = ||v||); "
                          "use native", ("init_weights", "conditioning"))


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
    init_weights: str = "native"

    def _set_conditioning(self, conditioning: str, eps: float, detach_conditioner: bool, passes: int,
                          init_weights: str = "native") -> None:
        """Validate and store the mode; register its parametrization (``wn``) on ``weight``; set the
        step-0 weights ``init_weights`` asks for (see ``INIT_WEIGHTS``; ``native`` changes nothing)."""
        check_conditioning(conditioning, eps, detach_conditioner, passes)
        check_init_weights(conditioning, init_weights)
        self.conditioning = conditioning
        self.eps = float(eps)
        self.detach_conditioner = bool(detach_conditioner)
        self.passes = int(passes)
        self.init_weights = init_weights
        if conditioning in PARAMETRIZATIONS:
            PARAMETRIZATIONS[conditioning](self)
        if init_weights == "equilibrated" and conditioning == "none":
            with torch.no_grad():  # W0 <- E(W0) W0: the function row starts from, trained plainly
                matrix = self.weight.flatten(1)
                self.weight.copy_(_row(matrix, self.eps).view_as(self.weight))
        elif init_weights == "vanilla" and conditioning != "none":
            with torch.no_grad():  # c = ||W0||_F / ||C(W0)||_F, fixed for the whole run
                applied = CONDITIONERS[conditioning](self.weight.flatten(1), self.eps, self.passes)
                gain = torch.linalg.vector_norm(self.weight) / torch.linalg.vector_norm(applied).clamp_min(self.eps)
            self.register_buffer("init_gain", gain.detach().clone())

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
            applied = fn(weight, self.eps, self.passes, detach=self.detach_conditioner)
        else:
            applied = fn(weight.flatten(1), self.eps, self.passes, detach=self.detach_conditioner).view_as(weight)
        gain = getattr(self, "init_gain", None)  # init_weights vanilla: c · C(W)
        return applied if gain is None else applied * gain

    def extra_repr(self) -> str:
        text = f"{super().extra_repr()}, conditioning={self.conditioning}"
        if self.conditioning == "rowcol":
            text += f", passes={self.passes}"
        if self.detach_conditioner:
            text += ", detach_conditioner=True"
        if self.init_weights != "native":
            text += f", init_weights={self.init_weights}"
        return text
