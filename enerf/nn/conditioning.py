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
             unit columns and rows of norm sqrt(n/m), since both sum to ||W||_F^2).
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

E is recomputed from W in every forward pass, so the layer is a reparameterisation of W and
gradients flow through E. With ``detach_conditioner=True`` the diagonal of E is computed
under ``detach`` and acts as a constant in backprop. Each norm is clamped to at least ``eps``
before it is inverted, so a zero row or column stays zero (no NaN).

Degenerate cases: under ``row`` a layer with a single output (the paper's W is n x 1, e.g. a
density head) becomes sign(W) and can no longer learn its scale; under ``col`` the same
happens to a layer with a single input.

What the theory does and does not promise (checked numerically in tests/test_conditioning.py):
Prop. 1, κ(EW) ≤ κ(W), holds for badly row/column-scaled matrices but not for every matrix
(about 1 in 10 plain Gaussian matrices gets slightly worse); Van der Sluis's theorem, quoted
by the paper without it, carries a factor: κ(EA) ≤ sqrt(m) · min_D κ(DA) for m rows.
"""

from __future__ import annotations

import contextlib
import copy
import math
from typing import Callable, Iterator

import torch
from torch import Tensor, nn

from ..errors import ConfigError

__all__ = [
    "CONDITIONERS",
    "PARAMETRIZATIONS",
    "ConditionedLinear",
    "conditioned_weights_once",
    "condition_number",
    "condition_numbers",
    "fold_module",
    "select_layers",
]


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


class ConditionedLinear(nn.Linear):
    """``nn.Linear`` whose weight is equilibrated in every forward pass: y = x (E W)^T + b.

    Same parameters, state-dict keys and default initialisation as ``nn.Linear``; ``fold()``
    returns the equivalent plain layer.

    Args:
        in_features, out_features, bias, device, dtype: as ``nn.Linear``.
        conditioning: a key of ``CONDITIONERS`` ("none" behaves as a plain linear layer).
        eps: lower bound on the norms that are inverted (> 0).
        detach_conditioner: compute E's diagonal under detach (E is a constant in backprop).
        passes: alternating passes for ``rowcol`` (>= 1).
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
        if int(passes) < 1:
            raise ConfigError(f"conditioning passes must be >= 1, got {passes}")
        if not eps > 0:
            raise ConfigError(f"conditioning eps must be > 0, got {eps}")
        if detach_conditioner and conditioning in PARAMETRIZATIONS:
            raise ConfigError(f"--detach_conditioner is not available with --conditioning {conditioning}; turn it off")
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.conditioning = conditioning
        self.eps = float(eps)
        self.detach_conditioner = bool(detach_conditioner)
        self.passes = int(passes)
        if conditioning in PARAMETRIZATIONS:
            PARAMETRIZATIONS[conditioning](self)

    def stored_weight(self) -> Tensor:
        """The trained [out, in] parameter the conditioner reads: ``weight`` itself, or v
        (``parametrizations.weight.original1``) for ``wn``. Tensor  # [out_features, in_features]"""
        if self.conditioning == "wn":
            return self.parametrizations.weight.original1
        return self.weight

    _weight_cache: dict | None = None  # set by ``conditioned_weights_once``: {grad mode: E W, "leaves": _LeafGroup}

    def conditioned_weight(self) -> Tensor:
        """The paper's (E W)^T in torch layout: Tensor  # [out_features, in_features].

        Inside ``conditioned_weights_once`` it is computed once per grad mode and reused (once
        for both, as part of a leaf, with ``leaf_grads``).
        """
        cache = self._weight_cache
        if cache is None:
            return CONDITIONERS[self.conditioning](self.weight, self.eps, self.passes, detach=self.detach_conditioner)
        if "leaves" in cache:
            return cache["leaves"].conditioned_weight(self)
        grad = torch.is_grad_enabled()
        if grad not in cache:
            cache[grad] = CONDITIONERS[self.conditioning](self.weight, self.eps, self.passes, detach=self.detach_conditioner)
        return cache[grad]

    def equilibrated_along(self) -> int | None:
        """The dimension of ``weight`` [out, in] that E W normalises to unit length (``row``: 0,
        ``col``: 1), or None when E W is not one such normalisation (other modes, detached E)."""
        if self.detach_conditioner:
            return None
        return _EQUILIBRATED_DIM.get(self.conditioning)

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

    def extra_repr(self) -> str:
        text = f"{super().extra_repr()}, conditioning={self.conditioning}"
        if self.conditioning == "rowcol":
            text += f", passes={self.passes}"
        if self.detach_conditioner:
            text += ", detach_conditioner=True"
        return text


