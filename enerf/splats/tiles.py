"""The splats' forward pass on a CPU, compiled (numba): what ``enerf render / eval --splats``, videos
and the viewer's previews use when no gradient is needed.

The image formation is ``enerf.splats.rasterize``'s (the same projection, the same 1/255 and 0.99
alpha bounds, the same front-to-back order), drawn as the reference rasterizer draws it: the image
is cut into 16 x 16 tiles, each tile lists the Gaussians whose box touches it in depth order, and
each pixel walks its tile's list front to back and stops once its transmittance falls below 1e-4
(the reference's early stop: the pairs behind an opaque surface, most of them, cost nothing).
Tiles are drawn in parallel over the machine's cores (numba's ``prange``). The result equals the
pure-torch path's to within that stop (< 1e-4 a pixel).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["TILE", "T_STOP", "numba_available", "rasterize_tiles"]

TILE = 16
T_STOP = 1e-4  # a pixel stops once its transmittance falls below this (the reference's)

_KERNEL = None


def numba_available() -> bool:
    """Whether numba imports (it is a dependency; a broken install falls back to the torch path)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _kernel():
    """The compiled per-tile loop (compiled on first use, cached on disk where numba can write)."""
    global _KERNEL
    if _KERNEL is None:
        import numba

        @numba.njit(parallel=True, cache=True, fastmath=False)
        def draw(starts, ids, uv, conic, opacity, colors, depth, tiles_x, width, height, r0, alpha_min, alpha_max,
                 t_stop, rgb, acc, dep):
            n_tiles = len(starts) - 1
            for tile in numba.prange(n_tiles):
                ty, tx = tile // tiles_x, tile % tiles_x
                a, b = starts[tile], starts[tile + 1]
                for py in range(r0 + ty * 16, min(r0 + ty * 16 + 16, height)):
                    for px in range(tx * 16, min(tx * 16 + 16, width)):
                        trans = 1.0
                        cr = cg = cb = d = 0.0
                        fx, fy = px + 0.5, py + 0.5
                        for k in range(a, b):
                            g = ids[k]
                            dx, dy = fx - uv[g, 0], fy - uv[g, 1]
                            power = -0.5 * (conic[g, 0] * dx * dx + conic[g, 2] * dy * dy) - conic[g, 1] * dx * dy
                            if power > 0.0:
                                continue
                            alpha = opacity[g] * np.exp(power)
                            if alpha < alpha_min:
                                continue
                            if alpha > alpha_max:
                                alpha = alpha_max
                            w = alpha * trans
                            cr += w * colors[g, 0]
                            cg += w * colors[g, 1]
                            cb += w * colors[g, 2]
                            d += w * depth[g]
                            trans *= 1.0 - alpha
                            if trans < t_stop:
                                break
                        row = py - r0
                        rgb[row, px, 0] = cr
                        rgb[row, px, 1] = cg
                        rgb[row, px, 2] = cb
                        acc[row, px] = 1.0 - trans
                        dep[row, px] = d

        _KERNEL = draw
    return _KERNEL


def rasterize_tiles(uv: Tensor, conic: Tensor, opacity: Tensor, colors: Tensor, depth: Tensor, extent: Tensor,
                    width: int, rows: tuple[int, int], alpha_min: float, alpha_max: float) -> tuple[Tensor, Tensor, Tensor]:
    """Draw Gaussians already projected and sorted front to back (``rasterize``'s step 1).

    Args:
        uv, conic, opacity, colors, depth, extent: [G, 2], [G, 3], [G], [G, 3], [G], [G, 2] (CPU)
        rows: (r0, r1): the image rows drawn
    Returns:
        rgb [r1 - r0, width, 3] (no background), acc [r1 - r0, width], depth [r1 - r0, width] (weighted)
    """
    r0, r1 = rows
    h = r1 - r0
    tiles_x, tiles_y = -(-width // TILE), -(-h // TILE)
    x0 = torch.floor((uv[:, 0] - extent[:, 0] - 0.5) / TILE).clamp(0, tiles_x - 1).long()
    x1 = torch.floor((uv[:, 0] + extent[:, 0] - 0.5) / TILE).clamp(-1, tiles_x - 1).long() + 1
    y0 = torch.floor((uv[:, 1] - extent[:, 1] - 0.5 - r0) / TILE).clamp(0, tiles_y - 1).long()
    y1 = torch.floor((uv[:, 1] + extent[:, 1] - 0.5 - r0) / TILE).clamp(-1, tiles_y - 1).long() + 1
    bw, bh = (x1 - x0).clamp_min(0), (y1 - y0).clamp_min(0)
    count = bw * bh
    gid = torch.repeat_interleave(torch.arange(len(uv)), count)
    local = torch.arange(len(gid)) - (torch.cumsum(count, 0) - count)[gid]
    tile = (y0[gid] + torch.div(local, bw[gid], rounding_mode="floor")) * tiles_x + x0[gid] + local % bw[gid]
    order = torch.sort(tile, stable=True).indices  # depth order kept within a tile
    ids = gid[order].numpy().astype(np.int64)
    starts = np.zeros(tiles_x * tiles_y + 1, np.int64)
    starts[1:] = np.cumsum(np.bincount(tile.numpy(), minlength=tiles_x * tiles_y))
    rgb = np.zeros((h, width, 3), np.float32)
    acc = np.zeros((h, width), np.float32)
    dep = np.zeros((h, width), np.float32)

    def f32(t: Tensor) -> np.ndarray:
        return np.ascontiguousarray(t.detach().float().numpy())

    _kernel()(starts, ids, f32(uv), f32(conic), f32(opacity), f32(colors), f32(depth), tiles_x, width, r1, r0,
              alpha_min, alpha_max, T_STOP, rgb, acc, dep)
    return torch.from_numpy(rgb), torch.from_numpy(acc), torch.from_numpy(dep)
