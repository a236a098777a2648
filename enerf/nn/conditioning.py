"""Equilibrated weight conditioning (Saratchandran et al., "Weight Conditioning for Smooth
Optimization of Neural Networks", sections 4-5), as a drop-in replacement for ``nn.Linear``.

Notation mapping
----------------
The paper writes layer k of the conditioned network as (its eq. 16)

    F_k = phi((P_k W_k)^T F_{k-1} + b_k),   W_k in R^{n_{k-1} x n_k},   P_k = E_k,

so the paper's W_k has one *row per input unit* (n_{k-1} of them) and one *column per output
unit* (n_k). PyTorch's ``nn.Linear`` stores ``weight`` with shape (out, in) = (n_k, n_{k-1}),
i.e. ``weight = W_k^T``, and computes ``x @ weight.T + b = x @ W_k + b``. Therefore:

* ``row``    the paper's row equilibration E_k W_k with E_k = diag(1 / ||(W_k)_{i:}||_2) over
             the n_{k-1} rows, i.e. over the INPUT units. In torch layout every input column
             ``weight[:, i]`` is scaled to unit 2-norm.
* ``col``    the paper's column equilibration W_k E_k with E_k over the n_k columns, i.e. the
             OUTPUT units. In torch layout every output row ``weight[j, :]`` gets unit norm.
* ``rowcol`` ``row`` then ``col``, repeated ``passes`` times (alternating equilibration;
             for square matrices it converges to unit rows and columns, for an m x n one to
             unit columns and rows of norm sqrt(n/m), since both sum to ||W||_F^2). The column
             norms are those of E_r W: one reading of the paper's "row equilibration on the left
             and column equilibration on the right".
* ``rowcol_indep`` the other reading: E_r W E_c with E_c from the column norms of W itself,
             i.e. w_ji / (||W[:, i]|| ||W[j, :]||) in torch layout (one pass).
* ``none``   W itself (a plain ``nn.Linear``).
* ``wn``     weight normalization (Salimans & Kingma, "Weight Normalization: A Simple
             Reparameterization to Accelerate Training of Deep Neural Networks", NeurIPS 2016,
             eq. 2): w_j = g_j · v_j / ||v_j||_2 per OUTPUT unit j (torch row ``weight[j, :]``),
             with a learnable gain g_j. Implemented by registering torch's own parametrization
             ``torch.nn.utils.parametrizations.weight_norm(layer, "weight", dim=0)`` on the layer,
             so the stored parameters are ``parametrizations.weight.original0`` (g, [out, 1],
             initialised to ||v_j|| so the layer starts as the plain one) and ``original1`` (v).
* ``ws``     weight standardization (Qiao et al., "Micro-Batch Training with Batch-Channel
             Normalization and Weight Standardization", 2019, eq. 5): per OUTPUT unit j,
             ŵ_ji = (w_ji - mean_i w_ji) / sqrt(var_i w_ji + eps), the variance being the biased
             (population) one over the n_{k-1} inputs, i.e. zero mean, unit variance per output.

``passes`` only matters for ``rowcol``: ``row`` and ``col`` are idempotent. For ``wn`` the
registry entry passes the already parametrized ``layer.weight`` through (torch computes
g·v/||v||); ``detach_conditioner`` is refused for ``wn`` (torch's parametrization has no such
switch). Under ``ws`` a layer with a single input becomes zero, as ``col`` makes it sign(W).

E is recomputed from W in every forward pass (``equilibrate`` in ``enerf.nn.conditioners``:
w / max(||w||, eps) along one dimension), so the layer is a reparameterisation of W and
autograd differentiates through E: one gradient path, valid for ``loss.backward()``,
``torch.autograd.grad`` and double backprop alike. With ``detach_conditioner=True`` the
diagonal of E is computed under ``detach`` and acts as a constant in backprop. Each norm is
clamped to at least ``eps`` before it is inverted, so a zero row or column stays zero (no NaN).

Degenerate cases: under ``row`` a layer with a single output (the paper's W is n x 1, e.g. a
density head) becomes sign(W) and can no longer learn its scale; under ``col`` the same
happens to a layer with a single input.

What the theory does and does not promise (checked numerically in tests/unit/test_conditioning.py):
the paper's Prop. 1 states κ(EW) ≤ κ(W) for every W; it holds for badly row/column-scaled
matrices but not for every matrix (κ rises for 4-13 % of plain Gaussian matrices depending on
the shape: studies/kappa_shapes.py); Van der Sluis's theorem, quoted by the paper without it,
carries a factor: κ(EA) ≤ sqrt(m) · min_D κ(DA) for m rows.
"""

from __future__ import annotations

import copy
import math
from typing import Callable

import torch
from torch import Tensor, nn

from .conditioners import (  # the math lives there; CONDITIONERS, PARAMETRIZATIONS re-exported
    CONDITIONERS,
    INIT_WEIGHTS,
    PARAMETRIZATIONS,
    ConditionedWeight,
    check_conditioning,
    check_init_weights,
    equilibrate,
)
from ..errors import ConfigError

__all__ = [
    "CONDITIONERS",
    "INIT_WEIGHTS",
    "PARAMETRIZATIONS",
    "ConditionedLinear",
    "ConditionedWeight",
    "equilibrate",
    "condition_number",
    "condition_numbers",
    "fold_module",
    "select_layers",
]


