"""Splats in Niantic's SPZ layout (nianticlabs/spz ``load-spz.cc``, versions 2 and 3; written as 3):
a gzip stream of a 16-byte header and the splats' attributes, quantised, one attribute after the other.

The header, little-endian: ``uint32 magic`` 0x5053474e ("NGSP"), ``uint32 version``, ``uint32
numPoints``, ``uint8 shDegree``, ``uint8 fractionalBits``, ``uint8 flags`` (1: antialiased:
``Splats.antialiased``), ``uint8 reserved``. Then, for N splats and K = (degree + 1)² - 1 SH coefficients besides
band 0:

    positions  [N, 3, 3] uint8  24-bit signed fixed point (little-endian), x * 2**fractionalBits
    alphas     [N]       uint8  sigmoid(opacity) * 255
    colors     [N, 3]    uint8  f_dc * 0.15 * 255 + 127.5 (band 0 of the SH, not the colour)
    scales     [N, 3]    uint8  (log scale + 10) * 16
    rotations  [N, 3]    uint8  version 2: x, y, z of the unit quaternion with w >= 0, (q + 1) * 127.5
               [N, 4]    uint8  version 3: "smallest three": a uint32 of the largest component's index
                                (2 bits) and the other three (sign bit + 9 bits of |q_i| / sqrt(1/2) each)
    sh         [N, K, 3] uint8  coefficient-major, colour inner; x * 128 + 128 rounded to a bucket of
                                4 (band 1: 6 bits, one finer than Niantic's writer) or 16 (bands 2-3: 4 bits)

Every uint8 is rounded and clipped to 0..255; a reader takes any value of a byte, so the buckets are
the writer's choice. ``fractionalBits`` is the fewest that make the positions' step at most
``POSITION_STEP`` of the smaller splats' size (the 25th percentile of each splat's largest standard
deviation), so a centre moves by at most 1/16 of such a splat (Niantic's writer uses 12 whatever the
scene's units), and fewer where the positions would not fit in 24 bits.

**Axes.** SPZ is specified in RUB (x right, y up, z back: OpenGL / three.js), the 3DGS PLY in RDF
(x right, y down, z forward: COLMAP / OpenCV); Niantic's library and PlayCanvas' splat-transform
flip y and z between the two when they convert. enerf reads its own PLY's coordinates as RDF, so an
SPZ written by enerf holds the same splats turned 180 degrees about x (``RDF_TO_RUB``, applied with
``enerf.splats.frames.splats_to_frame``), and ``read_spz`` turns them back: a .spz and a .ply of the
same splats, converted by those tools into one another, agree, and enerf reads both in the same
frame (``world`` by default: SPZ has nowhere to name a frame).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_bytes
from ..errors import DataError
from .frames import splats_to_frame
from .gaussians import Splats, sh_coeffs

__all__ = ["MAGIC", "HEADER", "VERSIONS", "RDF_TO_RUB", "POSITION_STEP", "small_splat_size", "encode_spz", "decode_spz", "write_spz",
           "read_spz"]

MAGIC = 0x5053474E  # "NGSP" little-endian
HEADER = struct.Struct("<IIIBBBB")  # magic, version, numPoints, shDegree, fractionalBits, flags, reserved
ANTIALIASED = 0x1  # the flags bit of splats drawn with the 2D mip filter
VERSIONS = (2, 3)  # read; version 3 is written
COLOR_SCALE = 0.15
POSITION_STEP = 1.0 / 8.0  # the positions' grid step, in units of the 25th percentile of the splats' largest std
SH_BUCKETS = (4, 16)  # band 1 (6 bits), bands 2-3 (4 bits)
RDF_TO_RUB = np.diag([1.0, -1.0, -1.0, 1.0])  # a PLY's axes -> SPZ's (its own inverse)
_SQRT1_2 = float(np.sqrt(0.5))
_MASK9 = (1 << 9) - 1


def _u8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x), 0, 255).astype(np.uint8)


def _pack_quats(q: np.ndarray, version: int) -> np.ndarray:
    """[N, 4] quaternions x, y, z, w (any norm) -> [N, 3] (version 2) or [N, 4] (version 3) uint8."""
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-30)
    if version == 2:
        return _u8(np.where(q[:, 3:] < 0, -q, q)[:, :3] * 127.5 + 127.5)
    largest = np.argmax(np.abs(q), axis=1)
    q = np.where(np.take_along_axis(q, largest[:, None], 1) < 0, -q, q)  # the largest is positive: no sign bit
    comp = largest.astype(np.uint32)
    for i in range(4):
        mag = np.floor(_MASK9 * np.abs(q[:, i]) / _SQRT1_2 + 0.5).astype(np.uint32)
        part = ((q[:, i] < 0).astype(np.uint32) << 9) | np.minimum(mag, _MASK9)
        comp = np.where(largest == i, comp, (comp << 10) | part)
    return comp.astype("<u4").view(np.uint8).reshape(-1, 4)


def _unpack_quats(b: np.ndarray, version: int) -> np.ndarray:
    """``_pack_quats``' bytes -> [N, 4] unit quaternions x, y, z, w."""
    if version == 2:
        xyz = b.astype(np.float64) / 127.5 - 1.0
        return np.concatenate([xyz, np.sqrt(np.maximum(0.0, 1.0 - (xyz * xyz).sum(1, keepdims=True)))], 1)
    comp = np.ascontiguousarray(b).view("<u4")[:, 0].astype(np.int64)
    largest = comp >> 30
    q = np.zeros((len(b), 4))
    for i in (3, 2, 1, 0):
        here = largest != i
        value = _SQRT1_2 * (comp & _MASK9) / _MASK9 * np.where((comp >> 9) & 1, -1.0, 1.0)
        q[:, i] = np.where(here, value, 0.0)
        comp = np.where(here, comp >> 10, comp)
    rest = np.sqrt(np.maximum(0.0, 1.0 - (q * q).sum(1)))
    q[np.arange(len(b)), largest] = rest
    return q


