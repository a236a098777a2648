"""The splats as the page embeds them: quantised, in Morton order, gzip'd (``encode_page_splats``),
and ``decode_page_splats``, the reader ``decode.js`` mirrors in the browser.

Each attribute keeps a few bits, chosen so a screenshot of the page stays within the noise of one
drawn from float32 splats (benchmarks/page_size.py measures it on real captures) while the page is
about a quarter of a float32 one:

    position  the centre c (median) and radius r (90th percentile of the distances to c) normalise
              x = (mean - c) / r; y = sign(x) log(1 + |x|) (a grid as fine as x's near c, coarser
              far out, where splats are larger) is quantised on one step for all three axes from
              each axis's minimum: ``POSITION_STEP`` of the smaller splats' size (the 25th
              percentile of each splat's largest standard deviation) over r, or coarser where the
              longest axis would need more than 16 bits. The splats are sorted by the Morton code
              of the three B-bit integers (B: the longest axis's bits; axis a's bit k at bit
              3 k + a), and the code is stored as the difference from the previous splat's (the
              first from 0).
    scale     the three log scales, each on one grid between the smallest and the largest log scale,
              with the fewest bits (5..8) that keep its step under ``SCALE_STEP``
    rotation  "smallest three" of the unit quaternion (w, x, y, z) made positive at its largest
              component: that component's index, and the other three as (q / sqrt(1/2) + 1) / 2 on
              ``ROTATION_BITS`` bits; the largest is sqrt(1 - the others' squares) on reading
    colour    band-0 colour clip(SH_C0 f_dc + 0.5, 0, 1) on ``COLOR_BITS`` bits, sigmoid(opacity)
              on ``ALPHA_BITS`` bits
    band 1    (SH degree 1) one index a splat into a codebook of ``SH1_CODES`` entries (k-means of
              the 9 coefficients, seeded), its entries as int8 times sh1_scale / 127

After gzip (level 9) the data is a uint8 array of planes, each N long (N = count), in this order:
``code`` (ceil(3 B / 8) planes, the little-endian bytes of each difference), ``scales`` (3),
``rotation`` (4: the index, then the three in w, x, y, z order without the largest), ``rgba`` (4,
the levels), then ``sh1`` (1) and ``sh1_codebook`` (int8 [codes, 9], 3 k + ch within an entry) when
the page has band 1. The header (``encode_page_splats``) gives each plane group's offset.
Read back, the splats are in the page's drawing order: largest opacity * volume first.
"""

from __future__ import annotations

import gzip

import numpy as np
import torch

from .gaussians import Splats
from .spz import small_splat_size

__all__ = ["POSITION_STEP", "SCALE_STEP", "ROTATION_BITS", "COLOR_BITS", "ALPHA_BITS", "SH1_CODES",
           "encode_page_splats", "decode_page_splats"]

POSITION_STEP = 1.0 / 8.0  # the centres' grid step near the middle, in units of the smaller splats' size
SCALE_STEP = 0.25  # largest grid step of a log scale (a factor of 1.28)
ROTATION_BITS = 5
COLOR_BITS = 5
ALPHA_BITS = 6
SH1_CODES = 64
_SQRT1_2 = float(np.sqrt(0.5))


def _bits_for(span: float, step: float, low: int, high: int) -> int:
    """The fewest bits in [low, high] whose grid over ``span`` has a step under ``step``."""
    need = int(np.ceil(np.log2(max(span / step, 1.0) + 1.0)))
    return int(np.clip(need, low, high))


def _levels(x: np.ndarray, lo, hi, bits: int) -> np.ndarray:
    top = 2 ** bits - 1
    span = np.maximum(np.asarray(hi, np.float64) - lo, 1e-30)
    return np.clip(np.round((x - lo) / span * top), 0, top).astype(np.int64)


def _values(q: np.ndarray, lo, hi, bits: int) -> np.ndarray:
    return lo + q / (2 ** bits - 1) * (np.asarray(hi, np.float64) - lo)


