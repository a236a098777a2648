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

Rendering on a CPU (no autograd) with ``BAG_MIN_COMPONENTS`` channels or more, a look-up is a
weighted sum of table rows instead (``bag_features``: the planes and lines channels-last, the 4
corners of a plane and the 2 ends of a line as one ``F.embedding_bag`` each, with the bilinear
weights as ``per_sample_weights``): the same values as ``F.grid_sample``'s (to float rounding),
each product written straight into its place in the output. ``studies/render_probe.py`` times it.

The MLP that reads these features (``enerf.fields.nerf``) keeps its conditioned layers: this
module replaces only the sinusoidal encoding of positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..errors import ConfigError

__all__ = ["TriPlaneEncoding", "bag_features", "BAG_MIN_COMPONENTS"]

# (plane axes, line axis) of the three products: xy * z, xz * y, yz * x.
_PLANE_AXES = ((0, 1), (0, 2), (1, 2))
_LINE_AXES = (2, 1, 0)
_PLANE_COLUMNS = torch.tensor(_PLANE_AXES).t().contiguous()  # [2, 3]: the column axis and the row axis of each plane
_LINE_AXES_T = torch.tensor(_LINE_AXES)
_PLANE_SLICES = tuple(slice(a, b + 1, b - a) for a, b in _PLANE_AXES)  # u[:, s] == u[:, list(axes)], a view
# Without autograd on a CPU, from this many channels on the look-ups are embedding bags (``bag_features``):
# measured (one thread) at 16 channels (the radiance field's) 1.5 times as fast as F.grid_sample, at 8
# (the proposal networks') as fast, below that slower (the per-point index arithmetic outweighs the
# channels read).
BAG_MIN_COMPONENTS = 16


def bag_features(planes: Tensor, lines: Tensor, u: Tensor, out: Tensor) -> None:
    """One level's plane-line products, as ``F.grid_sample`` (align_corners, border) computes them,
    through ``F.embedding_bag`` on channels-last tables (no autograd).

    Args:
        planes: Tensor  # [3, C, r, r] (plane k over axes ``_PLANE_AXES[k]``: columns along the first)
        lines: Tensor  # [3, C, r, 1] (line k along axis ``_LINE_AXES[k]``)
        u: Tensor  # [n, 3] positions in [-1, 1] (outside: the border values)
        out: Tensor  # [n, 3, C] written: out[i, k] = plane_k(u_i) * line_k(u_i)
    """
    three, c, r, _ = planes.shape
    plane_table = planes.detach().permute(0, 2, 3, 1).reshape(three * r * r, c)  # row (k, y, x): the C channels
    line_table = lines.detach().reshape(three, c, r).transpose(1, 2).reshape(three * r, c)  # row (k, y)
    n = u.shape[0]
    g = ((u + 1) / 2 * (r - 1)).clamp_(0, r - 1)  # grid_sample's source index (align_corners, border)
    i0 = g.floor().clamp_(max=r - 2)  # lower corner; at the far border its weight is 0
    f = g.sub_(i0)  # [n, 3] fraction towards the upper corner
    index = torch.int32 if 3 * r * r < 2**31 else torch.int64
    a, b = _PLANE_COLUMNS.to(u.device)  # plane k reads columns from axis a[k], rows from axis b[k]
    offsets = torch.arange(3, device=u.device, dtype=torch.float64)
    base = (i0.index_select(1, b).double() * r + i0.index_select(1, a) + offsets * (r * r)).to(index)  # [n, 3]
    corners = base.unsqueeze(-1) + torch.tensor([0, 1, r, r + 1], dtype=index, device=u.device)  # [n, 3, 4]
    fa, fb = f.index_select(1, a), f.index_select(1, b)
    ga, gb = 1 - fa, 1 - fb
    weights = torch.stack([ga * gb, fa * gb, ga * fb, fa * fb], -1)  # [n, 3, 4]
    p = F.embedding_bag(corners.view(-1, 4), plane_table, per_sample_weights=weights.view(-1, 4), mode="sum")
    axis = _LINE_AXES_T.to(u.device)
    fl = f.index_select(1, axis)
    ends = ((i0.index_select(1, axis) + offsets.to(u.dtype) * r).to(index).unsqueeze(-1)
            + torch.tensor([0, 1], dtype=index, device=u.device))  # [n, 3, 2]
    v = F.embedding_bag(ends.view(-1, 2), line_table, per_sample_weights=torch.stack([1 - fl, fl], -1).view(-1, 2),
                        mode="sum")
    torch.mul(p.view(n, 3, c), v.view(n, 3, c), out=out)


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
        on a CPU with ``BAG_MIN_COMPONENTS`` channels or more through ``bag_features`` (the same
        values to float rounding).
        """
        lead = x.shape[:-1]
        u = ((x.reshape(-1, 3) - self.lo) * self.scale - 1.0)  # [n, 3] in [-1, 1] inside the aabb
        n = u.shape[0]
        if not torch.is_grad_enabled() and u.device.type == "cpu" and self.components >= BAG_MIN_COMPONENTS:
            out = u.new_empty(n, len(self.resolutions), 3, self.components)
            for k, (planes, lines) in enumerate(zip(self.planes, self.lines)):
                bag_features(planes, lines, u, out[:, k])
            return out.view(*lead, self.out_dim)
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
