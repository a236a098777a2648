"""A learned feature volume for positions: TensoRF's vector-matrix (VM) factorisation.

Chen et al., *TensoRF: Tensorial Radiance Fields* (2022), section 3: a feature volume
``V[c](x, y, z)`` is written as a sum of products of a matrix (a plane over two axes) and a
vector (a line along the third axis)::

    V[c](x, y, z) = P_xy[c](x, y) * L_z[c](z) + P_xz[c](x, z) * L_y[c](y) + P_yz[c](y, z) * L_x[c](x)

Here the three products are kept apart (3 C features, as TensoRF's appearance features before
its basis matrix) and the factorisation is repeated at several resolutions whose features are
concatenated (coarse levels learn the layout within a few hundred steps, fine ones the detail).
A position costs 6 bilinear look-ups per level instead of 8 trilinear corner reads of a dense
grid, and a plane of side r holds r^2 values instead of r^3: on a CPU the encoding of 65,536
points at r = 256, C = 16 takes about 0.1 s forward and backward (``F.grid_sample``).

Rendering on a CPU (no autograd), a level is read by a compiled loop over the points
(``enerf.nn.compiled.triplane_level``) from channels-last copies of its planes and lines, made once
per set of weights (``channels_last``): the same values as ``F.grid_sample``'s to float rounding,
each product written straight into its place in the output. ``studies/render_probe.py`` times it.
Training on a CPU (positions without a gradient) reads a level through the same kernel and a compiled
backward (``enerf.nn.compiled.TriplaneLevel``): ``F.grid_sample``'s CPU backward takes about half of a
capture's training step (``python -m studies.profile_step``). Elsewhere (CUDA, float64, positions that
need a gradient) the look-up is ``F.grid_sample``.

The MLP that reads these features (``enerf.fields.nerf``) keeps its conditioned layers: this
module replaces only the sinusoidal encoding of positions.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError
from . import compiled

__all__ = ["TriPlaneEncoding", "weights_version"]

# (plane axes, line axis) of the three products: xy * z, xz * y, yz * x.
_PLANE_AXES = ((0, 1), (0, 2), (1, 2))
_LINE_AXES = (2, 1, 0)
_PLANE_SLICES = tuple(slice(a, b + 1, b - a) for a, b in _PLANE_AXES)  # u[:, s] == u[:, list(axes)], a view


def weights_version(module: nn.Module) -> tuple:
    """What identifies a module's current weights: each parameter's storage and in-place version
    (an optimizer step, ``load_state_dict`` or ``copy_`` changes it), for caches of tables derived
    from them."""
    return tuple((p.data_ptr(), p._version) for p in module.parameters())


class TriPlaneEncoding(nn.Module):
    """Positions -> concatenated VM features of every level.

    Args:
        resolutions: side of the planes and length of the lines of each level.
        components: C, feature channels per product (3 C features per level).
        aabb: (xmin, ymin, zmin, xmax, ymax, zmax) mapped onto the grids; positions outside
            read the grid's border values (``padding_mode="border"``).
        init_std: standard deviation of the normal initialisation of planes and lines
            (TensoRF: 0.1).
    """

    def __init__(self, resolutions: tuple[int, ...] = (64, 256), components: int = 8,
                 aabb: tuple[float, ...] = (-1.0, -1.0, -1.0, 1.0, 1.0, 1.0), init_std: float = 0.1) -> None:
        super().__init__()
        if not resolutions or any(int(r) < 2 for r in resolutions):
            raise ConfigError(f"grid resolutions must all be >= 2, got {tuple(resolutions)}")
        if components < 1:
            raise ConfigError(f"grid components must be >= 1, got {components}")
        lo, hi = torch.tensor(aabb[:3], dtype=torch.float32), torch.tensor(aabb[3:], dtype=torch.float32)
        if len(aabb) != 6 or not bool((hi > lo).all()):
            raise ConfigError(f"grid aabb must be xmin ymin zmin xmax ymax zmax with max > min, got {tuple(aabb)}")
        self.resolutions = tuple(int(r) for r in resolutions)
        self.components = int(components)
        self.register_buffer("lo", lo, persistent=False)
        self.register_buffer("scale", 2.0 / (hi - lo), persistent=False)
        self.planes = nn.ParameterList(
            nn.Parameter(init_std * torch.randn(3, components, r, r)) for r in self.resolutions)
        self.lines = nn.ParameterList(
            nn.Parameter(init_std * torch.randn(3, components, r, 1)) for r in self.resolutions)

    @property
    def out_dim(self) -> int:
        return 3 * self.components * len(self.resolutions)

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., 3] positions -> Tensor  # [..., 3 C L] features.

        Without autograd (rendering, evaluation, the viewer) each level's products are written
        straight into the output buffer instead of being concatenated: the same values to the bit;
        on a CPU by ``enerf.nn.compiled.triplane_level`` (the same values to float rounding).
        """
        lead = x.shape[:-1]
        if not torch.is_grad_enabled() and x.device.type == "cpu" and compiled.available():
            flat = x.reshape(-1, 3).to(torch.float32)
            out = flat.new_empty(flat.shape[0], self.out_dim)
            for k, (planes, lines) in enumerate(self.channels_last()):
                compiled.triplane_level(flat, self.lo, self.scale, planes, lines, out, 3 * self.components * k)
            return out.view(*lead, self.out_dim)
        if (x.device.type == "cpu" and not x.requires_grad and x.dtype == torch.float32
                and self.planes[0].dtype == torch.float32 and compiled.available()):
            flat = x.reshape(-1, 3)  # training on a CPU: compiled forward and backward (compiled.TriplaneLevel)
            feats = [compiled.TriplaneLevel.apply(flat, self.lo, self.scale, planes, lines, tables)
                     for planes, lines, tables in zip(self.planes, self.lines, self.channels_last())]
            return torch.cat(feats, 1).view(*lead, self.out_dim)
        u = ((x.reshape(-1, 3) - self.lo) * self.scale - 1.0)  # [n, 3] in [-1, 1] inside the aabb
        n = u.shape[0]
        # grid_sample reads (x, y) = (last axis, second-to-last axis) of each plane / line.
        plane_xy = torch.stack([u[:, axes] for axes in _PLANE_SLICES])  # [3, n, 2]
        line_xy = torch.stack([torch.stack([torch.zeros_like(u[:, a]), u[:, a]], -1) for a in _LINE_AXES])  # [3, n, 2]
        out = None if torch.is_grad_enabled() else u.new_empty(len(self.resolutions), 3, self.components, n, 1)
        feats = []
        for k, (planes, lines) in enumerate(zip(self.planes, self.lines)):
            p = F.grid_sample(planes, plane_xy.view(3, n, 1, 2), align_corners=True, padding_mode="border")
            v = F.grid_sample(lines, line_xy.view(3, n, 1, 2), align_corners=True, padding_mode="border")
            if out is None:
                feats.append(p * v)  # [3, C, n, 1]
            else:
                torch.mul(p, v, out=out[k])
        out = torch.stack(feats) if out is None else out  # [L, 3, C, n, 1]
        return out.view(self.out_dim, n).t().reshape(*lead, self.out_dim)

    def channels_last(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each level's (planes [3, r, r, C], lines [3, r, C]) as contiguous float32 arrays for
        ``enerf.nn.compiled.triplane_level``, remade only when the weights change (``weights_version``)."""
        version = weights_version(self)
        if getattr(self, "_channels_last", (None,))[0] != version:
            tables = [(planes.detach().permute(0, 2, 3, 1).contiguous().numpy(),
                       lines.detach()[..., 0].permute(0, 2, 1).contiguous().numpy())
                      for planes, lines in zip(self.planes, self.lines)]
            self._channels_last = (version, tables)
        return self._channels_last[1]

    def total_variation(self) -> Tensor:
        """Mean squared difference of neighbouring plane and line values, summed over levels
        (TensoRF's TV loss): a smoothness prior on the grids, useful on forward-facing scenes
        where few views see each point. Returns a scalar Tensor."""
        total = self.planes[0].new_zeros(())
        for planes, lines in zip(self.planes, self.lines):
            total = total + (planes[..., 1:, :] - planes[..., :-1, :]).square().mean()
            total = total + (planes[..., :, 1:] - planes[..., :, :-1]).square().mean()
            total = total + (lines[..., 1:, :] - lines[..., :-1, :]).square().mean()
        return total

    def extra_repr(self) -> str:
        return f"resolutions={self.resolutions}, components={self.components}"
