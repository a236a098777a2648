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

Rendering on a CPU (no autograd) a level is read from a table baked from its weights (``baked``):
within a cell of the level's r^3 lattice a plane's bilinear value times a line's linear value is
trilinear, so the features, and the MLP's first (affine) layer of them, are exactly the trilinear
interpolation of their values at the cell's corners. The table holds those pre-activations at the
r^3 vertices; a point is then 8 rows of H values, a ReLU, a dot product and an exponential
(``enerf.nn.compiled.baked_density``, the contraction included): the same density to float rounding,
at a third of the cost of the look-ups and the MLP (``studies/render_probe.py``). The table is made
once per set of weights, where it stays within ``BAKE_MAX_VALUES``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from ..nn import compiled
from ..nn.contraction import CONTRACTED_BOX, Contraction
from ..nn.triplane import TriPlaneEncoding, weights_version

__all__ = ["ProposalField", "ProposalNetworks", "BAKE_MAX_VALUES"]

_HIDDEN = 16  # nerfacto's proposal MLP width
# A level's baked table holds r^3 x hidden float32 values: at most this many (128 MiB; r = 64: 4.2 M)
BAKE_MAX_VALUES = 2 ** 25


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
        """x: Tensor  # [..., 3] -> density: Tensor  # [...] > 0 (on a CPU without autograd from the
        baked table, the module docstring)."""
        table = self.baked() if not torch.is_grad_enabled() and x.device.type == "cpu" else None
        if table is not None:
            enc, last = self.pos_encoding, self.mlp[2]
            return compiled.baked_density(
                x.reshape(-1, 3).to(torch.float32), self.contraction.kind if self.contraction is not None else "none",
                enc.lo, enc.scale, table, last.weight.detach()[0].contiguous().numpy(), float(last.bias)).view(x.shape[:-1])
        if self.contraction is not None:
            x = self.contraction(x)
        raw = self.mlp(self.pos_encoding(x))[..., 0]
        return torch.exp(raw.clamp(max=15.0) - 1.0)

    def baked(self) -> np.ndarray | None:
        """The first layer's pre-activations at the vertices of the level's lattice: np.ndarray
        # [r, r, r, hidden] float32 (axes x, y, z of the encoding's box), remade when the weights
        change; None where numba is missing or the table would exceed ``BAKE_MAX_VALUES``."""
        r = self.pos_encoding.resolutions[0]
        if not compiled.available() or r ** 3 * _HIDDEN > BAKE_MAX_VALUES:
            return None
        version = weights_version(self)
        if getattr(self, "_baked", (None,))[0] != version:
            with torch.no_grad():
                enc, first = self.pos_encoding, self.mlp[0]
                axis = torch.linspace(-1.0, 1.0, r)
                u = torch.stack(torch.meshgrid(axis, axis, axis, indexing="ij"), -1).reshape(-1, 3)
                vertices = (u + 1.0) / enc.scale.cpu() + enc.lo.cpu()  # the lattice in the encoding's box
                table = first(enc(vertices.to(enc.lo.device))).cpu().reshape(r, r, r, -1).contiguous().numpy()
            self._baked = (version, table)
        return self._baked[1]


class ProposalNetworks(nn.Module):
    """The proposal levels of a run, coarse to fine (``levels[i]`` is queried at the i-th
    proposal pass); ``fields["proposal"]`` of a run with ``--sampler proposal``."""

    def __init__(self, resolutions: tuple[int, ...], components: int, contraction: str,
                 aabb: tuple[float, ...] = (-1.5, -1.67, -1.0, 1.5, 1.67, 1.0)) -> None:
        super().__init__()
        self.levels = nn.ModuleList(ProposalField(r, components, contraction, aabb) for r in resolutions)

    def forward(self, level: int, x: Tensor) -> Tensor:
        """Density of level ``level`` at x: Tensor  # [..., 3] -> Tensor  # [...]."""
        return self.levels[level](x)

    def densities(self, x: Tensor) -> list[Tensor]:
        """The density of every level at x: Tensor  # [..., 3] -> [Tensor  # [...]] (``NeRFField.densities``)."""
        return [level(x) for level in self.levels]
