"""Loss terms of the training tasks, each a dict of named terms that the loop sums and logs.

NeRF: ``mse`` (photometric, final pass), ``mse_coarse`` (coarse pass of the hierarchical
sampler), ``proposal`` and ``distortion`` (the proposal sampler's, ``enerf.render.proposal``), ``tv`` (total variation of learned position encodings).
Shapes: occupancy: ``bce`` (binary cross-entropy on logits, Occupancy Networks); SDF: ``l1`` =
mean |clamp(f, -d, d) - clamp(s, -d, d)| (DeepSDF, d = ``sdf_clamp``) and, when
``eikonal_weight`` > 0, ``eikonal`` = w · mean (|∇f| - 1)^2 over the batch (IGR / SIREN).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..fields.shape import ShapeField

__all__ = ["nerf_losses", "shape_losses"]


def nerf_losses(out: dict, target: Tensor, fields: dict | None = None, tv_weight: float = 0.0) -> dict[str, Tensor]:
    """Named loss terms: photometric MSE of the final pass and of the coarse pass if any, and
    ``tv_weight`` x the total variation of every field's learned position encoding (triplane).

    Args:
        out: the renderer's output, rgb: Tensor  # [n_rays, 3] (+ rgb_coarse)
        target: Tensor  # [n_rays, 3]
    """
    losses = {"mse": torch.mean((out["rgb"] - target) ** 2)}
    if "rgb_coarse" in out:
        losses["mse_coarse"] = torch.mean((out["rgb_coarse"] - target) ** 2)
    losses.update(out.get("loss_terms") or {})  # the renderer's own (proposal sampler: proposal, distortion)
    if tv_weight > 0 and fields:
        encodings = [f.pos_encoding for f in fields.values()
                     if hasattr(getattr(f, "pos_encoding", None), "total_variation")]
        if encodings:
            losses["tv"] = tv_weight * sum(e.total_variation() for e in encodings)
    return losses


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