def _interleave(q: np.ndarray, bits: int) -> np.ndarray:
    """[N, 3] B-bit integers -> [N] uint64 Morton codes (axis a's bit k at bit 3 k + a)."""
    code = np.zeros(len(q), np.uint64)
    for k in range(bits):
        for a in range(3):
            code |= ((q[:, a].astype(np.uint64) >> np.uint64(k)) & np.uint64(1)) << np.uint64(3 * k + a)
    return code


def _deinterleave(code: np.ndarray, bits: int) -> np.ndarray:
    q = np.zeros((len(code), 3), np.int64)
    for k in range(bits):
        for a in range(3):
            q[:, a] |= ((code >> np.uint64(3 * k + a)) & np.uint64(1)).astype(np.int64) << k
    return q


def _kmeans(x: np.ndarray, k: int, iters: int = 12, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means of [N, D] rows (seeded): (centres [k', D], index [N]), k' = min(k, N)."""
    pts = torch.as_tensor(x, dtype=torch.float32)
    k = min(k, len(pts))
    centres = pts[torch.randperm(len(pts), generator=torch.Generator().manual_seed(seed))[:k]].clone()
    for _ in range(iters + 1):
        d = (pts * pts).sum(1, keepdim=True) - 2 * pts @ centres.T + (centres * centres).sum(1)[None]
        index = d.argmin(1)
        if _ == iters:
            break
        sums = torch.zeros_like(centres).index_add_(0, index, pts)
        n = torch.bincount(index, minlength=k).float()[:, None]
        centres = torch.where(n > 0, sums / n.clamp_min(1.0), centres)
    return centres.numpy().astype(np.float64), index.numpy()


def encode_page_splats(splats: Splats, sh_degree: int) -> tuple[bytes, dict]:
    """The page's gzip'd data and its header (layout: the module docstring).

    Args:
        splats: N >= 1 Gaussians (any order)
        sh_degree: 0, or 1 to carry band 1 (when the splats have it)
    Returns:
        (data, header): header has count, sh_degree, position {centre, radius, lo, step, bits}, scale
        {lo, hi, bits}, rotation_bits, color_bits, alpha_bits, sh1_scale, sh1_codes, sections
        {name: [offset, bytes]} in the unzipped data
    """
    s = splats.map(lambda t: t.detach().to("cpu", torch.float64))
    n = len(s)
    means = s.means.numpy()
    centre = np.median(means, 0)
    radius = float(np.percentile(np.linalg.norm(means - centre, axis=1), 90))
    radius = radius if radius > 0 else 1.0
    x = (means - centre) / radius
    x = np.sign(x) * np.log1p(np.abs(x))
    lo, span = x.min(0), float((x.max(0) - x.min(0)).max())
    size = small_splat_size(s.log_scales.numpy())
    step = max(POSITION_STEP * size / radius, span / (2**16 - 1), 1e-12)
    levels = np.round((x - lo) / step).astype(np.int64)
    bits = max(int(levels.max()).bit_length(), 1)
    code = _interleave(levels, bits)
    order = np.argsort(code, kind="stable")
    s, code = s.select(torch.as_tensor(order)), code[order]
    diff = np.diff(code, prepend=np.uint64(0))
    planes = {"code": diff.view(np.uint8).reshape(n, 8)[:, :(3 * bits + 7) // 8].T}

    log_scales = s.log_scales.numpy()
    s_lo, s_hi = float(log_scales.min()), float(log_scales.max())
    s_bits = _bits_for(s_hi - s_lo, SCALE_STEP, 5, 8)
    planes["scales"] = _levels(log_scales, s_lo, s_hi, s_bits).T

    q = s.quats.numpy()
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30)
    largest = np.abs(q).argmax(1)
    q = q * np.where(q[np.arange(n), largest] < 0, -1.0, 1.0)[:, None]
    keep = np.ones((n, 4), bool)
    keep[np.arange(n), largest] = False
    rest = _levels(q[keep].reshape(n, 3) / _SQRT1_2, -1.0, 1.0, ROTATION_BITS)
    planes["rotation"] = np.concatenate([largest[None], rest.T])

    rgb = s.base_rgb().numpy()
    alpha = 1.0 / (1.0 + np.exp(-s.opacity_logits.numpy()))
    planes["rgba"] = np.concatenate([_levels(rgb, 0.0, 1.0, COLOR_BITS).T, _levels(alpha, 0.0, 1.0, ALPHA_BITS)[None]])

    degree = min(sh_degree, s.degree, 1)
    sh1_scale, codes = 0.0, 0
    if degree == 1:
        band = s.sh[:, 1:4].numpy().reshape(n, 9)  # coefficient-major, colour inner
        centres, index = _kmeans(band, SH1_CODES)
        sh1_scale = float(np.abs(centres).max()) or 1.0
        codes = len(centres)
        planes["sh1"] = index[None]
        planes["sh1_codebook"] = np.round(centres / sh1_scale * 127).astype(np.int8).view(np.uint8).reshape(1, -1)
    raw, sections = bytearray(), {}
    for name, plane in planes.items():
        blob = np.ascontiguousarray(plane, dtype=np.uint8).tobytes()
        sections[name] = [len(raw), len(blob)]
        raw += blob
    header = {"version": 2, "count": n, "sh_degree": degree, "antialiased": splats.antialiased,
              "position": {"centre": centre.tolist(), "radius": radius, "lo": lo.tolist(), "step": step, "bits": bits},
              "scale": {"lo": s_lo, "hi": s_hi, "bits": s_bits}, "rotation_bits": ROTATION_BITS,
              "color_bits": COLOR_BITS, "alpha_bits": ALPHA_BITS, "sh1_scale": sh1_scale, "sh1_codes": codes,
              "sections": sections}
    return gzip.compress(bytes(raw), 9, mtime=0), header


def decode_page_splats(data: bytes, header: dict) -> dict[str, np.ndarray]:
    """Read ``encode_page_splats``'s data back, in the page's drawing order (largest opacity * volume
    first, ties in stored order), as ``decode.js`` does.

    Returns:
        means [N, 3], log_scales [N, 3], quats [N, 4] (w, x, y, z, unit), rgb [N, 3] and alpha [N] in
        [0, 1], sh1 [N, 3, 3] (band 1, when the header has it), all float64
    """
    raw = np.frombuffer(gzip.decompress(data), np.uint8)
    n = header["count"]

    def plane(name: str) -> np.ndarray:
        offset, size = header["sections"][name]
        return raw[offset:offset + size].reshape(-1, n) if name != "sh1_codebook" else raw[offset:offset + size]

    pos = header["position"]
    bits = pos["bits"]
    diff = np.zeros(n, np.uint64)
    for b, row in enumerate(plane("code")):
        diff |= row.astype(np.uint64) << np.uint64(8 * b)
    x = np.array(pos["lo"]) + _deinterleave(np.cumsum(diff, dtype=np.uint64), bits) * pos["step"]
    means = np.array(pos["centre"]) + pos["radius"] * np.sign(x) * np.expm1(np.abs(x))
    sc = header["scale"]
    log_scales = _values(plane("scales").T.astype(np.float64), sc["lo"], sc["hi"], sc["bits"])
    rot = plane("rotation")
    rest = _values(rot[1:].T.astype(np.float64), -1.0, 1.0, header["rotation_bits"]) * _SQRT1_2
    quats = np.zeros((n, 4))
    keep = np.ones((n, 4), bool)
    keep[np.arange(n), rot[0].astype(np.int64)] = False
    quats[keep] = rest.ravel()
    quats[~keep] = np.sqrt(np.clip(1.0 - (rest ** 2).sum(1), 0.0, 1.0))
    rgba = plane("rgba").T.astype(np.float64)
    out = {"means": means, "log_scales": log_scales, "quats": quats,
           "rgb": rgba[:, :3] / (2 ** header["color_bits"] - 1), "alpha": rgba[:, 3] / (2 ** header["alpha_bits"] - 1)}
    if header["sh_degree"] == 1:
        book = plane("sh1_codebook").view(np.int8).reshape(-1, 9).astype(np.float64) * header["sh1_scale"] / 127
        out["sh1"] = book[plane("sh1")[0]].reshape(n, 3, 3)
    importance = out["alpha"] * np.exp(log_scales.sum(1))
    order = np.argsort(-importance, kind="stable")
    return {k: v[order] for k, v in out.items()}
