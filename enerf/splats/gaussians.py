"""A set of 3D Gaussians (``Splats``) and their view-dependent colour (real spherical harmonics, 3DGS).

Parameters are stored as 3DGS stores them (the PLY layout of ``enerf.splats.ply``): log scales,
a w-x-y-z quaternion (not necessarily unit), the opacity as a logit, colour as SH coefficients
whose band 0 ``f_dc`` maps to ``rgb = SH_C0 * f_dc + 0.5``. The colour seen along unit direction
``d`` (from the camera centre to the Gaussian) is ``max(sum_k sh[k] * Y_k(d) + 0.5, 0)`` with the
3DGS basis ``Y_k`` (``sh_basis``; degree 0..3, 1/4/9/16 coefficients).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch
from torch import Tensor

__all__ = ["SH_C0", "Splats", "sh_coeffs", "sh_basis", "sh_to_rgb", "rgb_to_sh0", "quat_to_rotmat"]

SH_C0 = 0.28209479177387814
_C1 = 0.4886025119029199
_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658,
       1.445305721320277, -0.5900435899266435)


def sh_coeffs(degree: int) -> int:
    """Coefficients per colour channel of SH ``degree`` (0..3): (degree + 1)²."""
    return (degree + 1) ** 2


@dataclass
class Splats:
    """N Gaussians; every tensor's first dimension is N (float32, one device)."""

    means: Tensor  # [N, 3] centres
    log_scales: Tensor  # [N, 3] log standard deviations along the Gaussian's own axes
    quats: Tensor  # [N, 4] rotation w, x, y, z (normalised where used)
    opacity_logits: Tensor  # [N] logit of the peak opacity
    sh: Tensor  # [N, K, 3] SH coefficients, K = (degree + 1)²; sh[:, 0] is 3DGS's f_dc
    # drawn with the 2D mip filter (Mip-Splatting; gsplat's antialiased mode): each footprint's opacity times
    # sqrt(det Σ / det(Σ + 0.3 I)), so a Gaussian keeps its coverage at any window size (rasterize.project)
    antialiased: bool = False

    def __post_init__(self) -> None:
        n = self.means.shape[0]
        shapes = {"means": (n, 3), "log_scales": (n, 3), "quats": (n, 4), "opacity_logits": (n,)}
        for name, shape in shapes.items():
            if tuple(getattr(self, name).shape) != shape:
                raise ValueError(f"Splats.{name} has shape {tuple(getattr(self, name).shape)}, expected {shape}")
        if self.sh.ndim != 3 or self.sh.shape[0] != n or self.sh.shape[2] != 3 or self.sh.shape[1] not in (1, 4, 9, 16):
            raise ValueError(f"Splats.sh has shape {tuple(self.sh.shape)}, expected [{n}, 1|4|9|16, 3]")

    def __len__(self) -> int:
        return int(self.means.shape[0])

    @property
    def degree(self) -> int:
        """The SH degree (0..3)."""
        return {1: 0, 4: 1, 9: 2, 16: 3}[int(self.sh.shape[1])]

    @property
    def opacities(self) -> Tensor:
        """[N] peak opacity in (0, 1)."""
        return torch.sigmoid(self.opacity_logits)

    @property
    def scales(self) -> Tensor:
        """[N, 3] standard deviations."""
        return torch.exp(self.log_scales)

    def factors(self) -> Tensor:
        """[N, 3, 3] R S: each Gaussian's rotation (``quat_to_rotmat``) times its standard deviations
        along its axes (the columns scaled), so that its covariance is (R S)(R S)^T."""
        return quat_to_rotmat(self.quats) * self.scales[:, None, :]

    def covariances(self) -> Tensor:
        """[N, 3, 3] the 3D covariances R S S^T R^T (symmetric positive semi-definite)."""
        m = self.factors()
        return m @ m.transpose(1, 2)

    def base_rgb(self) -> Tensor:
        """[N, 3] the band-0 colour SH_C0 f_dc + 0.5 clamped to [0, 1]: what a viewer without
        view-dependent colour draws."""
        return torch.clamp(SH_C0 * self.sh[:, 0] + 0.5, 0.0, 1.0)

    def importance(self) -> Tensor:
        """[N] opacity x volume (the product of the standard deviations): the order in which a
        page or file keeps its splats when it keeps fewer."""
        return self.opacities * torch.exp(self.log_scales.sum(-1))

    def tensors(self) -> dict[str, Tensor]:
        """The five parameter tensors by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "antialiased"}

    def map(self, fn) -> "Splats":
        """A new Splats with ``fn`` applied to every tensor (``.to(device)``, ``.detach()``, an index)."""
        return Splats(**{name: fn(t) for name, t in self.tensors().items()}, antialiased=self.antialiased)

    def select(self, index: Tensor) -> "Splats":
        """The Gaussians at ``index`` ([M] long or [N] bool)."""
        return self.map(lambda t: t[index])


def quat_to_rotmat(quats: Tensor) -> Tensor:
    """[N, 4] w-x-y-z quaternions (any norm) -> [N, 3, 3] rotation matrices."""
    w, x, y, z = torch.nn.functional.normalize(quats, dim=-1).unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], -1).reshape(-1, 3, 3)


def sh_basis(dirs: Tensor, degree: int) -> Tensor:
    """The 3DGS real SH basis (``computeColorFromSH`` of the reference rasterizer).

    Args:
        dirs: Tensor  # [..., 3] unit directions
        degree: 0..3
    Returns:
        Tensor  # [..., (degree + 1)²]
    """
    x, y, z = dirs.unbind(-1)
    out = [torch.full_like(x, SH_C0)]
    if degree >= 1:
        out += [-_C1 * y, _C1 * z, -_C1 * x]
    if degree >= 2:
        xx, yy, zz, xy, yz, xz = x * x, y * y, z * z, x * y, y * z, x * z
        out += [_C2[0] * xy, _C2[1] * yz, _C2[2] * (2 * zz - xx - yy), _C2[3] * xz, _C2[4] * (xx - yy)]
    if degree >= 3:
        out += [_C3[0] * y * (3 * xx - yy), _C3[1] * xy * z, _C3[2] * y * (4 * zz - xx - yy),
                _C3[3] * z * (2 * zz - 3 * xx - 3 * yy), _C3[4] * x * (4 * zz - xx - yy),
                _C3[5] * z * (xx - yy), _C3[6] * x * (xx - 3 * yy)]
    return torch.stack(out, -1)


def sh_to_rgb(sh: Tensor, dirs: Tensor) -> Tensor:
    """Colour of each Gaussian seen along ``dirs``.

    Args:
        sh: Tensor  # [N, K, 3]
        dirs: Tensor  # [N, 3] unit directions from the camera centre to the Gaussian
    Returns:
        Tensor  # [N, 3], clamped at 0 below (as 3DGS; not above)
    """
    degree = {1: 0, 4: 1, 9: 2, 16: 3}[int(sh.shape[1])]
    basis = sh_basis(dirs, degree)  # [N, K]
    return torch.clamp_min(torch.einsum("nk,nkc->nc", basis, sh) + 0.5, 0.0)


def rgb_to_sh0(rgb: Tensor) -> Tensor:
    """[..., 3] colour -> the band-0 coefficient (f_dc) that renders it from every direction."""
    return (rgb - 0.5) / SH_C0
