"""Loss terms of the training tasks, each a dict of named terms that the loop sums and logs.

NeRF: ``mse`` (photometric, final pass), ``mse_coarse`` (coarse pass of the hierarchical
sampler), ``proposal`` and ``distortion`` (the proposal sampler's, ``enerf.render.proposal``), ``tv`` (total variation of learned position encodings).
Shapes: ``enerf.shapes.losses``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["nerf_losses"]


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