def _sh_buckets(degree: int) -> np.ndarray:
    """[K - 1] the quantisation bucket of each SH coefficient past band 0."""
    return np.array([SH_BUCKETS[0] if k < 4 else SH_BUCKETS[1] for k in range(1, sh_coeffs(degree))])


def small_splat_size(log_scales: np.ndarray) -> float:
    """The smaller splats' size, which the quantised centres' step follows (here and in ``enerf.splats.pagepack``):
    the 25th percentile of each splat's largest standard deviation, for [N, 3] ``log_scales`` (0 for none)."""
    return float(np.percentile(np.exp(log_scales.max(1)), 25)) if len(log_scales) else 0.0


def _fractional_bits(means: np.ndarray, log_scales: np.ndarray, where: str) -> int:
    """The positions' fractional bits (module docstring) for [N, 3] ``means`` and ``log_scales``."""
    top = float(np.abs(means).max(initial=0.0))
    fit = 23 if top == 0 else int(np.floor(np.log2((2**23 - 1) / top)))
    if fit < 0:
        raise DataError(f"{where}: a splat lies {top:.3g} from the origin; SPZ's 24-bit positions reach 8388607")
    size = small_splat_size(log_scales)
    want = int(np.ceil(np.log2(1.0 / (POSITION_STEP * size)))) if size > 0 else fit
    return int(np.clip(want, 0, fit))


