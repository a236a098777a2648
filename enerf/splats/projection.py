"""The splats' projection on a CPU, compiled (numba), forward and backward: step 1 of
``enerf.splats.rasterize`` (``project``, then the choice and depth order of the Gaussians a band of
rows draws) in one pass over the Gaussians, for the compiled draw of ``enerf.splats.tiles``.

The same image formation as the pure-torch ``project``: each centre into the camera (OpenCV axes), the
covariance ``R S S^T R^T`` through the affine approximation ``J W`` of the perspective map (x / z and
y / z clamped to ``FOV_CLAMP`` x the half field of view in ``J``), plus ``LOW_PASS`` px² on the
diagonal, the 2D mip filter's opacity factor for antialiased splats, the box outside which no pixel
passes ``ALPHA_MIN``. Torch's version is a few dozen tensor operations over every Gaussian, each with
its own pass over memory and its own node in the autograd graph; here one loop over the Gaussians
computes all of it (in float64, stored in float32), in parallel over the machine's cores, and the
backward pass is the chain rule written out per Gaussian (the reference rasterizer's
``computeCov2DCUDA`` / ``computeCov3D`` backward, plus the opacity's and the mip filter's), run only
over the Gaussians drawn. Gradients reach the centres, log scales, quaternions and opacity logits;
the colours are the caller's (``sh_to_rgb`` on the drawn Gaussians, any SH degree).

It is the torch ``project`` written a second time on purpose, for speed; the two are held equal by
tests/unit/test_splat_rasterize.py (forward images, and every gradient against torch's autograd), and the
constants come from ``rasterize`` as arguments, never retyped here.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..cameras.pinhole import Pinhole, world_to_cv_camera

__all__ = ["project_drawn"]

_KERNELS = None
CHUNKS = 64  # the Gaussians are cut into this many contiguous chunks, run in parallel


def _kernels():
    """The compiled forward and backward kernels (compiled on first use, cached on disk where numba can write)."""
    global _KERNELS
    if _KERNELS is not None:
        return _KERNELS
    import numba

    @numba.njit(cache=True, inline="always")
    def geometry(i, means, log_scales, quats, rot, centre, f, lim_x, lim_y, near, p, jw, q, rq, s, t):
        """Gaussian i in the camera, written into the scratch arrays p [3] (camera point), JW [2, 3] = J W,
        q [4] (the unit quaternion), Rq [3, 3], s [3], T = JW Rq S [2, 3]; returns zs, the clamped x / z and
        y / z, whether each is unclamped, and the quaternion's norm."""
        for r in range(3):
            p[r] = rot[r, 0] * (means[i, 0] - centre[0]) + rot[r, 1] * (means[i, 1] - centre[1]) \
                + rot[r, 2] * (means[i, 2] - centre[2])
        zs = max(p[2], near)
        rx, ry = p[0] / zs, p[1] / zs
        cx, cy = min(max(rx, -lim_x), lim_x), min(max(ry, -lim_y), lim_y)
        tx, ty = cx * zs, cy * zs
        j00, j02, j11, j12 = f / zs, -f * tx / (zs * zs), f / zs, -f * ty / (zs * zs)
        for k in range(3):
            jw[0, k] = j00 * rot[0, k] + j02 * rot[2, k]
            jw[1, k] = j11 * rot[1, k] + j12 * rot[2, k]
        qw, qx = np.float64(quats[i, 0]), np.float64(quats[i, 1])
        qy, qz = np.float64(quats[i, 2]), np.float64(quats[i, 3])
        norm = max(np.sqrt(qw * qw + qx * qx + qy * qy + qz * qz), 1e-12)
        qw, qx, qy, qz = qw / norm, qx / norm, qy / norm, qz / norm
        rq[0, 0], rq[0, 1], rq[0, 2] = 1 - 2 * (qy * qy + qz * qz), 2 * (qx * qy - qw * qz), 2 * (qx * qz + qw * qy)
        rq[1, 0], rq[1, 1], rq[1, 2] = 2 * (qx * qy + qw * qz), 1 - 2 * (qx * qx + qz * qz), 2 * (qy * qz - qw * qx)
        rq[2, 0], rq[2, 1], rq[2, 2] = 2 * (qx * qz - qw * qy), 2 * (qy * qz + qw * qx), 1 - 2 * (qx * qx + qy * qy)
        for j in range(3):
            s[j] = np.exp(np.float64(log_scales[i, j]))
        for r in range(2):
            for j in range(3):
                t[r, j] = (jw[r, 0] * rq[0, j] + jw[r, 1] * rq[1, j] + jw[r, 2] * rq[2, j]) * s[j]
        q[0], q[1], q[2], q[3] = qw, qx, qy, qz
        return zs, cx, cy, rx == cx, ry == cy, norm

    @numba.njit(cache=True, inline="always")
    def scratch():
        """The per-thread scratch arrays of ``geometry``: p, jw, q, rq, s, t."""
        return np.empty(3), np.empty((2, 3)), np.empty(4), np.empty((3, 3)), np.empty(3), np.empty((2, 3))

    @numba.njit(parallel=True, cache=True)
    def forward(means, log_scales, quats, logits, rot, centre, f, width, height, r0, r1, antialiased, near,
                fov_clamp, low_pass, alpha_min, out):
        """out [N, 10]: u, v, conic a, b, c, opacity, depth, half-widths x, y, drawn (1.0 / 0.0)."""
        lim_x, lim_y = fov_clamp * 0.5 * width / f, fov_clamp * 0.5 * height / f
        n_all = len(means)
        for chunk in numba.prange(CHUNKS):  # scratch arrays allocated once a chunk, not once a Gaussian
            p, jw, q, rq, s, t = scratch()
            for i in range(chunk * n_all // CHUNKS, (chunk + 1) * n_all // CHUNKS):
                zs = geometry(i, means, log_scales, quats, rot, centre, f, lim_x, lim_y, near, p, jw, q, rq, s, t)[0]
                u, v = f * p[0] / zs + 0.5 * width, f * p[1] / zs + 0.5 * height
                c00 = t[0, 0] * t[0, 0] + t[0, 1] * t[0, 1] + t[0, 2] * t[0, 2]
                c01 = t[0, 0] * t[1, 0] + t[0, 1] * t[1, 1] + t[0, 2] * t[1, 2]
                c11 = t[1, 0] * t[1, 0] + t[1, 1] * t[1, 1] + t[1, 2] * t[1, 2]
                a, b, c = c00 + low_pass, c01, c11 + low_pass
                det = a * c - b * b
                out[i, 9] = 0.0
                if not (p[2] > near and det > 0.0 and np.isfinite(det)):
                    continue
                op = 1.0 / (1.0 + np.exp(-np.float64(logits[i])))
                if antialiased:
                    op *= np.sqrt(min(max((c00 * c11 - b * b) / det, 1e-12), 1.0))
                k2 = 2.0 * np.log(max(op / alpha_min, 1.0))
                ex, ey = np.sqrt(k2 * a), np.sqrt(k2 * c)
                out[i, 0], out[i, 1], out[i, 2], out[i, 3], out[i, 4] = u, v, c / det, -b / det, a / det
                out[i, 5], out[i, 6], out[i, 7], out[i, 8] = op, p[2], ex, ey
                if u + ex > 0 and u - ex < width and v + ey > r0 and v - ey < r1:
                    out[i, 9] = 1.0

    @numba.njit(parallel=True, cache=True)
    def backward(idx, means, log_scales, quats, logits, rot, centre, f, width, height, antialiased, near,
                 fov_clamp, low_pass, g_uv, g_conic, g_op, g_means, g_log_scales, g_quats, g_logits):
        """The gradients of the drawn Gaussians idx [G] from those of their uv [G, 2], conic [G, 3] and
        opacity [G] (the chain rule of ``forward`` written out); each Gaussian's rows written once."""
        lim_x, lim_y = fov_clamp * 0.5 * width / f, fov_clamp * 0.5 * height / f
        n_drawn = len(idx)
        for chunk in numba.prange(CHUNKS):
            p, jw, q, rq, s, t = scratch()
            g_t, g_jw, g_m, g_r, g_p = np.empty((2, 3)), np.empty((2, 3)), np.empty((3, 3)), np.empty((3, 3)), \
                np.empty(3)
            for n in range(chunk * n_drawn // CHUNKS, (chunk + 1) * n_drawn // CHUNKS):
                i = idx[n]
                zs, cx, cy, in_x, in_y, norm = geometry(i, means, log_scales, quats, rot, centre, f, lim_x, lim_y, near,
                                                        p, jw, q, rq, s, t)
                c00 = t[0, 0] * t[0, 0] + t[0, 1] * t[0, 1] + t[0, 2] * t[0, 2]
                c01 = t[0, 0] * t[1, 0] + t[0, 1] * t[1, 1] + t[0, 2] * t[1, 2]
                c11 = t[1, 0] * t[1, 0] + t[1, 1] * t[1, 1] + t[1, 2] * t[1, 2]
                a, b, c = c00 + low_pass, c01, c11 + low_pass
                det = a * c - b * b
                inv, inv2 = 1.0 / det, 1.0 / (det * det)
                sig = 1.0 / (1.0 + np.exp(-np.float64(logits[i])))
                go = np.float64(g_op[n])
                g_sig, g_comp, comp, ratio, raw = go, 0.0, 1.0, 1.0, c00 * c11 - b * b
                if antialiased:
                    ratio = raw / det
                    comp = np.sqrt(min(max(ratio, 1e-12), 1.0))
                    g_sig, g_comp = go * comp, go * sig
                g_logits[i] = g_sig * sig * (1.0 - sig)
                ga_, gb_, gc_ = np.float64(g_conic[n, 0]), np.float64(g_conic[n, 1]), np.float64(g_conic[n, 2])
                ga = ga_ * (-c * c * inv2) + gb_ * (b * c * inv2) + gc_ * (inv - a * c * inv2)
                gb = ga_ * (2.0 * b * c * inv2) + gb_ * (-inv - 2.0 * b * b * inv2) + gc_ * (2.0 * a * b * inv2)
                gc = ga_ * (inv - a * c * inv2) + gb_ * (a * b * inv2) + gc_ * (-a * a * inv2)
                if antialiased and 1e-12 <= ratio <= 1.0:  # the mip filter's factor sqrt(raw / det)
                    g_ratio = g_comp * 0.5 / comp
                    ga += g_ratio * (c11 * inv - raw * c * inv2)
                    gb += g_ratio * (-2.0 * b * inv + raw * 2.0 * b * inv2)
                    gc += g_ratio * (c00 * inv - raw * a * inv2)
                # cov = T T^T: d c00 = 2 T0, d c01 = (T1, T0), d c11 = 2 T1
                for j in range(3):
                    g_t[0, j] = 2.0 * ga * t[0, j] + gb * t[1, j]
                    g_t[1, j] = 2.0 * gc * t[1, j] + gb * t[0, j]
                g_jw[:] = 0.0  # T = JW M, M = Rq diag(s)
                g_m[:] = 0.0
                for k in range(3):
                    for j in range(3):
                        m_kj = rq[k, j] * s[j]
                        for r in range(2):
                            g_jw[r, k] += g_t[r, j] * m_kj
                            g_m[k, j] += jw[r, k] * g_t[r, j]
                g_j00 = g_jw[0, 0] * rot[0, 0] + g_jw[0, 1] * rot[0, 1] + g_jw[0, 2] * rot[0, 2]
                g_j02 = g_jw[0, 0] * rot[2, 0] + g_jw[0, 1] * rot[2, 1] + g_jw[0, 2] * rot[2, 2]
                g_j11 = g_jw[1, 0] * rot[1, 0] + g_jw[1, 1] * rot[1, 1] + g_jw[1, 2] * rot[1, 2]
                g_j12 = g_jw[1, 0] * rot[2, 0] + g_jw[1, 1] * rot[2, 1] + g_jw[1, 2] * rot[2, 2]
                tx, ty = cx * zs, cy * zs
                z2, z3 = zs * zs, zs * zs * zs
                g_z = -(g_j00 + g_j11) * f / z2 + g_j02 * 2.0 * f * tx / z3 + g_j12 * 2.0 * f * ty / z3
                g_tx, g_ty = -g_j02 * f / z2, -g_j12 * f / z2
                g_p[:] = 0.0
                if in_x:  # tx = clamp(x / z) z: x's where unclamped, else the clamp's bound times dz
                    g_p[0] += g_tx
                else:
                    g_z += g_tx * cx
                if in_y:
                    g_p[1] += g_ty
                else:
                    g_z += g_ty * cy
                gu, gv = np.float64(g_uv[n, 0]), np.float64(g_uv[n, 1])
                g_p[0] += gu * f / zs
                g_p[1] += gv * f / zs
                g_z -= (gu * p[0] + gv * p[1]) * f / z2
                g_p[2] += g_z
                for k in range(3):  # p = rot (m - centre)
                    g_means[i, k] = rot[0, k] * g_p[0] + rot[1, k] * g_p[1] + rot[2, k] * g_p[2]
                for j in range(3):
                    acc = 0.0
                    for k in range(3):
                        g_r[k, j] = g_m[k, j] * s[j]
                        acc += g_m[k, j] * rq[k, j]
                    g_log_scales[i, j] = acc * s[j]
                qw, qx, qy, qz = q[0], q[1], q[2], q[3]
                gw = 2.0 * (-qz * g_r[0, 1] + qy * g_r[0, 2] + qz * g_r[1, 0] - qx * g_r[1, 2] - qy * g_r[2, 0]
                            + qx * g_r[2, 1])
                gx = 2.0 * (qy * g_r[0, 1] + qz * g_r[0, 2] + qy * g_r[1, 0] - 2.0 * qx * g_r[1, 1] - qw * g_r[1, 2]
                            + qz * g_r[2, 0] + qw * g_r[2, 1] - 2.0 * qx * g_r[2, 2])
                gy = 2.0 * (-2.0 * qy * g_r[0, 0] + qx * g_r[0, 1] + qw * g_r[0, 2] + qx * g_r[1, 0] + qz * g_r[1, 2]
                            - qw * g_r[2, 0] + qz * g_r[2, 1] - 2.0 * qy * g_r[2, 2])
                gz = 2.0 * (-2.0 * qz * g_r[0, 0] - qw * g_r[0, 1] + qx * g_r[0, 2] + qw * g_r[1, 0]
                            - 2.0 * qz * g_r[1, 1] + qy * g_r[1, 2] + qx * g_r[2, 0] + qy * g_r[2, 1])
                dot = qw * gw + qx * gx + qy * gy + qz * gz  # through the normalisation q / |q|
                g_quats[i, 0], g_quats[i, 1] = (gw - qw * dot) / norm, (gx - qx * dot) / norm
                g_quats[i, 2], g_quats[i, 3] = (gy - qy * dot) / norm, (gz - qz * dot) / norm

    _KERNELS = (forward, backward)
    return _KERNELS


def _np(t: Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().float().numpy())


class _Project(torch.autograd.Function):
    """The compiled projection (module docstring); depth, extent and the drawn indices get no gradient."""

    @staticmethod
    def forward(ctx, means, log_scales, quats, logits, rot, centre, f, width, height, rows, antialiased, consts):
        near, fov_clamp, low_pass, alpha_min = consts
        arrays = (_np(means), _np(log_scales), _np(quats), _np(logits))
        out = np.empty((len(means), 10), np.float32)
        _kernels()[0](*arrays, rot, centre, f, width, height, rows[0], rows[1], antialiased, near, fov_clamp, low_pass,
                      alpha_min, out)
        idx = np.nonzero(out[:, 9] > 0)[0]
        idx = idx[np.argsort(out[idx, 6])]  # front to back
        drawn = out[idx]
        ctx.state = (idx, arrays, rot, centre, f, width, height, antialiased, near, fov_clamp, low_pass)
        uv, conic, opacity = (torch.from_numpy(np.ascontiguousarray(drawn[:, k]))
                              for k in (slice(0, 2), slice(2, 5), 5))
        depth, extent = torch.from_numpy(np.ascontiguousarray(drawn[:, 6])), torch.from_numpy(drawn[:, 7:9].copy())
        index = torch.from_numpy(idx.astype(np.int64))
        ctx.mark_non_differentiable(depth, extent, index)
        return uv, conic, opacity, depth, extent, index

    @staticmethod
    def backward(ctx, g_uv, g_conic, g_op, _g_depth, _g_extent, _g_index):
        idx, arrays, rot, centre, f, width, height, antialiased, near, fov_clamp, low_pass = ctx.state
        n = len(arrays[0])
        grads = (np.zeros((n, 3), np.float32), np.zeros((n, 3), np.float32), np.zeros((n, 4), np.float32),
                 np.zeros(n, np.float32))
        _kernels()[1](idx, *arrays, rot, centre, f, width, height, antialiased, near, fov_clamp, low_pass, _np(g_uv),
                      _np(g_conic), _np(g_op), *grads)
        return (*(torch.from_numpy(g) for g in grads), None, None, None, None, None, None, None, None)


def project_drawn(splats, camera: Pinhole, rows: tuple[int, int], consts: tuple[float, float, float, float]
                  ) -> dict[str, Tensor]:
    """The Gaussians that rows [r0, r1) of ``camera`` draw, projected and in depth order (CPU tensors).

    Args:
        splats: Splats (CPU float32), differentiable in means, log_scales, quats and opacity_logits
        consts: (NEAR, FOV_CLAMP, LOW_PASS, ALPHA_MIN) of ``enerf.splats.rasterize``
    Returns:
        dict: uv [G, 2], conic [G, 3], opacity [G] (times the mip filter's factor where ``splats.antialiased``),
        depth [G] (camera z), extent [G, 2] (the box's half-widths), index [G] long (into the N Gaussians)
    """
    rot, centre = world_to_cv_camera(camera.pose(splats.means))
    rot = np.ascontiguousarray(rot.detach().double().numpy())
    centre = np.ascontiguousarray(centre.detach().double().numpy())
    uv, conic, opacity, depth, extent, index = _Project.apply(
        splats.means, splats.log_scales, splats.quats, splats.opacity_logits, rot, centre, float(camera.focal),
        int(camera.width), int(camera.height), (int(rows[0]), int(rows[1])), bool(splats.antialiased),
        tuple(float(c) for c in consts))
    return {"uv": uv, "conic": conic, "opacity": opacity, "depth": depth, "extent": extent, "index": index}
