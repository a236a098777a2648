"""UV atlases (xatlas) and textures baked from a field: ``enerf mesh --texture``.

``unwrap`` lays the faces out in the unit square: xatlas's charts (the ``mesh`` extra), or
``unwrap_pairs``: every two faces share one square cell of the atlas, each a right triangle in its
own half (nerfstudio's "custom" unwrap). xatlas's charting time grows faster than quadratically
with the number of charts, and a marching-cubes mesh of a capture's density has many small ones
(``studies/texture_probe.py``; benchmarks/README.md, "Textured meshes"), so ``--unwrap auto`` takes xatlas up to
``XATLAS_MAX_FACES`` faces and face pairs above;
``texel_samples`` rasterises every triangle's UV footprint (pixel centres inside it, with
their barycentric coordinates); ``bake_texture`` queries a colour function at the interpolated 3D
positions, looking along the inverted interpolated normal as the vertex colouring of
``enerf.export.nerf_mesh`` does, and grows the charts by a few pixels (``dilate``) so that
bilinear lookups and mip-maps near a seam read chart colour, not the empty background.

Conventions: UV (0, 0) is the image's bottom-left corner and v grows upwards (OBJ, and trimesh,
which flips v for glTF); texel (row, col) has its centre at u = (col + 0.5) / W,
v = 1 - (row + 0.5) / H.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..config import XATLAS_MAX_FACES
from ..errors import ConfigError
from ..progress import progress_bar

__all__ = ["MESH_EXTRA_HINT", "PADDING", "XATLAS_MAX_FACES", "PAIR_MIN_CELL", "require_xatlas", "unwrap",
           "unwrap_pairs", "unwrap_method", "check_pairs_fit", "texel_samples", "dilate", "bake_texture"]

MESH_EXTRA_HINT = 'pip install -e ".[mesh]"'
PADDING = 4  # texels between charts in the atlas, and texels each chart is grown by
PAIR_MIN_CELL = 4  # unwrap_pairs: the smallest cell (texels per side) that holds two triangles apart
ColorAt = Callable[[np.ndarray, np.ndarray], np.ndarray]  # points [n, 3], unit dirs [n, 3] -> rgb [n, 3]


def require_xatlas():
    """The xatlas module, or ConfigError (one line naming the ``mesh`` extra) when it is missing."""
    try:
        import xatlas
    except ImportError:
        raise ConfigError(f"--texture needs xatlas: {MESH_EXTRA_HINT}") from None
    return xatlas


def unwrap_method(method: str, n_faces: int) -> str:
    """``xatlas`` or ``pairs``: what ``--unwrap METHOD`` does for a mesh of ``n_faces`` faces
    (``auto``: xatlas up to ``XATLAS_MAX_FACES`` faces when it is installed, pairs otherwise)."""
    if method != "auto":
        return method
    if n_faces > XATLAS_MAX_FACES:
        return "pairs"
    try:
        import xatlas  # noqa: F401
    except ImportError:
        return "pairs"
    return "xatlas"


def unwrap(vertices: np.ndarray, faces: np.ndarray, size: int, method: str = "auto", padding: int = PADDING
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A UV atlas of the mesh for a ``size`` x ``size`` texture: xatlas's charts ``padding``
    texels apart, or face pairs (``unwrap_pairs``); ``method`` as ``unwrap_method`` takes it.

    Args:
        vertices: [V, 3] float; faces: [F, 3] int.

    Returns:
        vertex_index [V'] int (the old vertex of every new one: seams split vertices),
        faces [F, 3] int into the new vertices (same order as the input faces),
        uv [V', 2] float64 in [0, 1].

    Raises:
        ConfigError: xatlas is asked for and not installed (one line naming the ``mesh`` extra), or
            the texture is too small for one cell per face pair.
    """
    if unwrap_method(method, len(faces)) == "pairs":
        return unwrap_pairs(faces, size)
    xatlas = require_xatlas()
    atlas = xatlas.Atlas()
    atlas.add_mesh(np.ascontiguousarray(vertices, np.float32), np.ascontiguousarray(faces, np.uint32))
    pack = xatlas.PackOptions()
    pack.resolution = int(size)
    pack.padding = int(padding)
    atlas.generate(xatlas.ChartOptions(), pack)
    vertex_index, new_faces, uv = atlas[0]
    return vertex_index.astype(np.int64), new_faces.astype(np.int64), np.clip(uv.astype(np.float64), 0.0, 1.0)


