"""The kernels of ``enerf.nn.compiled`` (imported on first use: importing numba takes a while).

Defined at module level so that numba's on-disk cache finds them again in the next process.
"""

import numba
import numpy as np

# numba's fast-math flags (enerf.splats.tiles.FAST): reassociation, contraction, fast exp; NaN and inf as IEEE
FAST = {"nsz", "arcp", "contract", "afn", "reassoc"}


@numba.njit(inline="always", fastmath=FAST)
def cell(v, r):
    """A coordinate in [-1, 1] -> (lower lattice index, fraction towards the next), grid_sample's
    align_corners source index clamped to the border."""
    g = min(max((v + np.float32(1.0)) * np.float32(0.5) * np.float32(r - 1), np.float32(0.0)),
            np.float32(r - 1))
    i = min(int(g), r - 2)
    return i, g - np.float32(i)


@numba.njit(parallel=True, cache=True, fastmath=FAST)
def level(x, lo, scale, planes, lines, out, col):
    """One triplane level (``enerf.nn.compiled.triplane_level``): x [n, 3], lo, scale [3], planes
    [3, r, r, C], lines [3, r, C] float32; writes out[:, col:col + 3 C]."""
    n, r, c = x.shape[0], planes.shape[1], planes.shape[3]
    one = np.float32(1.0)
    for i in numba.prange(n):
        i0, f0 = cell((x[i, 0] - lo[0]) * scale[0] - one, r)
        i1, f1 = cell((x[i, 1] - lo[1]) * scale[1] - one, r)
        i2, f2 = cell((x[i, 2] - lo[2]) * scale[2] - one, r)
        for k in range(3):  # plane over (columns, rows), line along the third axis
            if k == 0:
                a, fa, b, fb, z, fz = i0, f0, i1, f1, i2, f2
            elif k == 1:
                a, fa, b, fb, z, fz = i0, f0, i2, f2, i1, f1
            else:
                a, fa, b, fb, z, fz = i1, f1, i2, f2, i0, f0
            w00, w01, w10, w11 = (one - fa) * (one - fb), fa * (one - fb), (one - fa) * fb, fa * fb
            base = col + k * c
            for ch in range(c):
                p = (w00 * planes[k, b, a, ch] + w01 * planes[k, b, a + 1, ch]
                     + w10 * planes[k, b + 1, a, ch] + w11 * planes[k, b + 1, a + 1, ch])
                out[i, base + ch] = p * ((one - fz) * lines[k, z, ch] + fz * lines[k, z + 1, ch])


@numba.njit(parallel=True, cache=True, fastmath=FAST)
def level_backward(x, lo, scale, planes, lines, grad, col, blocks, grad_planes, grad_lines):
    """The gradients of ``level`` (``enerf.nn.compiled.TriplaneLevel``): grad [n, F] of its output, read at
    [:, col:col + 3 C]; adds into grad_planes [3, r, r, C] and grad_lines [3, r, C] (zeros on entry).

    Work items are (plane, block of channels): each owns its slice of both gradients, so no two threads
    write one value and every value sums its points in index order (the same bits on any thread count).
    """
    n, r, c = x.shape[0], planes.shape[1], planes.shape[3]
    one = np.float32(1.0)
    width = (c + blocks - 1) // blocks
    for item in numba.prange(3 * blocks):
        k, first = item // blocks, (item % blocks) * width
        last = min(first + width, c)
        if k == 0:
            ua, ub, uz = 0, 1, 2
        elif k == 1:
            ua, ub, uz = 0, 2, 1
        else:
            ua, ub, uz = 1, 2, 0
        base = col + k * c
        for i in range(n):
            a, fa = cell((x[i, ua] - lo[ua]) * scale[ua] - one, r)
            b, fb = cell((x[i, ub] - lo[ub]) * scale[ub] - one, r)
            z, fz = cell((x[i, uz] - lo[uz]) * scale[uz] - one, r)
            w00, w01, w10, w11 = (one - fa) * (one - fb), fa * (one - fb), (one - fa) * fb, fa * fb
            for ch in range(first, last):
                g = grad[i, base + ch]
                p = (w00 * planes[k, b, a, ch] + w01 * planes[k, b, a + 1, ch]
                     + w10 * planes[k, b + 1, a, ch] + w11 * planes[k, b + 1, a + 1, ch])
                line = (one - fz) * lines[k, z, ch] + fz * lines[k, z + 1, ch]
                gp, gl = g * line, g * p
                grad_planes[k, b, a, ch] += w00 * gp
                grad_planes[k, b, a + 1, ch] += w01 * gp
                grad_planes[k, b + 1, a, ch] += w10 * gp
                grad_planes[k, b + 1, a + 1, ch] += w11 * gp
                grad_lines[k, z, ch] += (one - fz) * gl
                grad_lines[k, z + 1, ch] += fz * gl


@numba.njit(parallel=True, cache=True, fastmath=FAST)
def density(x, kind, lo, scale, table, w2, b2, out):
    """A baked density (``enerf.nn.compiled.baked_density``): x [n, 3], kind (``CONTRACTION_CODES``),
    lo, scale [3], table [r, r, r, H], w2 [H] float32, b2 float32; writes out [n]."""
    n, r, hidden = x.shape[0], table.shape[0], table.shape[3]
    one, zero = np.float32(1.0), np.float32(0.0)
    for i in numba.prange(n):
        p0, p1, p2 = x[i, 0], x[i, 1], x[i, 2]
        if kind != 0:
            if kind == 1:
                norm = np.sqrt(p0 * p0 + p1 * p1 + p2 * p2)
            else:
                norm = max(abs(p0), abs(p1), abs(p2))
            if norm > one:
                s = (np.float32(2.0) - one / norm) / norm
                p0, p1, p2 = p0 * s, p1 * s, p2 * s
        i0, f0 = cell((p0 - lo[0]) * scale[0] - one, r)
        i1, f1 = cell((p1 - lo[1]) * scale[1] - one, r)
        i2, f2 = cell((p2 - lo[2]) * scale[2] - one, r)
        g0, g1, g2 = one - f0, one - f1, one - f2
        raw = b2
        for h in range(hidden):
            v = (g0 * (g1 * (g2 * table[i0, i1, i2, h] + f2 * table[i0, i1, i2 + 1, h])
                       + f1 * (g2 * table[i0, i1 + 1, i2, h] + f2 * table[i0, i1 + 1, i2 + 1, h]))
                 + f0 * (g1 * (g2 * table[i0 + 1, i1, i2, h] + f2 * table[i0 + 1, i1, i2 + 1, h])
                         + f1 * (g2 * table[i0 + 1, i1 + 1, i2, h]
                                 + f2 * table[i0 + 1, i1 + 1, i2 + 1, h])))
            if v > zero:
                raw += w2[h] * v
        out[i] = np.exp(min(raw, np.float32(15.0)) - one)
