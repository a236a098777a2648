"""Textures of the synthetic scene: scikit-image's bundled photographs, cropped, tiled and tinted.

No download: every source image ships inside the scikit-image wheel. ``build_texture`` makes a
texture from its scene.json spec, ``sample_texture`` looks it up bilinearly.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError

__all__ = ["build_texture", "sample_texture"]

# scikit-image sample images that ship inside the wheel (checked to load with no network).
_SKIMAGE_SOURCES = (
    "astronaut", "coffee", "chelsea", "cat", "rocket", "camera", "coins", "moon", "brick", "grass",
    "gravel", "hubble_deep_field", "immunohistochemistry", "stereo_motorcycle", "retina", "colorwheel",
    "clock", "page", "text", "cell",
)  # fmt: skip


def _source_image(name: str) -> np.ndarray:
    """A scikit-image sample picture as float32 RGB [h, w, 3] in [0, 1]."""
    if name not in _SKIMAGE_SOURCES:
        raise DataError(f"texture source {name!r} is not one of the bundled scikit-image images")
    import skimage.data

    img = getattr(skimage.data, name)()
    if isinstance(img, tuple):  # stereo_motorcycle -> (left, right, disparity)
        img = img[0]
    img = np.asarray(img)
    img = img.astype(np.float32) / (255.0 if img.dtype == np.uint8 else 1.0)
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    return np.ascontiguousarray(img[:, :, :3])


def _center_crop(img: np.ndarray, height: int, width: int) -> np.ndarray:
    top, left = (img.shape[0] - height) // 2, (img.shape[1] - width) // 2
    if top < 0 or left < 0:
        raise DataError(f"texture of {img.shape[1]}x{img.shape[0]} is smaller than the {width}x{height} crop")
    return img[top : top + height, left : left + width]


def build_texture(spec: dict) -> np.ndarray:
    """Texture image from its scene.json spec: np.ndarray  # [h, w, 3] float32.

    ``{"source": name}`` or ``{"mosaic": [[name, ...], ...], "cell": [h, w]}`` (centre
    crops laid out in a grid), optionally with ``"tint": [r, g, b]`` multiplied in.
    """
    if "mosaic" in spec:
        ch, cw = spec["cell"]
        rows = [np.concatenate([_center_crop(_source_image(n), ch, cw) for n in row], 1) for row in spec["mosaic"]]
        tex = np.concatenate(rows, 0)
    else:
        tex = _source_image(spec["source"])
    if spec.get("tint") is not None:
        tex = tex * np.asarray(spec["tint"], dtype=np.float32)
    return np.ascontiguousarray(tex, dtype=np.float32)


def _wrap(index: np.ndarray, size: int, mode: str) -> np.ndarray:
    if mode == "repeat":
        return np.mod(index, size)
    if mode == "mirror":
        index = np.mod(index, 2 * size)
        return np.where(index >= size, 2 * size - 1 - index, index)
    return np.clip(index, 0, size - 1)


def sample_texture(tex: np.ndarray, u: np.ndarray, v: np.ndarray, mode: str) -> np.ndarray:
    """Bilinear lookup at texture coordinates (u right, v down; [0, 1] spans the image once).

    Texel (x, y) sits at (u, v) = ((x + 0.5) / w, (y + 0.5) / h). ``mode`` handles
    coordinates outside [0, 1]: "clamp", "repeat" or "mirror".

    Returns:
        np.ndarray  # [n, 3]
    """
    h, w = tex.shape[:2]
    x = u * w - 0.5
    y = v * h - 0.5
    x0 = np.floor(x)
    y0 = np.floor(y)
    fx = (x - x0)[:, None]
    fy = (y - y0)[:, None]
    x0 = x0.astype(np.int64)
    y0 = y0.astype(np.int64)
    xa, xb = _wrap(x0, w, mode), _wrap(x0 + 1, w, mode)
    ya, yb = _wrap(y0, h, mode), _wrap(y0 + 1, h, mode)
    top = tex[ya, xa] * (1 - fx) + tex[ya, xb] * fx
    bottom = tex[yb, xa] * (1 - fx) + tex[yb, xb] * fx
    return top * (1 - fy) + bottom * fy
