"""An SPZ reader written from Niantic's specification with gzip / struct / numpy alone (not enerf's
reader), for the tests that check what enerf writes."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

__all__ = ["read_spz_file", "read_spz_means"]

# Niantic's RDF <-> RUB (flip y and z): the sign of each SH coefficient past band 0 (load-spz.cc's
# convertCoordinates: band 1 ~ y, z, x; band 2 ~ xy, yz, 1, xz, 1; band 3 ~ y, xyz, y, z, x, z, x)
_SH_FLIP = np.array([-1, -1, 1, -1, 1, 1, -1, 1, -1, 1, -1, -1, 1, -1, 1], np.float64)
_FLIP = np.array([1.0, -1.0, -1.0])


def read_spz_file(raw: bytes) -> dict:
    """The SPZ spec, read with numpy: header fields and every attribute, turned from RUB into RDF."""
    data = gzip.decompress(raw)
    magic, version, n, degree, bits, flags, _ = struct.unpack_from("<IIIBBBB", data)
    k = (degree + 1) ** 2 - 1
    off = 16

    def take(count: int) -> np.ndarray:
        nonlocal off
        out = np.frombuffer(data, np.uint8, n * count, off).reshape(n, count).astype(np.int64)
        off += n * count
        return out

    pos = take(9).reshape(n, 3, 3)
    fixed = pos[..., 0] + pos[..., 1] * 256 + pos[..., 2] * 65536
    means = np.where(fixed >= 2**23, fixed - 2**24, fixed) / 2.0**bits
    alpha, color, scale = take(1)[:, 0] / 255.0, take(3), take(3)
    rot = take(4 if version == 3 else 3)
    sh = (take(3 * k).reshape(n, k, 3) - 128.0) / 128.0
    assert off == len(data)
    quats = np.zeros((n, 4))  # x y z w
    for row in range(n):
        comp = int(rot[row, 0] | rot[row, 1] << 8 | rot[row, 2] << 16 | rot[row, 3] << 24)
        largest = comp >> 30
        for i in (3, 2, 1, 0):
            if i != largest:
                quats[row, i] = np.sqrt(0.5) * (comp & 511) / 511 * (-1 if comp >> 9 & 1 else 1)
                comp >>= 10
        quats[row, largest] = np.sqrt(max(0.0, 1 - (quats[row] ** 2).sum()))
    quats = quats * np.array([1, -1, -1, 1])  # RUB -> RDF (Niantic: x, y, z of the quaternion times flipQ)
    return {"magic": magic, "version": version, "n": n, "degree": degree, "bits": bits, "flags": flags,
            "means": means * _FLIP,
            "alpha": alpha, "dc": (color / 255.0 - 0.5) / 0.15, "log_scales": scale / 16.0 - 10.0,
            "quats_wxyz": quats[:, [3, 0, 1, 2]], "sh": sh * _SH_FLIP[:k, None]}



def read_spz_means(path: Path) -> np.ndarray:
    """[N, 3] the centres of the SPZ file ``path``, in the PLY's axes."""
    return read_spz_file(Path(path).read_bytes())["means"]
