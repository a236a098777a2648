"""Loss terms of a shape run, a dict of named terms that the loop sums and logs.

Occupancy: ``bce`` (binary cross-entropy on logits, Occupancy Networks); SDF: ``l1`` =
mean |clamp(f, -d, d) - clamp(s, -d, d)| (DeepSDF, d = ``sdf_clamp``) and, when
``eikonal_weight`` > 0, ``eikonal`` = w · mean (|∇f| - 1)^2 over the batch (IGR / SIREN).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..fields.shape import ShapeField

__all__ = ["shape_losses"]


def shape_losses(
    field: ShapeField, points: Tensor, occupancy: Tensor, sdf: Tensor, sdf_clamp: float, eikonal_weight: float
) -> dict[str, Tensor]:
    """Named loss terms of one batch.

    Args:
        points: Tensor  # [n, 3]; occupancy: Tensor  # [n] in {0, 1}; sdf: Tensor  # [n]
    """
    if field.kind == "occupancy":
        return {"bce": torch.nn.functional.binary_cross_entropy_with_logits(field(points), occupancy)}
    need_grad = eikonal_weight > 0
    if need_grad:
        points = points.detach().requires_grad_(True)
    pred = field(points)
    losses = {"l1": (pred.clamp(-sdf_clamp, sdf_clamp) - sdf.clamp(-sdf_clamp, sdf_clamp)).abs().mean()}
    if need_grad:
        (grad,) = torch.autograd.grad(pred.sum(), points, create_graph=True)
        losses["eikonal"] = eikonal_weight * ((grad.norm(dim=-1) - 1.0) ** 2).mean()
    return losses
