"""Scene contraction for unbounded scenes: all of R^3 into a ball (or cube) of radius 2.

mip-NeRF 360 (Barron et al., 2022, eq. 10) keeps the unit ball and squeezes everything
outside it into the shell 1 < |x| < 2::

    contract(x) = x                          if |x| <= 1
                  (2 - 1 / |x|) x / |x|      otherwise          (|.|: the L2 norm)

nerfacto (nerfstudio's ``SceneContraction(order=inf)``) uses the same map with the L-infinity
norm, so the unit cube is kept and space outside lands in the cube [-2, 2]^3; that cube is
what an axis-aligned feature grid covers without wasted corners.

The map is continuous (both branches give x at |x| = 1), keeps directions (x / |x| is
unchanged) and is monotone along rays from the origin: |contract(t d)| = 2 - 1 / t for
t >= 1, increasing. A field reads ``contract(x)``, so its encodings see bounded inputs
however far a sample lies; a triplane's box is then ``CONTRACTED_BOX``.

Scene space should hold the cameras' region in the unit ball or cube (nerfstudio's camera
normalisation puts the camera centres in [-1, 1]^3).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["CONTRACTIONS", "CONTRACTED_BOX", "contract", "uncontract", "Contraction"]

CONTRACTIONS = ("none", "mipnerf360", "linf")
CONTRACTED_BOX = (-2.0, -2.0, -2.0, 2.0, 2.0, 2.0)  # holds contract(x) for every x (both norms)


def contract(x: Tensor, kind: str = "mipnerf360") -> Tensor:
    """x: Tensor  # [..., 3] -> Tensor  # [..., 3] with norm < 2 (``kind``: ``mipnerf360``, L2
    norm; ``linf``, L-infinity norm; ``none``, x itself).

    Gradients are finite everywhere (the norm is clamped to >= 1 in the outer branch, which the
    inner points do not read)."""
    if kind == "none":
        return x
    norm = _norm(x, kind)
    outer = norm.clamp(min=1.0)
    return torch.where(norm <= 1.0, x, (2.0 - 1.0 / outer) * (x / outer))


def uncontract(y: Tensor, kind: str = "mipnerf360") -> Tensor:
    """The inverse of ``contract``: y: Tensor  # [..., 3] with norm < 2 -> x: Tensor  # [..., 3], with
    ``|x| = 1 / (2 - |y|)`` along y's direction outside the unit ball (cube); norms >= 2 give inf."""
    if kind == "none":
        return y
    norm = _norm(y, kind)
    outer = norm.clamp(min=1.0)
    return torch.where(norm <= 1.0, y, y / (outer * (2.0 - outer)))


def _norm(x: Tensor, kind: str) -> Tensor:
    """x: Tensor  # [..., 3] -> Tensor  # [..., 1], the norm ``kind`` contracts by (L2 or L-infinity)."""
    if kind == "mipnerf360":
        return torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True)
    if kind == "linf":
        return x.abs().amax(dim=-1, keepdim=True)
    raise ValueError(f"contraction {kind!r} is not one of {', '.join(CONTRACTIONS)}")


class Contraction(nn.Module):
    """``contract`` as a module (no parameters): x: Tensor  # [..., 3] -> Tensor  # [..., 3]."""

    def __init__(self, kind: str = "mipnerf360") -> None:
        super().__init__()
        if kind not in CONTRACTIONS:
            raise ValueError(f"contraction {kind!r} is not one of {', '.join(CONTRACTIONS)}")
        self.kind = kind

    def forward(self, x: Tensor) -> Tensor:
        return contract(x, self.kind)

    def extra_repr(self) -> str:
        return self.kind