def encode_spz(splats: Splats, version: int = 3, where: str = "the splats") -> bytes:
    """The SPZ payload (header and attributes, before gzip; module docstring) of ``splats`` (PLY axes).

    Raises:
        DataError: a position beyond SPZ's 24-bit range (one line naming ``where``).
    """
    s = splats_to_frame(splats.map(lambda t: t.detach().to("cpu", torch.float64)), RDF_TO_RUB)
    t = {name: value.numpy() for name, value in s.tensors().items()}
    n = len(s)
    bits = _fractional_bits(t["means"], t["log_scales"], where)
    fixed = np.round(t["means"] * 2**bits).astype(np.int64).reshape(-1) & 0xFFFFFF
    positions = np.stack([fixed & 0xFF, (fixed >> 8) & 0xFF, fixed >> 16], -1).astype(np.uint8)
    alphas = _u8(255.0 / (1.0 + np.exp(-t["opacity_logits"])))
    colors = _u8(t["sh"][:, 0] * (COLOR_SCALE * 255) + 127.5)
    scales = _u8((t["log_scales"] + 10.0) * 16.0)
    rotations = _pack_quats(t["quats"][:, [1, 2, 3, 0]], version)
    bucket = _sh_buckets(s.degree)[None, :, None]
    q = np.round(t["sh"][:, 1:] * 128.0) + 128.0
    sh = np.clip((q + bucket // 2) // bucket * bucket, 0, 255).astype(np.uint8)
    header = HEADER.pack(MAGIC, version, n, s.degree, bits, ANTIALIASED if splats.antialiased else 0, 0)
    return header + b"".join(a.tobytes() for a in (positions, alphas, colors, scales, rotations, sh))


def decode_spz(raw: bytes, where: str) -> Splats:
    """``encode_spz``'s payload (version 2 or 3) -> Splats on the CPU (float32, PLY axes).

    Raises:
        DataError: one line naming ``where``: no SPZ header, an unknown version, or a size that does not match.
    """
    if len(raw) < HEADER.size:
        raise DataError(f"{where}: truncated SPZ file ({len(raw)} bytes after gunzip; the header alone is 16)")
    magic, version, n, degree, bits, flags, _ = HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise DataError(f"{where}: not an SPZ file (no NGSP magic)")
    if version not in VERSIONS or degree > 3:
        raise DataError(f"{where}: SPZ version {version}, SH degree {degree}; enerf reads versions 2 and 3, degree 0..3")
    k = sh_coeffs(degree) - 1
    sizes = {"positions": 9, "alphas": 1, "colors": 3, "scales": 3, "rotations": 3 if version == 2 else 4, "sh": 3 * k}
    if len(raw) != HEADER.size + n * sum(sizes.values()):
        raise DataError(f"{where}: truncated or corrupt SPZ file ({len(raw)} bytes after gunzip; "
                        f"{HEADER.size + n * sum(sizes.values())} expected for {n} splats)")
    parts, offset = {}, HEADER.size
    for name, size in sizes.items():
        parts[name] = np.frombuffer(raw, np.uint8, n * size, offset).reshape(n, size)
        offset += n * size
    p = parts["positions"].reshape(n, 3, 3).astype(np.int64)
    fixed = p[..., 0] | (p[..., 1] << 8) | (p[..., 2] << 16)
    means = np.where(fixed & 0x800000, fixed - (1 << 24), fixed) / 2.0**bits
    alpha = np.clip(parts["alphas"][:, 0] / 255.0, 0.5 / 255, 1.0 - 0.5 / 255)  # 0 and 255 stay finite
    dc = (parts["colors"] / 255.0 - 0.5) / COLOR_SCALE
    rest = (parts["sh"].reshape(n, k, 3).astype(np.float64) - 128.0) / 128.0
    quats = _unpack_quats(parts["rotations"], version)[:, [3, 0, 1, 2]]

    def tensor(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(x, np.float64))

    splats = Splats(tensor(means), tensor(parts["scales"] / 16.0 - 10.0), tensor(quats),
                    tensor(np.log(alpha / (1.0 - alpha))), tensor(np.concatenate([dc[:, None], rest], 1)),
                    antialiased=bool(flags & ANTIALIASED))
    return splats_to_frame(splats, RDF_TO_RUB).map(lambda t: t.float())


def write_spz(path: str | Path, splats: Splats, frame_name: str = "world") -> int:
    """Write ``splats`` as a gzip'd SPZ (version 3) at ``path``, atomically; returns its size in bytes.
    ``frame_name`` is not recorded (SPZ has no place for it; ``enerf.splats.files`` refuses others than world)."""
    data = gzip.compress(encode_spz(splats, 3, str(path)), compresslevel=9, mtime=0)
    atomic_write_bytes(Path(path), data)
    return len(data)


def read_spz(path: str | Path) -> tuple[Splats, None]:
    """Read a gzip'd SPZ file (version 2 or 3): (Splats on the CPU, float32, in the PLY's axes; None: no frame).

    Raises:
        DataError: one line naming ``path``: not gzip, a truncated or corrupt stream, or ``decode_spz``'s.
    """
    path = Path(path)
    raw = path.read_bytes()
    if raw[:4] == MAGIC.to_bytes(4, "little"):
        raise DataError(f"{path}: an SPZ file of version 4 or later (not gzip'd); enerf reads versions 2 and 3")
    if raw[:2] != b"\x1f\x8b":
        raise DataError(f"{path}: not an SPZ file (not gzip'd)")
    try:
        payload = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataError(f"{path}: truncated or corrupt SPZ file ({exc})") from None
    return decode_spz(payload, str(path)), None
