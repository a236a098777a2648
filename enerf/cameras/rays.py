"""Camera rays: pixel-centre rays for pinhole cameras and the NDC warp for forward-facing scenes.

Camera convention (as LLFF after its axis reorder, and OpenGL): the columns of a
camera-to-world matrix ``c2w[:3, :3]`` are the camera's [right, up, back] axes, so a
camera looks along ``-c2w[:3, 2]``.

Pixels follow the COLMAP convention: the principal point is at (W/2, H/2) and pixel
(i, j) (column i, row j) is sampled at its centre (i + 0.5, j + 0.5).
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

import numpy as np
import torch
from torch import Tensor

__all__ = ["Rays", "camera_directions", "pixel_rays", "rays_for_pixels", "ndc_rays", "ndc_to_world", "world_to_ndc", "make_rays",
           "flatten_rays", "index_rays", "RayExtent", "ray_extent"]


class Rays(NamedTuple):
    """A batch of rays; every field shares the leading shape ``[...]``.

    Points along a ray are ``origins + t * directions`` for ``t`` in ``[near, far]``.
    In NDC space ``directions`` are not unit length and ``t`` runs over [0, 1].
    """

    origins: Tensor  # [..., 3] ray origins (world or NDC space)
    directions: Tensor  # [..., 3] marching directions (points = origins + t * directions)
    viewdirs: Tensor  # [..., 3] unit viewing directions in world space (network input)
    near: Tensor  # [..., 1]
    far: Tensor  # [..., 1]


def camera_directions(i: Tensor, j: Tensor, height: int, width: int, focal: float, rotation: Tensor) -> Tensor:
    """World-space directions through image points (i, j) (column, row, in pixels) of a pinhole camera.

    The one formula every ray of enerf comes from (whole images in ``pixel_rays``, training
    batches in ``rays_for_pixels``), written elementwise so that a ray's bits do not depend on
    how many rays are made with it: d = cx r + cy u - b, with (r, u, b) the columns of the
    rotation, cx = (i - W / 2) / f, cy = -(j - H / 2) / f.

    Args:
        i, j: Tensor  # [...] float32 image coordinates (pixel centres are k + 0.5).
        rotation: Tensor  # [3, 3] (one camera for all points) or [..., 3, 3] (one per point)
            float32 camera-to-world rotation, columns [right, up, back].

    Returns:
        Tensor  # [..., 3] directions whose camera z component is -1 (not unit length).
    """
    cx = ((i - 0.5 * width) / focal)[..., None]
    cy = (-(j - 0.5 * height) / focal)[..., None]
    return cx * rotation[..., :, 0] + cy * rotation[..., :, 1] + -1.0 * rotation[..., :, 2]


def pixel_rays(height: int, width: int, focal: float, c2w: Tensor) -> tuple[Tensor, Tensor]:
    """World-space rays through the pixel centres of one pinhole camera.

    Args:
        height, width: image size in pixels.
        focal: focal length in pixels.
        c2w: Tensor  # [3, 4] (or [4, 4]) camera-to-world, columns [right, up, back, t].

    Returns:
        origins: Tensor  # [height, width, 3]
        directions: Tensor  # [height, width, 3], camera z component = -1 (not unit)
    """
    c2w = c2w.to(torch.float32)
    j, i = torch.meshgrid(
        torch.arange(height, dtype=torch.float32, device=c2w.device) + 0.5,
        torch.arange(width, dtype=torch.float32, device=c2w.device) + 0.5,
        indexing="ij",
    )
    directions = camera_directions(i, j, height, width, focal, c2w[:3, :3])  # [H, W, 3]
    origins = c2w[:3, 3].expand(directions.shape)
    return origins, directions


def ndc_rays(
    height: int, width: int, focal: float, near: float, origins: Tensor, directions: Tensor
) -> tuple[Tensor, Tensor]:
    """Warp world rays into normalized device coordinates (NeRF paper, appendix C).

    The plane z = -near maps to NDC z = -1 and z = -inf to z = +1; ``t`` in [0, 1]
    then covers [near, inf) along each ray.

    Args:
        origins, directions: Tensor  # [..., 3] world-space rays of a forward-facing scene.

    Returns:
        origins, directions: Tensor  # [..., 3] in NDC space.
    """
    # Shift origins onto the near plane.
    t = -(near + origins[..., 2]) / directions[..., 2]
    origins = origins + t[..., None] * directions
    ox, oy, oz = origins.unbind(-1)
    dx, dy, dz = directions.unbind(-1)
    o0 = -1.0 / (width / (2.0 * focal)) * ox / oz
    o1 = -1.0 / (height / (2.0 * focal)) * oy / oz
    o2 = 1.0 + 2.0 * near / oz
    d0 = -1.0 / (width / (2.0 * focal)) * (dx / dz - ox / oz)
    d1 = -1.0 / (height / (2.0 * focal)) * (dy / dz - oy / oz)
    d2 = -2.0 * near / oz
    return torch.stack([o0, o1, o2], -1), torch.stack([d0, d1, d2], -1)


def ndc_to_world(points, height: int, width: int, focal: float, near: float = 1.0):
    """Inverse of the NDC warp for points: NDC [..., 3] -> world (loader scene space) [..., 3].

    The warp of ``ndc_rays`` sends a world point (x, y, z), z < 0, to
    (-2f/W x/z, -2f/H y/z, 1 + 2 near / z); so z = 2 near / (z' - 1),
    x = -x' z W / (2f), y = -y' z H / (2f). Defined for z' < 1 (z' = 1 is infinitely far).
    Works on numpy arrays and torch tensors alike.
    """
    x, y, zn = points[..., 0], points[..., 1], points[..., 2]
    z = 2.0 * near / (zn - 1.0)
    stack = torch.stack if isinstance(points, Tensor) else np.stack
    return stack([-x * z * width / (2.0 * focal), -y * z * height / (2.0 * focal), z], -1)


def world_to_ndc(points: Tensor, height: int, width: int, focal: float, near: float = 1.0) -> Tensor:
    """The NDC warp of points (``enerf.cameras.rays.ndc_rays``): scene [..., 3], z < 0 -> NDC [..., 3]
    (the inverse of ``ndc_to_world``)."""
    x, y, z = points.unbind(-1)
    return torch.stack([-2.0 * focal / width * x / z, -2.0 * focal / height * y / z, 1.0 + 2.0 * near / z], -1)


def make_rays(
    height: int,
    width: int,
    focal: float,
    c2w: Tensor,
    near: float,
    far: float,
    use_ndc: bool,
) -> Rays:
    """All rays of one image, ready for rendering.

    With ``use_ndc`` the rays are warped to NDC about the plane z = -1 (LLFF rescales
    the bounds so that all content lies beyond it), ``near`` and ``far`` are ignored and
    the sampling range becomes [0, 1].

    Returns:
        Rays with leading shape [height, width].
    """
    origins, directions = pixel_rays(height, width, focal, c2w)
    return _finish_rays(origins, directions, height, width, focal, near, far, use_ndc)


def rays_for_pixels(
    c2w: Tensor,
    y: Tensor,
    x: Tensor,
    height: int,
    width: int,
    focal: float,
    near: float,
    far: float,
    use_ndc: bool,
) -> Rays:
    """The rays of chosen pixels, each through its own camera: the training batches' rays.

    Ray k is bit-identical to ``make_rays(height, width, focal, c2w[k], ...)[y[k], x[k]]``
    (the same elementwise formula, ``camera_directions``).

    Args:
        c2w: Tensor  # [n, 3, 4] (or [n, 4, 4]) float32 camera-to-world of each pixel's view, or
            [1, 3, 4] for pixels of one view.
        y, x: Tensor  # [n] integer row and column of each pixel.
        use_ndc, near, far: as ``make_rays``.

    Returns:
        Rays with leading shape [n].
    """
    c2w = c2w.to(torch.float32)
    directions = camera_directions(x.to(torch.float32) + 0.5, y.to(torch.float32) + 0.5, height, width, focal,
                                   c2w[:, :3, :3])
    return _finish_rays(c2w[:, :3, 3].expand(directions.shape), directions, height, width, focal, near, far, use_ndc)


def _finish_rays(origins: Tensor, directions: Tensor, height: int, width: int, focal: float, near: float,
                 far: float, use_ndc: bool) -> Rays:
    """World rays [..., 3] -> Rays: unit view directions, the NDC warp when asked, [near, far]."""
    viewdirs = directions / directions.norm(dim=-1, keepdim=True)
    if use_ndc:
        origins, directions = ndc_rays(height, width, focal, 1.0, origins, directions)
        near, far = 0.0, 1.0
    shape = origins.shape[:-1] + (1,)
    return Rays(
        origins=origins,
        directions=directions,
        viewdirs=viewdirs,
        near=torch.full(shape, float(near), device=origins.device),
        far=torch.full(shape, float(far), device=origins.device),
    )


def flatten_rays(rays: Rays) -> Rays:
    """Reshape every field of ``rays`` to ``[n_rays, c]``."""
    return Rays(*(field.reshape(-1, field.shape[-1]) for field in rays))


def index_rays(rays: Rays, index: Tensor | slice) -> Rays:
    """Select rays along the leading axis of flattened rays."""
    return Rays(*(field[index] for field in rays))


class RayExtent(NamedTuple):
    """What an occupancy grid needs to know of the training rays (``ray_extent``)."""

    lo: Tensor  # [3] smallest coordinates of the segments' end points (origins + t * directions, t = near, far)
    hi: Tensor  # [3] largest coordinates
    mean_direction_norm: float  # mean |directions| over all rays


def ray_extent(chunks: Iterable[Rays], n_rays: int) -> RayExtent:
    """The box of the ray segments and the mean direction length over rays given in chunks.

    Bit-identical to the same figures over all rays at once (``Rays`` [n_rays, c]): the box is a
    min / max, and the mean is taken over one [n_rays] buffer of the per-ray lengths, so it sums
    in the order a single ``.mean()`` over all rays would. Memory: that buffer (4 bytes a ray),
    not the rays.

    Args:
        chunks: flattened Rays ([n_k, c] per field), n_rays of them in all, on one device.
    """
    lo = hi = norms = None
    start = 0
    for rays in chunks:
        ends = torch.cat([rays.origins + rays.near * rays.directions, rays.origins + rays.far * rays.directions])
        c_lo, c_hi = ends.min(dim=0).values, ends.max(dim=0).values
        lo = c_lo if lo is None else torch.minimum(lo, c_lo)
        hi = c_hi if hi is None else torch.maximum(hi, c_hi)
        if norms is None:
            norms = torch.empty(n_rays, dtype=rays.directions.dtype, device=rays.directions.device)
        n = rays.directions.shape[0]
        norms[start : start + n] = rays.directions.norm(dim=-1)
        start += n
    if lo is None or start != n_rays:
        raise ValueError(f"ray_extent: chunks hold {start} rays, expected {n_rays}")
    return RayExtent(lo, hi, float(norms.mean()))
