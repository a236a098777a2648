"""Equilibrated weight conditioning (Saratchandran et al., "Weight Conditioning for Smooth
Optimization of Neural Networks", sections 4-5).

Notation mapping. The paper writes layer k as

    F_k(x) = phi((P_k W_k)^T x + b_k),   W_k in R^{n_{k-1} x n_k},

so the paper's W_k has one *row per input unit* (n_{k-1}) and one *column per output unit*
(n_k). PyTorch's ``nn.Linear`` stores ``weight`` with shape (out, in) = (n_k, n_{k-1}), i.e.
``weight = W_k^T``. Therefore:

* ``row``    (paper: E = diag(1/||(W_k)_{i:}||_2) over the n_{k-1} rows, applied as E W):
             each *input column* ``weight[:, i]`` is scaled to unit norm;
* ``col``    (paper: W E with E over the n_k columns):
             each *output row* ``weight[j, :]`` is scaled to unit norm;
* ``rowcol`` row then column equilibration, optionally repeated ``passes`` times
             (alternating passes converge towards a matrix with unit rows and columns).

E is recomputed from W in every forward pass and gradients flow through it (the layer is a
reparameterisation of W), unless ``detach_conditioner=True``, where E is treated as a
constant. Norms are clamped to at least ``eps`` so a zero row or column stays zero.

Degenerate cases: under ``row`` a layer with a single output (paper's W is n x 1, e.g. a
density head) becomes sign(W) and can no longer learn its scale; under ``col`` the same
happens to a layer with a single input.
"""

from __future__ import annotations

import copy
import math
from typing import Callable

import torch
from torch import Tensor, nn

from ..errors import ConfigError

__all__ = [
    "CONDITIONERS",
    "ConditionedLinear",
    "condition_number",
    "condition_numbers",
    "fold_module",
]


def _scale(norms: Tensor, eps: float, detach: bool) -> Tensor:
    scale = 1.0 / norms.clamp_min(eps)
    return scale.detach() if detach else scale


def _row(weight: Tensor, eps: float, passes: int, detach: bool) -> Tensor:
    """Paper's row equilibration E W: unit-norm input columns of the torch (out, in) weight."""
    return weight * _scale(weight.norm(dim=0, keepdim=True), eps, detach)


def _col(weight: Tensor, eps: float, passes: int, detach: bool) -> Tensor:
    """Paper's column equilibration W E: unit-norm output rows of the torch (out, in) weight."""
    return weight * _scale(weight.norm(dim=1, keepdim=True), eps, detach)


def _rowcol(weight: Tensor, eps: float, passes: int, detach: bool) -> Tensor:
    """Row then column equilibration, ``passes`` times."""
    for _ in range(max(1, passes)):
        weight = _col(_row(weight, eps, passes, detach), eps, passes, detach)
    return weight


def _none(weight: Tensor, eps: float, passes: int, detach: bool) -> Tensor:
    return weight


# mode -> f(weight [out, in], eps, passes, detach) -> conditioned weight [out, in]
CONDITIONERS: dict[str, Callable[[Tensor, float, int, bool], Tensor]] = {
    "none": _none,
    "row": _row,
    "col": _col,
    "rowcol": _rowcol,
}


class ConditionedLinear(nn.Linear):
    """``nn.Linear`` whose weight is equilibrated in every forward pass: y = x (E W)^T + b.

    Args:
        in_features, out_features, bias: as ``nn.Linear``.
        conditioning: one of ``CONDITIONERS`` ("none" is a plain linear layer).
        eps: lower bound on the norms that are inverted.
        detach_conditioner: treat E as a constant in backprop.
        passes: alternating passes for ``rowcol``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        conditioning: str = "none",
        eps: float = 1e-8,
        detach_conditioner: bool = False,
        passes: int = 1,
        device=None,
        dtype=None,
    ) -> None:
        if conditioning not in CONDITIONERS:
            raise ConfigError(f"conditioning {conditioning!r} is not one of {', '.join(CONDITIONERS)}")
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.conditioning = conditioning
        self.eps = float(eps)
        self.detach_conditioner = bool(detach_conditioner)
        self.passes = int(passes)

    def conditioned_weight(self) -> Tensor:
        """E W in torch layout: Tensor  # [out_features, in_features]."""
        return CONDITIONERS[self.conditioning](self.weight, self.eps, self.passes, self.detach_conditioner)

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., in_features] -> Tensor  # [..., out_features]."""
        return nn.functional.linear(x, self.conditioned_weight(), self.bias)

    @torch.no_grad()
    def fold(self) -> nn.Linear:
        """A plain ``nn.Linear`` with weight E W: same outputs, no conditioning cost."""
        plain = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None,
                          device=self.weight.device, dtype=self.weight.dtype)
        plain.weight.copy_(self.conditioned_weight())
        if self.bias is not None:
            plain.bias.copy_(self.bias)
        return plain

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, conditioning={self.conditioning}"


def _kappa(matrix: Tensor) -> float:
    s = torch.linalg.svdvals(matrix.detach().to(torch.float64).cpu())
    return math.inf if s[-1] == 0 else float(s[0] / s[-1])


def condition_number(layer: ConditionedLinear) -> tuple[float, float]:
    """(κ(W), κ(EW)) of one layer, from singular values in float64 (κ = σ_max / σ_min)."""
    with torch.no_grad():
        return _kappa(layer.weight), _kappa(layer.conditioned_weight())


def condition_numbers(module: nn.Module) -> dict[str, tuple[float, float]]:
    """(κ(W), κ(EW)) for every ConditionedLinear inside ``module``, keyed by its name."""
    return {name: condition_number(m) for name, m in module.named_modules() if isinstance(m, ConditionedLinear)}


def fold_module(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` with every ConditionedLinear replaced by its folded nn.Linear."""
    folded = copy.deepcopy(module)
    for name, child in list(folded.named_modules()):
        if isinstance(child, ConditionedLinear):
            parent_name, _, attr = name.rpartition(".")
            parent = folded.get_submodule(parent_name) if parent_name else folded
            if isinstance(parent, (nn.ModuleList, nn.Sequential)):
                parent[int(attr)] = child.fold()
            else:
                setattr(parent, attr, child.fold())
    return folded