class _LeafGroup:
    """E W of several ``row`` / ``col`` layers as one leaf of the autograd graph.

    Layers normalised along the same dimension, with the same length there (``row``: the same
    out_features), stand side by side in one matrix (``row``: [out, sum of in]; ``col``:
    [sum of out, in]); its equilibration is E W of every layer at once (the vectors being
    normalised do not mix), and each layer reads its slice. When ``backward()`` has
    accumulated the leaf's gradient, a hook carries it to every W: ``_equilibrate_vjp`` on the
    whole matrix, split and added to each ``weight.grad``. The same gradients as backprop
    through each E W, with a handful of operations per step instead of a handful per layer
    (on a CPU, each small operation costs microseconds whatever its size, and a short training
    step is made of them). The same leaf serves passes without grad (grid updates).
    """

    def __init__(self, layers: list[ConditionedLinear], dim: int) -> None:
        self.layers, self.dim = layers, dim
        self.slices: dict[int, Tensor] | None = None

    def conditioned_weight(self, layer: ConditionedLinear) -> Tensor:
        """``layer``'s E W, a slice of the group's leaf. Tensor  # [out_features, in_features]"""
        if self.slices is None:
            self.slices = self._equilibrate()
        return self.slices[id(layer)]

    def _equilibrate(self) -> dict[int, Tensor]:
        dim, weights = self.dim, [layer.weight for layer in self.layers]
        side = 1 - dim  # the layers' weights stand side by side along this dimension
        sizes = [w.shape[side] for w in weights]
        with torch.no_grad():
            stacked = weights[0] if len(weights) == 1 else torch.cat(weights, dim=side)
            unit, projector, norms = _equilibration(stacked, dim, self.layers[0].eps)
        unit.requires_grad_(True)

        def carry_to_weights(leaf: Tensor) -> None:
            # closes over the weights and no-grad tensors, never the leaf (a reference cycle
            # per step would leave Python's cycle collector to slow every step); backward runs
            # without grad mode, and none of these tensors requires grad
            grad = _equilibrate_vjp(leaf.grad, projector, norms, dim, out=leaf.grad)
            for weight, part in zip(weights, grad.split(sizes, dim=side)):
                weight.grad = part.contiguous() if weight.grad is None else weight.grad.add_(part)
            leaf.grad = None

        unit.register_post_accumulate_grad_hook(carry_to_weights)
        with torch.enable_grad():  # slices that carry gradients, even when first read in a no-grad pass
            parts = unit.split(sizes, dim=side)
        return {id(layer): part for layer, part in zip(self.layers, parts)}


def _leaf_groups(layers: list[ConditionedLinear]) -> list[_LeafGroup]:
    """The layers whose E W can enter the graph as a leaf, grouped by what can be stacked
    (same dimension normalised, same length along it, eps, dtype and device)."""
    groups: dict[tuple, list[ConditionedLinear]] = {}
    for layer in layers:
        dim = layer.equilibrated_along()
        if dim is None or not layer.weight.requires_grad:
            continue
        w = layer.weight
        groups.setdefault((dim, w.shape[dim], layer.eps, w.dtype, w.device), []).append(layer)
    return [_LeafGroup(members, key[0]) for key, members in groups.items()]


@contextlib.contextmanager
def conditioned_weights_once(*modules: nn.Module, leaf_grads: bool = False) -> Iterator[None]:
    """Compute each ``ConditionedLinear``'s E W once for all forward passes inside the block.

    E W depends on W alone, so within one training step (several forward passes over the same
    weights: a grid update, front-to-back rounds) it can be shared; gradients of all passes
    meet in the one E W and flow to W once. Nothing inside the block may change the weights
    (call ``optimizer.step()`` after it). Without conditioning this changes nothing.

    leaf_grads: ``row`` / ``col`` layers' E W enter the graph as leaves (stacked where shapes
        allow, ``_LeafGroup``) whose gradients a hook carries to W when ``backward()``
        accumulates them (same gradients, fewer operations per step). Only for
        ``loss.backward()``: ``torch.autograd.grad`` (e.g. double backprop) never accumulates
        into leaves, so W would get no gradient.
    """
    # each layer once, even if modules overlap (a layer stacked twice would get its gradient twice)
    layers = list({id(m): m for module in modules for m in module.modules() if isinstance(m, ConditionedLinear)}.values())
    for layer in layers:
        layer._weight_cache = {}
    if leaf_grads:
        for group in _leaf_groups(layers):
            for layer in group.layers:
                layer._weight_cache["leaves"] = group
    try:
        yield
    finally:
        for layer in layers:
            layer._weight_cache = None


def _kappa(matrix: Tensor) -> float:
    s = torch.linalg.svdvals(matrix.detach().to(device="cpu", dtype=torch.float64))
    return math.inf if s[-1] == 0 else float(s[0] / s[-1])


def condition_number(layer: nn.Linear) -> tuple[float, float]:
    """(κ(W), κ(EW)) of one layer: σ_max / σ_min in float64, inf when σ_min = 0.

    W is the stored parameter (v for ``wn``), EW the weight the layer applies.

    A plain ``nn.Linear`` gives (κ(W), κ(W)). Transposition does not change κ, so the
    values are the same in the paper's and in torch's layout.
    """
    with torch.no_grad():
        if isinstance(layer, ConditionedLinear):
            return _kappa(layer.stored_weight()), _kappa(layer.conditioned_weight())
        return _kappa(layer.weight), _kappa(layer.weight)


def condition_numbers(module: nn.Module) -> dict[str, tuple[float, float]]:
    """{submodule name: (κ(W), κ(EW))} for every ConditionedLinear inside ``module``."""
    return {name: condition_number(m) for name, m in module.named_modules() if isinstance(m, ConditionedLinear)}


def fold_module(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` with every ConditionedLinear replaced by its folded nn.Linear.

    The copy has the same state-dict keys, so its weights also load into a field built with
    ``conditioning="none"``.
    """
    folded = copy.deepcopy(module)
    if isinstance(folded, ConditionedLinear):
        return folded.fold()
    for name, child in list(folded.named_modules()):
        if isinstance(child, ConditionedLinear):
            parent_name, _, attr = name.rpartition(".")
            parent = folded.get_submodule(parent_name)
            # ModuleList / Sequential children are registered under their index as a string,
            # so setattr replaces them in place like any named child.
            setattr(parent, attr, child.fold())
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
            f"--conditioned_layers names unknown layer(s) {', '.join(unknown)}; "
            f"use hidden, all, none or names from: {', '.join(names)}"
        )
    return chosen
