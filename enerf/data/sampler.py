"""Random ray batches over all training pixels (nerf-pytorch's batching across images)."""

from __future__ import annotations

import torch
from torch import Tensor

from .rays import Rays, flatten_rays, index_rays
from .scene import Scene

__all__ = ["RaySampler", "training_rays", "center_mask"]


def training_rays(scene: Scene, indices, device: torch.device) -> tuple[Rays, Tensor]:
    """Rays and colours of every pixel of the given views.

    Returns:
        rays: Rays  # [n_views * H * W]
        rgb: Tensor  # [n_views * H * W, 3]
    """
    per_view = [flatten_rays(scene.rays(int(i), device=device)) for i in indices]
    rays = Rays(*(torch.cat([getattr(r, name) for r in per_view]) for name in Rays._fields))
    rgb = torch.from_numpy(scene.images[list(indices)].reshape(-1, 3)).to(device)
    return rays, rgb


class RaySampler:
    """Draws ``batch_size`` rays per call, walking a fresh random permutation each epoch.

    With ``precrop_iters > 0`` the first steps draw only from the central ``precrop_frac``
    of each image (nerf-pytorch's precrop), which helps NeRF find the scene early.
    """

    def __init__(
        self,
        rays: Rays,
        rgb: Tensor,
        batch_size: int,
        generator: torch.Generator,
        center_mask: Tensor | None = None,
    ) -> None:
        self.rays = rays  # [n, c] per field
        self.rgb = rgb  # [n, 3]
        self.batch_size = int(batch_size)
        self.generator = generator
        self.center_index = None if center_mask is None else center_mask.nonzero().squeeze(-1)
        self._order = torch.empty(0, dtype=torch.long)
        self._pos = 0

    def __len__(self) -> int:
        return self.rgb.shape[0]

    def _next_indices(self) -> Tensor:
        if self._pos + self.batch_size > self._order.numel():
            self._order = torch.randperm(len(self), generator=self.generator)
            self._pos = 0
        idx = self._order[self._pos : self._pos + self.batch_size]
        self._pos += self.batch_size
        return idx

    def state_dict(self) -> dict:
        """Position in the current epoch, so a resumed run draws the same batches."""
        return {"order": self._order.clone(), "pos": self._pos}

    def load_state_dict(self, state: dict) -> None:
        self._order = state["order"].clone()
        self._pos = int(state["pos"])

    def sample(self, center_only: bool = False) -> tuple[Rays, Tensor]:
        """One batch: (Rays [batch_size], rgb [batch_size, 3])."""
        if center_only and self.center_index is not None:
            pick = torch.randint(
                self.center_index.numel(), (self.batch_size,), generator=self.generator
            )
            idx = self.center_index[pick]
        else:
            idx = self._next_indices()
        idx = idx.to(self.rgb.device)
        return index_rays(self.rays, idx), self.rgb[idx]


def center_mask(n_views: int, height: int, width: int, frac: float) -> Tensor:
    """Boolean mask [n_views * height * width] of the central ``frac`` box of each view."""
    dh, dw = int(height // 2 * frac), int(width // 2 * frac)
    mask = torch.zeros(height, width, dtype=torch.bool)
    mask[height // 2 - dh : height // 2 + dh, width // 2 - dw : width // 2 + dw] = True
    return mask.reshape(-1).repeat(n_views)