class ConditionedLinear(ConditionedWeight, nn.Linear):
    """``nn.Linear`` whose weight is equilibrated in every forward pass: y = x (E W)^T + b.

    Same parameters, state-dict keys and default initialisation as ``nn.Linear``; ``fold()``
    returns the equivalent plain layer.

    Args:
        in_features, out_features, bias, device, dtype: as ``nn.Linear``.
        conditioning: a key of ``CONDITIONERS`` ("none" behaves as a plain linear layer).
        eps: lower bound on the norms that are inverted (> 0).
        detach_conditioner: compute E's diagonal under detach (E is a constant in backprop).
        passes: alternating passes for ``rowcol`` (>= 1).
        init_weights: the weights applied at step 0: ``native`` (the mode's own), ``equilibrated``
            (E(W0) W0) or ``vanilla`` (Frobenius norm of W0); see ``enerf.nn.conditioners.INIT_WEIGHTS``.
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
        init_weights: str = "native",
        device=None,
        dtype=None,
    ) -> None:
        check_conditioning(conditioning, eps, detach_conditioner, passes)
        check_init_weights(conditioning, init_weights)
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self._set_conditioning(conditioning, eps, detach_conditioner, passes, init_weights)

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., in_features] -> Tensor  # [..., out_features]."""
        return nn.functional.linear(x, self.conditioned_weight(), self.bias)

    @torch.no_grad()
    def fold(self) -> nn.Linear:
        """A plain ``nn.Linear`` with weight E W (a detached copy) and the same bias."""
        plain = nn.Linear(
            self.in_features, self.out_features, bias=self.bias is not None,
            device=self.weight.device, dtype=self.weight.dtype,
        )
        plain.weight.copy_(self.conditioned_weight())
        if self.bias is not None:
            plain.bias.copy_(self.bias)
        return plain


def _kappa(weight: Tensor) -> float:
    """κ of ``weight`` viewed as [out, rest] (a conv kernel as [out, in/groups · kh · kw])."""
    s = torch.linalg.svdvals(weight.detach().flatten(1).to(device="cpu", dtype=torch.float64))
    return math.inf if s[-1] == 0 else float(s[0] / s[-1])


def condition_number(layer: nn.Linear | nn.Conv2d) -> tuple[float, float]:
    """(κ(W), κ(EW)) of one layer: σ_max / σ_min in float64, inf when σ_min = 0.

    W is the stored parameter (v for ``wn``), EW the weight the layer applies; a convolution
    kernel counts as the matrix [out, in/groups · kh · kw] that its conditioner sees.

    A plain ``nn.Linear`` / ``nn.Conv2d`` gives (κ(W), κ(W)). Transposition does not change κ, so the
    values are the same in the paper's and in torch's layout.
    """
    with torch.no_grad():
        if isinstance(layer, ConditionedWeight):
            return _kappa(layer.stored_weight()), _kappa(layer.conditioned_weight())
        return _kappa(layer.weight), _kappa(layer.weight)


def condition_numbers(module: nn.Module) -> dict[str, tuple[float, float]]:
    """{submodule name: (κ(W), κ(EW))} for every conditioned layer inside ``module``."""
    return {name: condition_number(m) for name, m in module.named_modules() if isinstance(m, ConditionedWeight)}


def replace_submodules(root: nn.Module, new_for: Callable[[str, nn.Module], nn.Module | None]) -> list[str]:
    """Replace, in place, each submodule of ``root`` for which ``new_for(name, module)`` returns
    a module; a module registered under several names is asked once and replaced under each.
    Returns the names replaced, in ``named_modules`` order."""
    made: dict[int, nn.Module | None] = {}
    replaced = []
    for name, child in list(root.named_modules(remove_duplicate=False)):
        if not name:
            continue
        if id(child) not in made:
            made[id(child)] = new_for(name, child)
        if made[id(child)] is not None:
            parent_name, _, attr = name.rpartition(".")
            # ModuleList / Sequential children are registered under their index as a string,
            # so setattr replaces them in place like any named child.
            setattr(root.get_submodule(parent_name), attr, made[id(child)])
            replaced.append(name)
    return replaced


def fold_module(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` with every conditioned layer replaced by its folded plain layer
    (``ConditionedLinear`` -> ``nn.Linear``, ``ConditionedConv2d`` -> ``nn.Conv2d``).

    The copy has the same state-dict keys, so its weights also load into a field built with
    ``conditioning="none"`` (or the model before ``condition_model``).
    """
    folded = copy.deepcopy(module)
    if isinstance(folded, ConditionedWeight):
        return folded.fold()
    replace_submodules(folded, lambda name, child: child.fold() if isinstance(child, ConditionedWeight) else None)
    return folded


def select_layers(spec: str, names: list[str], hidden: list[str]) -> set[str]:
    """The layers a ``--conditioned_layers`` spec picks.

    Args:
        spec: comma-separated tokens: ``hidden`` (the ``hidden`` names), ``all``, ``none`` or
            layer names from ``names``.
        names: every linear layer of the network.
        hidden: the network's hidden layers.

    Raises:
        ConfigError: a token that is neither a group nor a layer name.
    """
    groups = {"hidden": set(hidden), "all": set(names), "none": set()}
    chosen: set[str] = set()
    unknown = []
    for token in (t.strip() for t in spec.split(",")):
        if not token:
            continue
        if token in groups:
            chosen |= groups[token]
        elif token in names:
            chosen.add(token)
        else:
            unknown.append(token)
    if unknown:
        raise ConfigError(
            f"conditioned_layers names unknown layer(s) {', '.join(unknown)}; "
            f"use hidden, all, none or names from: {', '.join(names)}", ("conditioned_layers",)
        )
    return chosen
