"""Grow and prune the Gaussians during the fit (3DGS's adaptive density control, budgeted).

3DGS clones or splits the Gaussians whose screen-space position gradient, averaged over the views
that drew them, exceeds a fixed threshold. That threshold's scale depends on the loss's
normalisation and the image size, so here the same signal ranks the Gaussians instead: every
``every`` steps the ``grow`` fraction with the largest mean gradient is densified, until the count
reaches the cap:

- a Gaussian whose largest axis is under ``split_size`` (scene units) is **cloned** (a copy in
  place: the two then move apart under the gradient);
- a larger one is **split** in two, each centred at a sample of the Gaussian and 1.6x narrower
  (the reference's factor);
- Gaussians whose opacity fell below ``PRUNE_OPACITY`` are dropped.

New rows start with Adam's moments at zero, as the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .gaussians import quat_to_rotmat

__all__ = ["PRUNE_OPACITY", "SPLIT_SHRINK", "DensityControl"]

PRUNE_OPACITY = 0.005  # the reference's
SPLIT_SHRINK = 1.6  # a split Gaussian's two halves are this much narrower (the reference's)


@dataclass
class DensityControl:
    """The running screen-space gradient statistics of N Gaussians and the rule that densifies them."""

    n: int
    grow: float  # fraction of the Gaussians densified at each densification
    cap: int  # Gaussians at most
    split_size: float  # scene units: larger Gaussians are split, smaller cloned
    grad: Tensor = field(init=False)  # [N] summed norm of dL/d(pixel position)
    seen: Tensor = field(init=False)  # [N] steps in which the Gaussian was drawn

    def __post_init__(self) -> None:
        self.grad = torch.zeros(self.n)
        self.seen = torch.zeros(self.n)

    def observe(self, index: Tensor, uv_grad: Tensor) -> None:
        """Add one step's gradients: ``index`` [G] long of the Gaussians drawn, ``uv_grad`` [G, 2]."""
        self.grad.index_add_(0, index, uv_grad.detach().norm(dim=-1).cpu())
        self.seen.index_add_(0, index, torch.ones(len(index)))

    def plan(self, params: dict[str, Tensor], gen: torch.Generator) -> tuple[Tensor, dict[str, Tensor], Tensor]:
        """What to do now: (src [M] long: the old row each new row starts from, the new rows' parameter
        values {name: [M, ...]}, fresh [M] bool: rows whose optimizer state starts at zero)."""
        with torch.no_grad():
            n = len(self.grad)
            opacity = torch.sigmoid(params["opacity_logits"].detach().cpu())
            keep = opacity >= PRUNE_OPACITY
            room = max(0, self.cap - int(keep.sum()))
            mean_grad = torch.where(self.seen > 0, self.grad / self.seen.clamp_min(1), torch.zeros_like(self.grad))
            mean_grad[~keep] = -1.0
            k = min(room, int(self.grow * n), int((mean_grad > 0).sum()))
            chosen = torch.topk(mean_grad, k).indices if k > 0 else torch.zeros(0, dtype=torch.long)
            scales = torch.exp(params["log_scales"].detach().cpu())
            split = torch.zeros(n, dtype=torch.bool)
            split[chosen] = scales[chosen].max(-1).values > self.split_size
            clone = torch.zeros(n, dtype=torch.bool)
            clone[chosen] = ~split[chosen]
            # the kept rows (a split one becomes its first half), then the clones, then the second halves
            src = torch.cat([torch.nonzero(keep).squeeze(1), torch.nonzero(clone).squeeze(1),
                             torch.nonzero(split).squeeze(1)])
            values = {name: t.detach().cpu()[src].clone() for name, t in params.items()}
            halves = torch.cat([split[keep], torch.zeros(int(clone.sum()), dtype=torch.bool),
                                torch.ones(int(split.sum()), dtype=torch.bool)])
            if halves.any():
                s = scales[src[halves]]  # [S, 3]
                rot = quat_to_rotmat(values["quats"][halves])
                offset = torch.einsum("sij,sj->si", rot, torch.randn(s.shape, generator=gen) * s)
                values["means"][halves] += offset
                values["log_scales"][halves] -= torch.log(torch.tensor(SPLIT_SHRINK))
            fresh = torch.cat([torch.zeros(int(keep.sum()), dtype=torch.bool),
                               torch.ones(len(src) - int(keep.sum()), dtype=torch.bool)])
            self.n = len(src)
            self.__post_init__()
            return src, values, fresh
