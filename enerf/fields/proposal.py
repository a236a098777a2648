"""Proposal networks: small density-only fields that say where the radiance field is sampled.

nerfacto's proposal sampler (nerfstudio; nerfacc's ``PropNetEstimator``), after mip-NeRF 360's
online distillation (Barron et al., 2022, section 3): each level is a coarse density field in
the same (contracted) space as the radiance field, far cheaper to query. The proposal estimator
(``enerf.render.proposal``) renders each level's density along the ray, resamples the ray where
its weights lie, and hands the final intervals to the radiance field; the proposal loss trains
each level's weights to bound the radiance field's from above, so no colour is ever asked of a
proposal network.

A level here is a one-resolution TensoRF VM encoding (``enerf.nn.triplane``; nerfacto uses a
hash grid) read by a 16-unit MLP, density ``exp(raw - 1)`` (nerfacto's ``trunc_exp(raw - 1)``,
the exponent clamped at 15 so a diverging level cannot overflow).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..nn.contraction import CONTRACTED_BOX, Contraction
from ..nn.triplane import TriPlaneEncoding

__all__ = ["ProposalField", "ProposalNetworks"]

_HIDDEN = 16  # nerfacto's proposal MLP width


class ProposalField(nn.Module):
    """One proposal level: position -> density.

    Args:
        resolution: side of the planes and length of the lines of the VM encoding.
        components: channels per plane-line product.
        contraction: ``none``, ``mipnerf360`` or ``linf`` (the radiance field's); with one, the
            encoding covers the contracted box [-2, 2]^3, else ``aabb``.
        aabb: the box of a scene without contraction (the radiance field's ``grid_aabb``).
    """

    def __init__(self, resolution: int, components: int, contraction: str,
                 aabb: tuple[float, ...] = (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0)) -> None:
        super().__init__()
        self.contraction = Contraction(contraction) if contraction != "none" else None
        box = CONTRACTED_BOX if self.contraction is not None else aabb
        self.pos_encoding = TriPlaneEncoding((resolution,), components, box)
        self.mlp = nn.Sequential(nn.Linear(self.pos_encoding.out_dim, _HIDDEN), nn.ReLU(), nn.Linear(_HIDDEN, 1))

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., 3] -> density: Tensor  # [...] > 0."""
        if self.contraction is not None:
            x = self.contraction(x)
        raw = self.mlp(self.pos_encoding(x))[..., 0]
        return torch.exp(raw.clamp(max=15.0) - 1.0)


class ProposalNetworks(nn.Module):
    """The proposal levels of a run, coarse to fine (``levels[i]`` is queried at the i-th
    proposal pass); ``fields["proposal"]`` of a run with ``--renderer proposal``."""

    def __init__(self, resolutions: tuple[int, ...], components: int, contraction: str,
                 aabb: tuple[float, ...] = (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0)) -> None:
        super().__init__()
        self.levels = nn.ModuleList(ProposalField(r, components, contraction, aabb) for r in resolutions)

    def forward(self, level: int, x: Tensor) -> Tensor:
        """Density of level ``level`` at x: Tensor  # [..., 3] -> Tensor  # [...]."""
        return self.levels[level](x)