def unwrap_pairs(faces: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Faces 2k and 2k + 1 share the k-th cell of a square grid of cells over the texture (row by
    row from the top left); each is a right isosceles triangle in its own half of the cell, half a
    texel in from the cell's border and one texel from the other along the diagonal, so that no
    texel centre lies in two triangles. Every corner of every face becomes its own vertex.

    Args:
        faces: [F, 3] int; size: the texture's width and height in texels.

    Returns:
        vertex_index [3 F] int (the old vertex of every new one), faces [F, 3] int into the new
        vertices (same order), uv [3 F, 2] float64 in [0, 1].

    Raises:
        ConfigError: a cell would be under ``PAIR_MIN_CELL`` texels (one line with the size that fits).
    """
    n_faces = len(faces)
    per_side, cell = check_pairs_fit(n_faces, size)
    k = np.arange(n_faces)
    pair = k // 2
    x0 = (pair % per_side) * float(cell)  # the cell's top-left corner in texel units (x right, y down)
    y0 = (pair // per_side) * float(cell)
    leg = cell - 2.0  # half a texel from the border on both ends, one texel between the two hypotenuses
    corner = np.where((k % 2 == 0)[:, None], [[0.5, 0.5]], [[cell - 0.5, cell - 0.5]])  # [F, 2] right angle
    sign = np.where(k % 2 == 0, 1.0, -1.0)[:, None]  # the second face's legs point back up and left
    xy = np.stack([corner, corner + sign * [[leg, 0.0]], corner + sign * [[0.0, leg]]], axis=1)  # [F, 3, 2]
    xy += np.stack([x0, y0], axis=1)[:, None, :]
    uv = np.stack([xy[..., 0] / size, 1.0 - xy[..., 1] / size], axis=-1).reshape(-1, 2)
    return np.asarray(faces, np.int64).reshape(-1), np.arange(3 * n_faces, dtype=np.int64).reshape(n_faces, 3), uv


def check_pairs_fit(n_faces: int, size: int) -> tuple[int, int]:
    """(cells per side, texels per cell side) of ``unwrap_pairs`` for ``n_faces`` faces on a ``size``
    texture. Raises ConfigError (one line with the size that fits) when a cell would be under
    ``PAIR_MIN_CELL`` texels."""
    per_side = max(1, math.ceil(math.sqrt(math.ceil(n_faces / 2))))
    cell = size // per_side
    if cell < PAIR_MIN_CELL:
        raise ConfigError(f"--texture_size {size} leaves {cell} texels per pair of faces for {n_faces} faces; "
                          f"use --texture_size {PAIR_MIN_CELL * per_side} or more, or fewer --faces")
    return per_side, cell


def texel_samples(uv: np.ndarray, faces: np.ndarray, size: int, max_candidates: int = 1 << 20
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The texels whose centres lie inside a triangle's UV footprint.

    Every face's pixel bounding box is enumerated (vectorised, ``max_candidates`` pixels at a
    time), barycentric coordinates are computed at the pixel centres, and a texel is kept for
    the first face that contains it (edges included).

    Returns:
        rows [T], cols [T] int64 texel indices, face [T] int64, bary [T, 3] float64 (summing to 1).
    """
    pix = np.stack([uv[:, 0] * size - 0.5, (1.0 - uv[:, 1]) * size - 0.5], axis=1)[faces]  # [F, 3, 2] (x, y)
    lo = np.clip(np.floor(pix.min(axis=1)).astype(np.int64), 0, size - 1)
    hi = np.clip(np.ceil(pix.max(axis=1)).astype(np.int64), 0, size - 1)
    width, height = hi[:, 0] - lo[:, 0] + 1, hi[:, 1] - lo[:, 1] + 1
    counts = width * height
    a, b, c = pix[:, 0], pix[:, 1], pix[:, 2]
    det = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (c[:, 0] - a[:, 0]) * (b[:, 1] - a[:, 1])  # [F]
    taken = np.zeros((size, size), bool)
    out_rows, out_cols, out_face, out_bary = [], [], [], []
    ends = np.cumsum(counts)
    start = 0
    while start < len(faces):
        stop = int(np.searchsorted(ends, (ends[start - 1] if start else 0) + max_candidates, side="right"))
        stop = max(stop, start + 1)
        fid = np.arange(start, stop)
        fid = fid[det[fid] != 0.0]  # degenerate UV triangles cover no texel
        n = counts[fid]
        face = np.repeat(fid, n)
        local = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        x = lo[face, 0] + local % width[face]
        y = lo[face, 1] + local // width[face]
        ax, ay = a[face, 0], a[face, 1]
        d = det[face]
        w1 = ((x - ax) * (c[face, 1] - ay) - (c[face, 0] - ax) * (y - ay)) / d
        w2 = ((b[face, 0] - ax) * (y - ay) - (x - ax) * (b[face, 1] - ay)) / d
        w0 = 1.0 - w1 - w2
        eps = -1e-9
        inside = (w0 >= eps) & (w1 >= eps) & (w2 >= eps)
        x, y, face = x[inside], y[inside], face[inside]
        bary = np.stack([w0[inside], w1[inside], w2[inside]], axis=1)
        flat = y * size + x
        _, first = np.unique(flat, return_index=True)  # one face per texel within the batch ...
        keep = first[~taken.reshape(-1)[flat[first]]]  # ... and none already taken by an earlier batch
        taken.reshape(-1)[flat[keep]] = True
        out_rows.append(y[keep]), out_cols.append(x[keep]), out_face.append(face[keep])
        out_bary.append(np.clip(bary[keep], 0.0, 1.0) / np.clip(bary[keep], 0.0, 1.0).sum(1, keepdims=True))
        start = stop
    if not out_rows:
        return (np.zeros(0, np.int64),) * 3 + (np.zeros((0, 3)),)
    return (np.concatenate(out_rows), np.concatenate(out_cols), np.concatenate(out_face), np.concatenate(out_bary))


def dilate(image: np.ndarray, mask: np.ndarray, pixels: int) -> np.ndarray:
    """Grow the masked region of ``image`` [H, W, C] by ``pixels`` texels: each empty texel next to
    filled ones (8-neighbourhood) takes their mean, one ring per step. Returns a new image."""
    image, mask = image.astype(np.float32), mask.copy()
    height, width = mask.shape
    for _ in range(pixels):
        total = np.zeros_like(image)
        count = np.zeros(mask.shape, np.float32)
        padded_img = np.pad(image * mask[..., None], ((1, 1), (1, 1), (0, 0)))
        padded_mask = np.pad(mask.astype(np.float32), 1)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dy == dx == 0:
                    continue
                total += padded_img[1 + dy : 1 + dy + height, 1 + dx : 1 + dx + width]
                count += padded_mask[1 + dy : 1 + dy + height, 1 + dx : 1 + dx + width]
        grow = ~mask & (count > 0)
        if not grow.any():
            break
        image[grow] = total[grow] / count[grow][:, None]
        mask = mask | grow
    return image


def bake_texture(vertices: np.ndarray, normals: np.ndarray, faces: np.ndarray, uv: np.ndarray, color_at: ColorAt,
                 size: int, chunk: int = 65536, padding: int = PADDING, progress: bool = False,
                 background: float = 0.0) -> np.ndarray:
    """A ``size`` x ``size`` RGB texture of the colour ``color_at`` sees on the surface.

    Args:
        vertices: [V, 3] positions (the coordinates ``color_at`` takes); normals: [V, 3] unit
            outward vertex normals; faces: [F, 3]; uv: [V, 2] in [0, 1].
        color_at: colours of points looking along unit directions (here: the inverted normal).
        chunk: texels per call of ``color_at``; progress: a bar over the texels (on a terminal).

    Returns:
        uint8 [size, size, 3]: covered texels, charts grown by ``padding``, ``background`` elsewhere.
    """
    rows, cols, face, bary = texel_samples(uv, faces, size)
    corners = faces[face]  # [T, 3]
    points = np.einsum("tk,tkd->td", bary, vertices[corners])
    dirs = -np.einsum("tk,tkd->td", bary, normals[corners])
    length = np.linalg.norm(dirs, axis=1, keepdims=True)
    dirs = np.where(length > 1e-12, dirs / np.maximum(length, 1e-12), -np.asarray(normals)[corners[:, 0]])
    rgb = np.empty((len(rows), 3))
    with progress_bar(len(rows), f"texture {size}x{size}", progress, unit="texel") as bar:
        for lo in range(0, len(rows), chunk):
            rgb[lo : lo + chunk] = color_at(points[lo : lo + chunk], dirs[lo : lo + chunk])
            bar.update(min(chunk, len(rows) - lo))
    image = np.full((size, size, 3), float(background))
    image[rows, cols] = rgb
    mask = np.zeros((size, size), bool)
    mask[rows, cols] = True
    image = dilate(image, mask, padding)
    return (np.clip(image, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
