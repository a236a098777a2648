"""Numpy references of equilibrated weight conditioning, in the paper's layout (W in R^{n_{k-1} x n_k}, rows =
input units; torch stores weight = W^T), and layers with a given weight, for the conditioning tests."""

from __future__ import annotations

import numpy as np
import torch

from enerf.nn.conditioning import ConditionedLinear

MODES = ["row", "col", "rowcol"]


def kappa(a: np.ndarray) -> float:
    s = np.linalg.svd(a, compute_uv=False)
    return s[0] / s[-1]


def eq_rows(a: np.ndarray) -> np.ndarray:
    """E A with E = diag(1 / ||A_{i:}||_2) (the paper's row equilibration)."""
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def eq_cols(a: np.ndarray) -> np.ndarray:
    """A E with E = diag(1 / ||A_{:j}||_2)."""
    return a / np.linalg.norm(a, axis=0, keepdims=True)


def paper_reference(weight_torch: np.ndarray, mode: str, passes: int = 1) -> np.ndarray:
    """Equilibrate W_paper = weight.T in the paper's layout; return the result in torch layout."""
    w = weight_torch.T.astype(np.float64)  # [n_{k-1}, n_k]
    if mode == "row":
        w = eq_rows(w)
    elif mode == "col":
        w = eq_cols(w)
    elif mode == "rowcol":
        for _ in range(passes):
            w = eq_cols(eq_rows(w))
    return w.T


def layer_with(weight_torch: np.ndarray, mode: str, **kwargs) -> ConditionedLinear:
    out_f, in_f = weight_torch.shape
    layer = ConditionedLinear(in_f, out_f, conditioning=mode, **kwargs).double()
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight_torch)))
    return layer


def conditioned(weight_torch: np.ndarray, mode: str, **kwargs) -> np.ndarray:
    return layer_with(weight_torch, mode, **kwargs).conditioned_weight().detach().numpy()
