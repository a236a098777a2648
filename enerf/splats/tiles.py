"""The splats' image formation on a CPU, compiled (numba), forward and backward: what the bake's fit,
``enerf render / eval --splats``, videos and the viewer's previews use.

The image formation is ``enerf.splats.rasterize``'s (the same projection, the same 1/255 and 0.99
alpha bounds, the same front-to-back order), drawn as the reference rasterizer draws it: the image
is cut into ``TILE`` x ``TILE`` tiles, each tile lists the Gaussians whose box touches it in depth
order, and each pixel walks its tile's list front to back and stops once its transmittance falls
below 1e-4 (the reference's early stop: the pairs behind an opaque surface cost nothing). The
reference's tiles are 16 px wide (a GPU thread block); on a CPU a pixel walks its whole list, and
4-px tiles make the lists about 5x shorter for splats a few pixels wide (the fastest of 4, 8 and 16
px for a bake's fit step). A tile's pixels walk its list together: each pair is read once and
tested against all of them (a tile's walk stops once every pixel has), which halves the forward
pass against one walk a pixel; the pairs' data is gathered in walking order, one contiguous row a
pair. Tiles are drawn in parallel over the machine's cores (numba's ``prange``), in float32 with
numba's fast-math flags (no NaN / inf shortcuts); the binning runs in parallel over chunks of the
depth-sorted Gaussians. The result equals the pure-torch path's to within that stop (< 1e-4 a pixel).

The backward pass is the reference's: each pixel keeps its final transmittance and the end of the
pairs it composited; going back to front (a tile's pixels together, from the last pair any of them
used), the transmittance before each pair is recovered by dividing by (1 - alpha) and the colour
behind it is accumulated, which gives dL/dalpha = T (c - colour behind) . dL/drgb + T_final /
(1 - alpha) dL/dacc. Each (tile, Gaussian) pair owns one row of a gradient buffer (no two threads
write one row); the rows are summed per Gaussian.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["TILE", "T_STOP", "numba_available", "rasterize_tiles"]

TILE = 4  # px; see the module docstring
T_STOP = 1e-4  # a pixel stops once its transmittance falls below this (the reference's)
# numba's fast-math flags for the draw kernels: reassociation, contraction, fast exp; NaN and inf
# handled as IEEE
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}

_KERNEL = None


def numba_available() -> bool:
    """Whether numba imports (it is a dependency; a broken install falls back to the torch path)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _kernel():
    """The compiled kernels (draw, its backward, the binning, the per-pair gradient sums, the pair gather),
    compiled on first use and cached on disk where numba can write."""
    global _KERNEL
    if _KERNEL is None:
        import numba

        @numba.njit(parallel=True, cache=True, fastmath=FAST)
        def draw(starts, pk, col, tile_size, tiles_x, width, height, r0, alpha_min, alpha_max,
                 t_stop, rgb, acc, dep, last, final_t):
            n_tiles = len(starts) - 1
            one, half = np.float32(1.0), np.float32(0.5)
            for tile in numba.prange(n_tiles):
                ty, tx = tile // tiles_x, tile % tiles_x
                a, b = starts[tile], starts[tile + 1]
                m = tile_size * tile_size  # the tile's pixels, walked together (module docstring)
                fx, fy = np.empty(m, np.float32), np.empty(m, np.float32)
                trans = np.ones(m, np.float32)
                cr, cg, cb, d = np.zeros(m, np.float32), np.zeros(m, np.float32), np.zeros(m, np.float32), \
                    np.zeros(m, np.float32)
                end = np.full(m, b, np.int64)
                n = 0
                for py in range(r0 + ty * tile_size, min(r0 + (ty + 1) * tile_size, height)):
                    for px in range(tx * tile_size, min((tx + 1) * tile_size, width)):
                        fx[n], fy[n] = px + half, py + half
                        n += 1
                alive = n
                for k in range(a, b):  # pk[k]: u, v, conic a, b, c, floor, opacity, depth of pair k
                    u, v, ca, cb_, cc, floor, op, dk = pk[k, 0], pk[k, 1], pk[k, 2], pk[k, 3], pk[k, 4], pk[k, 5], \
                        pk[k, 6], pk[k, 7]
                    c0, c1, c2 = col[k, 0], col[k, 1], col[k, 2]
                    for p in range(n):
                        t = trans[p]
                        if t < t_stop:  # this pixel has stopped
                            continue
                        dx, dy = fx[p] - u, fy[p] - v
                        power = -half * (ca * dx * dx + cc * dy * dy) - cb_ * dx * dy
                        if power > 0.0 or power < floor:  # floor: log(alpha_min / opacity), no exp needed
                            continue
                        alpha = op * np.exp(power)
                        if alpha < alpha_min:
                            continue
                        if alpha > alpha_max:
                            alpha = alpha_max
                        w = alpha * t
                        cr[p] += w * c0
                        cg[p] += w * c1
                        cb[p] += w * c2
                        d[p] += w * dk
                        t *= one - alpha
                        trans[p] = t
                        if t < t_stop:
                            end[p] = k + 1
                            alive -= 1
                    if alive == 0:
                        break
                n = 0
                for py in range(r0 + ty * tile_size, min(r0 + (ty + 1) * tile_size, height)):
                    for px in range(tx * tile_size, min((tx + 1) * tile_size, width)):
                        row = py - r0
                        rgb[row, px, 0], rgb[row, px, 1], rgb[row, px, 2] = cr[n], cg[n], cb[n]
                        acc[row, px] = one - trans[n]
                        dep[row, px] = d[n]
                        last[row, px] = end[n]
                        final_t[row, px] = trans[n]
                        n += 1

        @numba.njit(parallel=True, cache=True, fastmath=FAST)
        def draw_grad(starts, pk, col, tile_size, tiles_x, width, height, r0, alpha_min, alpha_max,
                      last, final_t, g_rgb, g_acc, g_pair):
            n_tiles = len(starts) - 1
            one, half = np.float32(1.0), np.float32(0.5)
            for tile in numba.prange(n_tiles):
                ty, tx = tile // tiles_x, tile % tiles_x
                a = starts[tile]
                m = tile_size * tile_size
                fx, fy = np.empty(m, np.float32), np.empty(m, np.float32)
                trans, t_end = np.empty(m, np.float32), np.empty(m, np.float32)
                gr, gg, gb, ga = np.empty(m, np.float32), np.empty(m, np.float32), np.empty(m, np.float32), \
                    np.empty(m, np.float32)
                br, bg, bb = np.zeros(m, np.float32), np.zeros(m, np.float32), np.zeros(m, np.float32)  # behind
                stop = np.empty(m, np.int64)
                n, top = 0, a
                for py in range(r0 + ty * tile_size, min(r0 + (ty + 1) * tile_size, height)):
                    for px in range(tx * tile_size, min((tx + 1) * tile_size, width)):
                        row = py - r0
                        fx[n], fy[n] = px + half, py + half
                        t_end[n] = trans[n] = final_t[row, px]
                        gr[n], gg[n], gb[n], ga[n] = g_rgb[row, px, 0], g_rgb[row, px, 1], g_rgb[row, px, 2], \
                            g_acc[row, px]
                        stop[n] = last[row, px]
                        top = max(top, stop[n])
                        n += 1
                for k in range(top - 1, a - 1, -1):  # back to front; pair k's row is this tile's alone
                    u, v, ca, cb_, cc, floor, op = pk[k, 0], pk[k, 1], pk[k, 2], pk[k, 3], pk[k, 4], pk[k, 5], pk[k, 6]
                    c0, c1, c2 = col[k, 0], col[k, 1], col[k, 2]
                    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = s8 = np.float32(0.0)
                    for p in range(n):
                        if k >= stop[p]:  # behind where this pixel stopped
                            continue
                        dx, dy = fx[p] - u, fy[p] - v
                        power = -half * (ca * dx * dx + cc * dy * dy) - cb_ * dx * dy
                        if power > 0.0 or power < floor:
                            continue
                        gauss = np.exp(power)
                        alpha = op * gauss
                        if alpha < alpha_min:
                            continue
                        clamped = alpha > alpha_max
                        if clamped:
                            alpha = alpha_max
                        rest = one - alpha
                        t = trans[p] / rest  # the transmittance in front of this pair
                        trans[p] = t
                        w = alpha * t
                        s6 += w * gr[p]
                        s7 += w * gg[p]
                        s8 += w * gb[p]
                        d_alpha = t * ((c0 - br[p]) * gr[p] + (c1 - bg[p]) * gg[p] + (c2 - bb[p]) * gb[p]) \
                            + ga[p] * t_end[p] / rest
                        br[p] = alpha * c0 + rest * br[p]
                        bg[p] = alpha * c1 + rest * bg[p]
                        bb[p] = alpha * c2 + rest * bb[p]
                        if clamped:
                            continue
                        s5 += d_alpha * gauss
                        d_power = d_alpha * alpha
                        s0 += d_power * (ca * dx + cb_ * dy)
                        s1 += d_power * (cc * dy + cb_ * dx)
                        s2 -= half * d_power * dx * dx
                        s3 -= d_power * dx * dy
                        s4 -= half * d_power * dy * dy
                    g_pair[k, 0], g_pair[k, 1], g_pair[k, 2], g_pair[k, 3], g_pair[k, 4] = s0, s1, s2, s3, s4
                    g_pair[k, 5], g_pair[k, 6], g_pair[k, 7], g_pair[k, 8] = s5, s6, s7, s8

        @numba.njit(cache=True)
        def touches(u, v, ca, cb, cc, floor, x0, x1, y0, y1):
            """Whether a pixel centre in [x0, x1] x [y0, y1] can pass alpha_min: the least of the conic's
            quadratic form over the rectangle (0 inside it, else on one of its edges), -q / 2 >= floor."""
            dx0, dx1, dy0, dy1 = x0 - u, x1 - u, y0 - v, y1 - v
            if dx0 <= 0.0 <= dx1 and dy0 <= 0.0 <= dy1:
                return True
            least = np.inf
            for dy in (dy0, dy1):  # horizontal edges: the best dx for this dy, clamped to the edge
                dx = min(max(-cb * dy / ca, dx0), dx1)
                least = min(least, ca * dx * dx + 2.0 * cb * dx * dy + cc * dy * dy)
            for dx in (dx0, dx1):
                dy = min(max(-cb * dx / cc, dy0), dy1)
                least = min(least, ca * dx * dx + 2.0 * cb * dx * dy + cc * dy * dy)
            return -0.5 * least >= floor

        @numba.njit(parallel=True, cache=True)
        def bin_pairs(per_splat, x0, x1, y0, y1, tile_size, tiles_x, n_tiles, r0):
            """Each tile's Gaussians in depth order (the Gaussians come sorted): the Gaussians cut into
            contiguous chunks binned in parallel, count then fill; chunk c's entries of a tile follow
            those of the chunks before it."""
            chunks = 8
            n = len(x0)
            counts = np.zeros((chunks, n_tiles), np.int64)
            starts, ids = np.zeros(n_tiles + 1, np.int64), np.empty(0, np.int64)
            for rep in range(2):
                if rep == 1:
                    for t in range(n_tiles):  # counts become each chunk's first slot in the tile
                        s = starts[t]
                        for c in range(chunks):
                            s, counts[c, t] = s + counts[c, t], s
                        starts[t + 1] = s
                    ids = np.empty(starts[n_tiles], np.int64)
                for c in numba.prange(chunks):
                    for g in range(c * n // chunks, (c + 1) * n // chunks):
                        u, v, ca, cb, cc, floor = per_splat[g, 0], per_splat[g, 1], per_splat[g, 2], \
                            per_splat[g, 3], per_splat[g, 4], per_splat[g, 5]
                        for ty in range(y0[g], y1[g]):
                            for tx in range(x0[g], x1[g]):
                                if not touches(u, v, ca, cb, cc, floor, tx * tile_size + 0.5,
                                               (tx + 1) * tile_size - 0.5, r0 + ty * tile_size + 0.5,
                                               r0 + (ty + 1) * tile_size - 0.5):
                                    continue
                                t = ty * tiles_x + tx
                                if rep == 1:
                                    ids[counts[c, t]] = g
                                counts[c, t] += 1
            return starts, ids

        @numba.njit(cache=True)
        def sum_pairs(ids, g_pair, n):
            """[n, 9] each Gaussian's gradient: the sum of its pairs' rows."""
            out = np.zeros((n, g_pair.shape[1]), np.float32)
            for k in range(len(ids)):
                for j in range(g_pair.shape[1]):
                    out[ids[k], j] += g_pair[k, j]
            return out

        @numba.njit(parallel=True, cache=True)
        def gather(rows, ids):
            """rows[ids], in parallel."""
            out = np.empty((len(ids), rows.shape[1]), rows.dtype)
            for k in numba.prange(len(ids)):
                for j in range(rows.shape[1]):
                    out[k, j] = rows[ids[k], j]
            return out

        _KERNEL = (draw, draw_grad, bin_pairs, sum_pairs, gather)
    return _KERNEL


def _f32(t: Tensor) -> np.ndarray:
    """A contiguous float32 numpy view / copy of ``t`` (no gradient)."""
    return np.ascontiguousarray(t.detach().float().numpy())


def _bin(per_splat: np.ndarray, uv: Tensor, extent: Tensor, width: int, rows: tuple[int, int]
         ) -> tuple[np.ndarray, np.ndarray, int]:
    """Each tile's list of Gaussians in depth order: (starts [tiles + 1], ids [P], tiles_x). A Gaussian
    joins the tiles of its box where some pixel centre can pass alpha_min (its ellipse reaches them)."""
    r0, r1 = rows
    tiles_x, tiles_y = -(-width // TILE), -(-(r1 - r0) // TILE)
    with torch.no_grad():
        x0 = torch.floor((uv[:, 0] - extent[:, 0] - 0.5) / TILE).clamp(0, tiles_x - 1).long()
        x1 = torch.floor((uv[:, 0] + extent[:, 0] - 0.5) / TILE).clamp(-1, tiles_x - 1).long() + 1
        y0 = torch.floor((uv[:, 1] - extent[:, 1] - 0.5 - r0) / TILE).clamp(0, tiles_y - 1).long()
        y1 = torch.floor((uv[:, 1] + extent[:, 1] - 0.5 - r0) / TILE).clamp(-1, tiles_y - 1).long() + 1
    starts, ids = _kernel()[2](per_splat, x0.numpy(), x1.numpy(), y0.numpy(), y1.numpy(), TILE, tiles_x,
                               tiles_x * tiles_y, r0)
    return starts, ids, tiles_x


class _Tiles(torch.autograd.Function):
    """The compiled forward pass and its backward (module docstring); depth gets no gradient."""

    @staticmethod
    def forward(ctx, uv, conic, opacity, colors, depth, extent, width, rows, alpha_min, alpha_max):
        r0, r1 = rows
        h = r1 - r0
        rgb = np.zeros((h, width, 3), np.float32)
        acc = np.zeros((h, width), np.float32)
        dep = np.zeros((h, width), np.float32)
        last = np.zeros((h, width), np.int64)
        final_t = np.ones((h, width), np.float32)
        op = _f32(opacity)
        floor = np.log(alpha_min / np.maximum(op, 1e-30)).astype(np.float32) - 1e-5  # below it alpha < alpha_min
        per_splat = np.concatenate([_f32(uv), _f32(conic), floor[:, None], op[:, None], _f32(depth)[:, None]], 1)
        starts, ids, tiles_x = _bin(per_splat, uv, extent, width, rows)
        pk, col = _kernel()[4](per_splat, ids), _kernel()[4](_f32(colors), ids)  # a row a pair, in walking order
        f32 = np.float32
        _kernel()[0](starts, pk, col, TILE, tiles_x, width, r1, r0, f32(alpha_min), f32(alpha_max), f32(T_STOP), rgb, acc,
                     dep, last, final_t)
        ctx.state = (starts, ids, pk, col, tiles_x, width, rows, alpha_min, alpha_max, last, final_t, len(uv))
        dep_t = torch.from_numpy(dep)
        ctx.mark_non_differentiable(dep_t)
        return torch.from_numpy(rgb), torch.from_numpy(acc), dep_t

    @staticmethod
    def backward(ctx, g_rgb, g_acc, _g_dep):
        starts, ids, pk, col, tiles_x, width, (r0, r1), alpha_min, alpha_max, last, final_t, n = ctx.state
        g_pair = np.zeros((len(ids), 9), np.float32)
        _kernel()[1](starts, pk, col, TILE, tiles_x, width, r1, r0, np.float32(alpha_min), np.float32(alpha_max), last,
                     final_t, _f32(g_rgb), _f32(g_acc), g_pair)
        grad = torch.from_numpy(_kernel()[3](ids, g_pair, n))
        return grad[:, 0:2], grad[:, 2:5], grad[:, 5], grad[:, 6:9], None, None, None, None, None, None


def rasterize_tiles(uv: Tensor, conic: Tensor, opacity: Tensor, colors: Tensor, depth: Tensor, extent: Tensor,
                    width: int, rows: tuple[int, int], alpha_min: float, alpha_max: float) -> tuple[Tensor, Tensor, Tensor]:
    """Draw Gaussians already projected and sorted front to back (``rasterize``'s step 1); differentiable
    in uv, conic, opacity and colors (rgb and acc; depth has no gradient).

    Args:
        uv, conic, opacity, colors, depth, extent: [G, 2], [G, 3], [G], [G, 3], [G], [G, 2] (CPU)
        rows: (r0, r1): the image rows drawn
    Returns:
        rgb [r1 - r0, width, 3] (no background), acc [r1 - r0, width], depth [r1 - r0, width] (weighted)
    """
    return _Tiles.apply(uv, conic, opacity, colors, depth, extent, width, rows, alpha_min, alpha_max)
