"""Splats in the 3DGS PLY layout: written exactly as the reference implementation writes it
(graphdeco-inria gaussian-splatting, ``GaussianModel.save_ply``), read from any tool that writes it.

The file: ``format binary_little_endian 1.0``, one element ``vertex`` (one per Gaussian) of float
(``f4``) properties, in this order::

    x y z  nx ny nz  f_dc_0 f_dc_1 f_dc_2  f_rest_0 .. f_rest_{3(K-1)-1}  opacity  scale_0..2  rot_0..3

* ``nx ny nz`` are 0 (the reference writes zeros);
* ``f_dc_*`` the band-0 SH coefficient per colour channel; ``f_rest_*`` the other ``K - 1`` coefficients
  (K = (degree + 1)², 1/4/9/16), channel-major: all of red's, then green's, then blue's;
* ``opacity`` the logit of the peak opacity, ``scale_*`` the log standard deviations, ``rot_*`` the
  quaternion w, x, y, z (not necessarily unit).

enerf adds one header line, ``comment enerf frame NAME`` (``world``: the capture's own frame,
``scene``: the normalised one; ``enerf.splats.frames``), and ``comment enerf antialiased`` for splats fitted
with the 2D mip filter (``Splats.antialiased``); comments are legal PLY, every reader skips them.

Reading takes any 3DGS PLY (ascii or binary of either byte order, any property types, extra
properties ignored); the number of ``f_rest_*`` properties decides the SH degree. A file that is
not a PLY, or lacks a property the layout needs, is one ``DataError`` line naming the file and what
is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from ..atomic import atomic_write_bytes
from ..errors import DataError
from .gaussians import Splats

__all__ = ["property_names", "write_splats", "read_splats", "FRAME_COMMENT"]

FRAME_COMMENT = "enerf frame"  # the header comment "enerf frame NAME" names the frame the file is in
ANTIALIASED_COMMENT = "enerf antialiased"  # this header comment: fitted with the 2D mip filter (Splats.antialiased)
_PLY_TYPES = {"char": "i1", "int8": "i1", "uchar": "u1", "uint8": "u1", "short": "i2", "int16": "i2",
              "ushort": "u2", "uint16": "u2", "int": "i4", "int32": "i4", "uint": "u4", "uint32": "u4",
              "float": "f4", "float32": "f4", "double": "f8", "float64": "f8"}
_FORMATS = {"binary_little_endian": "<", "binary_big_endian": ">", "ascii": None}
_REST_COUNTS = {0: 0, 9: 1, 24: 2, 45: 3}  # f_rest properties -> SH degree
_REQUIRED = ["x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity", "scale_0", "scale_1", "scale_2",
             "rot_0", "rot_1", "rot_2", "rot_3"]


def property_names(degree: int) -> list[str]:
    """The vertex properties of a 3DGS PLY of SH ``degree`` (0..3), in the reference's order."""
    n_rest = 3 * ((degree + 1) ** 2 - 1)
    return (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
            + [f"f_rest_{i}" for i in range(n_rest)]
            + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])


def _columns(splats: Splats) -> np.ndarray:
    """[N, P] float32 in ``property_names`` order."""
    t = {name: value.detach().to("cpu", torch.float32).numpy() for name, value in splats.tensors().items()}
    n = len(splats)
    rest = t["sh"][:, 1:, :].transpose(0, 2, 1).reshape(n, -1)  # [N, 3 (K - 1)]: channel-major
    return np.concatenate([t["means"], np.zeros((n, 3), np.float32), t["sh"][:, 0, :], rest,
                           t["opacity_logits"][:, None], t["log_scales"], t["quats"]], axis=1)


def write_splats(path: str | Path, splats: Splats, frame_name: str) -> int:
    """Write ``splats`` as a 3DGS PLY (module docstring) at ``path``, atomically; returns its size in bytes.

    Args:
        frame_name: the frame the splats are in (``world`` / ``scene``), recorded as the header
            comment ``enerf frame NAME``.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", frame_name):
        raise ValueError(f"frame name {frame_name!r} must be one word")
    names = property_names(splats.degree)
    flags = [f"comment {ANTIALIASED_COMMENT}"] if splats.antialiased else []
    header = "\n".join(["ply", "format binary_little_endian 1.0", f"comment {FRAME_COMMENT} {frame_name}", *flags,
                        f"element vertex {len(splats)}", *[f"property float {name}" for name in names],
                        "end_header"]) + "\n"
    data = header.encode("ascii") + np.ascontiguousarray(_columns(splats), "<f4").tobytes()
    atomic_write_bytes(Path(path), data)
    return len(data)


class _Header:
    """What a PLY header says: format, comments, elements [(name, count, [(property, dtype or None for a list)])]."""

    def __init__(self, path: Path, lines: list[str]) -> None:
        self.fmt: str | None = None
        self.comments: list[str] = []
        self.elements: list[tuple[str, int, list[tuple[str, str | None]]]] = []
        for line in lines[1:]:
            words = line.split()
            if not words or words[0] in ("obj_info",):
                continue
            if words[0] == "comment":
                self.comments.append(line.strip()[len("comment"):].strip())
            elif words[0] == "format" and len(words) >= 2 and words[1] in _FORMATS:
                self.fmt = words[1]
            elif words[0] == "element" and len(words) == 3 and words[2].isdigit():
                self.elements.append((words[1], int(words[2]), []))
            elif words[0] == "property" and self.elements and len(words) == 3 and words[1] in _PLY_TYPES:
                self.elements[-1][2].append((words[2], _PLY_TYPES[words[1]]))
            elif words[0] == "property" and self.elements and len(words) == 5 and words[1] == "list":
                self.elements[-1][2].append((words[4], None))
            else:
                raise DataError(f"{path}: not a readable PLY header (line {line.strip()[:60]!r})")
        if self.fmt is None:
            raise DataError(f"{path}: not a readable PLY header (no format line)")

    def frame(self) -> str | None:
        for comment in self.comments:
            words = comment.split()
            if len(words) == 3 and " ".join(words[:2]) == FRAME_COMMENT:
                return words[2]
        return None


def _split_header(path: Path, raw: bytes) -> tuple[list[str], int]:
    """(header lines, offset of the body)."""
    if not raw.startswith(b"ply"):
        raise DataError(f"{path}: not a PLY file (it does not start with 'ply'); give a 3DGS splat .ply")
    match = re.search(rb"(\r?\n)end_header\r?\n", raw[:1 << 20])
    if match is None:
        raise DataError(f"{path}: not a readable PLY file (no end_header line)")
    try:
        lines = raw[:match.start()].decode("ascii").splitlines()
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a readable PLY file (its header is not text)") from None
    return lines, match.end()


def _vertex_table(path: Path, raw: bytes, header: _Header, body: int) -> np.ndarray:
    """The ``vertex`` element as a structured array (fields: its properties)."""
    names = [name for name, _, _ in header.elements]
    if "vertex" not in names:
        raise DataError(f"{path}: not a 3DGS splat PLY (no 'vertex' element)")
    _, count, props = header.elements[names.index("vertex")]
    if any(kind is None for _, kind in props):
        raise DataError(f"{path}: not a 3DGS splat PLY (its vertex element has list properties)")
    before = header.elements[:names.index("vertex")]
    if header.fmt == "ascii":
        lines = raw[body:].decode("ascii", errors="replace").splitlines()
        skip = sum(n for _, n, _ in before)
        rows = [line.split() for line in lines[skip:skip + count]]
        if len(rows) < count or any(len(r) != len(props) for r in rows):
            raise DataError(f"{path}: the vertex element is truncated or malformed ({count} rows of {len(props)} "
                            "values expected)")
        try:
            values = np.array(rows, np.float64).reshape(count, len(props))
        except ValueError:
            raise DataError(f"{path}: the vertex element holds values that are not numbers") from None
        table = np.empty(count, [(name, "f8") for name, _ in props])
        for k, (name, _) in enumerate(props):
            table[name] = values[:, k]
        return table
    order = _FORMATS[header.fmt]
    offset = body
    for name, n, element_props in before:
        if any(kind is None for _, kind in element_props):
            raise DataError(f"{path}: element {name!r} before the vertices has list properties; not a 3DGS splat PLY")
        offset += n * np.dtype([(p, order + kind) for p, kind in element_props]).itemsize
    dtype = np.dtype([(name, order + kind) for name, kind in props])
    if len(raw) < offset + count * dtype.itemsize:
        raise DataError(f"{path}: truncated ({len(raw)} bytes; the header announces {count} vertices of "
                        f"{dtype.itemsize} bytes)")
    return np.frombuffer(raw, dtype, count, offset)


def read_splats(path: str | Path) -> tuple[Splats, str | None]:
    """Read a 3DGS PLY (module docstring).

    Returns:
        (Splats on the CPU (float32), the frame its ``comment enerf frame NAME`` names, or None
        when it names none: a file from another tool)
    Raises:
        DataError: one line naming ``path``: missing, not a PLY, no ``vertex`` element, missing
            properties (named), an ``f_rest`` count that is no SH degree, or truncated.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: splat file not found" if not path.exists() else f"{path} is not a file")
    raw = path.read_bytes()
    lines, body = _split_header(path, raw)
    header = _Header(path, lines)
    table = _vertex_table(path, raw, header, body)
    present = set(table.dtype.names)
    missing = [name for name in _REQUIRED if name not in present]
    if missing:
        raise DataError(f"{path}: not a 3DGS splat PLY (the vertex element lacks {' '.join(missing)})")
    rest = sorted(int(m.group(1)) for m in (re.fullmatch(r"f_rest_(\d+)", n) for n in present) if m)
    if rest != list(range(len(rest))) or len(rest) not in _REST_COUNTS:
        raise DataError(f"{path}: {len(rest)} f_rest properties (f_rest_0 .. f_rest_{len(rest) - 1} expected, "
                        "0, 9, 24 or 45 of them: SH degree 0..3)")

    def column(*names: str) -> torch.Tensor:
        return torch.from_numpy(np.stack([np.asarray(table[n], np.float32) for n in names], -1))

    n, k = len(table), (_REST_COUNTS[len(rest)] + 1) ** 2
    dc = column("f_dc_0", "f_dc_1", "f_dc_2")[:, None, :]
    f_rest = column(*[f"f_rest_{i}" for i in rest]) if rest else torch.zeros(n, 0)
    sh = torch.cat([dc, f_rest.reshape(n, 3, k - 1).transpose(1, 2)], 1).contiguous()
    splats = Splats(column("x", "y", "z"), column("scale_0", "scale_1", "scale_2"),
                    column("rot_0", "rot_1", "rot_2", "rot_3"), column("opacity")[:, 0].contiguous(), sh,
                    antialiased=ANTIALIASED_COMMENT in header.comments)
    return splats, header.frame()
