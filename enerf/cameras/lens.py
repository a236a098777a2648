"""Lens models of ``transforms.json`` / COLMAP cameras, and undistortion of photos to the pinhole
camera enerf's rays use (one focal length, principal point at the image centre).

Pixel coordinates follow COLMAP and nerfstudio: pixel (i, j) (column i, row j) has its centre at
(i + 0.5, j + 0.5). A camera maps a point with normalised coordinates (x, y) = (X / Z, Y / Z)
(OpenCV camera axes) to the pixel ``(fx x_d + cx, fy y_d + cy)``, where (x_d, y_d) is the
distorted point:

* ``PINHOLE``: (x_d, y_d) = (x, y).
* ``OPENCV`` (nerfstudio's): r² = x² + y², d = 1 + k1 r² + k2 r⁴ + k3 r⁶ + k4 r⁸,
  x_d = d x + 2 p1 x y + p2 (r² + 2 x²), y_d = d y + 2 p2 x y + p1 (r² + 2 y²).
  With k4 = 0 this is OpenCV's five-coefficient model (k1, k2, p1, p2, k3); nerfstudio's k4 is an
  r⁸ term, not OpenCV's rational k4.
* ``OPENCV_FISHEYE`` (OpenCV's equidistant model): θ = atan(r), r = |(x, y)|,
  θ_d = θ (1 + k1 θ² + k2 θ⁴ + k3 θ⁶ + k4 θ⁸), (x_d, y_d) = θ_d / r (x, y).

Undistortion resamples each photo into a pinhole camera of focal length ``focal`` whose
principal point is the centre of its ``width x height`` image: every target pixel centre is sent
through the source camera's forward model above (no iterative inversion) and the photo is read
there bilinearly. Target pixels whose source point falls outside the photo (or beyond the radius
where the lens model folds back) are not kept: the target image is the largest centred rectangle
of valid pixels (``pinhole_canvas``), so no pixel of it is made up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["LENS_MODELS", "Camera", "distort", "fold_radius", "source_pixels", "pinhole_canvas", "Resampler"]

LENS_MODELS = ("PINHOLE", "OPENCV", "OPENCV_FISHEYE")


@dataclass(frozen=True)
class Camera:
    """Intrinsics of one photo: size, focal lengths, principal point (pixels) and lens model."""

    model: str  # one of LENS_MODELS
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    k1: float = 0.0
    k2: float = 0.0
    k3: float = 0.0
    k4: float = 0.0
    p1: float = 0.0
    p2: float = 0.0

    @property
    def coefficients(self) -> tuple[float, ...]:
        """(k1, k2, k3, k4, p1, p2)."""
        return (self.k1, self.k2, self.k3, self.k4, self.p1, self.p2)

    @property
    def distorted(self) -> bool:
        return self.model == "OPENCV_FISHEYE" or any(c != 0.0 for c in self.coefficients)

    def scaled(self, sx: float, sy: float, width: int, height: int) -> "Camera":
        """The camera of the same photo resized to ``width x height`` (pixel extents scaled by sx, sy)."""
        return replace(self, width=int(width), height=int(height), fx=self.fx * sx, fy=self.fy * sy,
                       cx=self.cx * sx, cy=self.cy * sy)

    def downscaled(self, factor: int) -> "Camera":
        """The camera of the photo block-averaged by ``factor`` as ``enerf.data.llff.area_downscale``
        does it (a centred crop to whole blocks, then ``factor x factor`` means)."""
        width, height = self.width // factor, self.height // factor
        left, top = (self.width - width * factor) // 2, (self.height - height * factor) // 2
        return replace(self, width=width, height=height, fx=self.fx / factor, fy=self.fy / factor,
                       cx=(self.cx - left) / factor, cy=(self.cy - top) / factor)

    def is_centred_pinhole(self, focal: float, tol: float = 1e-6) -> bool:
        """Whether the photo already is the pinhole camera ``focal`` with a centred principal point."""
        return (not self.distorted and abs(self.fx - focal) <= tol * focal and abs(self.fy - focal) <= tol * focal
                and abs(self.cx - 0.5 * self.width) <= 1e-6 and abs(self.cy - 0.5 * self.height) <= 1e-6)


def distort(camera: Camera, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lens model's forward map of normalised coordinates (module docstring).

    Args:
        x, y: np.ndarray  # [...] undistorted normalised coordinates (X / Z, Y / Z)
    Returns:
        x_d, y_d: np.ndarray  # [...] distorted normalised coordinates
    """
    k1, k2, k3, k4, p1, p2 = camera.coefficients
    if camera.model == "OPENCV_FISHEYE":
        r = np.hypot(x, y)
        theta = np.arctan(r)
        t2 = theta * theta
        theta_d = theta * (1.0 + t2 * (k1 + t2 * (k2 + t2 * (k3 + t2 * k4))))
        ratio = np.where(r > 1e-12, theta_d / np.maximum(r, 1e-12), 1.0)
        return x * ratio, y * ratio
    if camera.model == "PINHOLE":
        return x, y
    r2 = x * x + y * y
    d = 1.0 + r2 * (k1 + r2 * (k2 + r2 * (k3 + r2 * k4)))
    xy = x * y
    return d * x + 2.0 * p1 * xy + p2 * (r2 + 2.0 * x * x), d * y + 2.0 * p2 * xy + p1 * (r2 + 2.0 * y * y)


def fold_radius(camera: Camera, r_max: float) -> float:
    """The normalised radius up to which the radial part of the lens model increases with r
    (beyond it the model folds back and two directions land on one pixel); ``inf`` when it
    increases over [0, r_max]."""
    k1, k2, k3, k4 = camera.k1, camera.k2, camera.k3, camera.k4
    if camera.model == "PINHOLE" or not any((k1, k2, k3, k4)):
        return math.inf
    r = np.linspace(0.0, r_max, 20001)[1:]
    if camera.model == "OPENCV_FISHEYE":
        t = np.arctan(r)  # theta_d increases with r while it increases with theta
        t2 = t * t
        slope = 1.0 + t2 * (3 * k1 + t2 * (5 * k2 + t2 * (7 * k3 + t2 * 9 * k4)))
    else:  # d/dr of r (1 + k1 r² + k2 r⁴ + k3 r⁶ + k4 r⁸)
        r2 = r * r
        slope = 1.0 + r2 * (3 * k1 + r2 * (5 * k2 + r2 * (7 * k3 + r2 * 9 * k4)))
    bad = np.flatnonzero(slope <= 0.0)
    return float(r[bad[0]]) if bad.size else math.inf


def source_pixels(camera: Camera, focal: float, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the pixel centres of the centred pinhole camera (``focal``, ``width x height``) lie in
    the photo of ``camera``.

    Returns:
        u, v: np.ndarray  # [height, width] float64 pixel coordinates in the photo (centres at i + 0.5)
        valid: np.ndarray  # [height, width] bool: inside the photo's pixel centres and before the fold
    """
    x = (np.arange(width, dtype=np.float64) + 0.5 - 0.5 * width) / focal
    y = (np.arange(height, dtype=np.float64) + 0.5 - 0.5 * height) / focal
    x, y = np.meshgrid(x, y)
    xd, yd = distort(camera, x, y)
    u, v = camera.fx * xd + camera.cx, camera.fy * yd + camera.cy
    eps = 1e-9
    valid = (u >= 0.5 - eps) & (u <= camera.width - 0.5 + eps) & (v >= 0.5 - eps) & (v <= camera.height - 0.5 + eps)
    r = np.hypot(x, y)
    valid &= r < fold_radius(camera, float(r.max()) + 1e-9)
    return u, v, valid


def pinhole_canvas(cameras: list[Camera], focal: float, multiple: int = 1) -> tuple[int, int]:
    """Size of the largest centred pinhole image (``focal``) that every camera covers.

    The candidate canvas is the smallest photo size (rounded down to even); the result is the
    largest centred rectangle of it (width and height multiples of ``multiple`` and of 2, so the
    principal point stays at the centre after a ``multiple`` x ``multiple`` block average) whose
    pixels all map inside every photo.

    Returns:
        (width, height); (0, 0) when no such rectangle exists.
    """
    width = min(c.width for c in cameras) // 2 * 2
    height = min(c.height for c in cameras) // 2 * 2
    valid = np.ones((height, width), dtype=bool)
    for camera in cameras:
        valid &= source_pixels(camera, focal, width, height)[2]
    bad = np.zeros((height + 1, width + 1), dtype=np.int64)
    bad[1:, 1:] = np.cumsum(np.cumsum(~valid, axis=0), axis=1)
    step = multiple // math.gcd(multiple, 2)  # half-sizes a with 2a a multiple of `multiple`
    cx, cy = width // 2, height // 2

    def clear(a: int, b: int) -> bool:
        r0, r1, c0, c1 = cy - b, cy + b, cx - a, cx + a
        return bad[r1, c1] - bad[r0, c1] - bad[r1, c0] + bad[r0, c0] == 0

    best, best_area = (0, 0), 0  # half-sizes in pixels; area in step units
    b_max = cy // step
    for a in range(cx // step, 0, -1):  # narrower rectangles can only be taller
        if a * b_max <= best_area:
            break
        lo, hi = 0, b_max  # the largest b (in steps) whose rectangle is clear (b = 0 always is)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if clear(a * step, mid * step):
                lo = mid
            else:
                hi = mid - 1
        if a * lo > best_area:
            best, best_area = (a * step, lo * step), a * lo
    return 2 * best[0], 2 * best[1]


class Resampler:
    """Bilinear reads of a photo at fixed pixel coordinates (the undistortion map of one camera).

    Args:
        u, v: np.ndarray  # [H, W] pixel coordinates in the photo (centres at i + 0.5), inside
            [0.5, width - 0.5] x [0.5, height - 0.5]
        width, height: the photo's size
    """

    def __init__(self, u: np.ndarray, v: np.ndarray, width: int, height: int):
        self.shape = u.shape
        self.size = (int(width), int(height))
        x = np.clip(u - 0.5, 0.0, width - 1.0)
        y = np.clip(v - 0.5, 0.0, height - 1.0)
        x0 = np.clip(np.floor(x), 0, max(width - 2, 0)).astype(np.int64)
        y0 = np.clip(np.floor(y), 0, max(height - 2, 0)).astype(np.int64)
        fx, fy = (x - x0).astype(np.float32), (y - y0).astype(np.float32)
        x1, y1 = np.minimum(x0 + 1, width - 1), np.minimum(y0 + 1, height - 1)
        self.index = [(y0 * width + x0).ravel(), (y0 * width + x1).ravel(), (y1 * width + x0).ravel(),
                      (y1 * width + x1).ravel()]
        self.weight = [((1 - fx) * (1 - fy)).ravel()[:, None], (fx * (1 - fy)).ravel()[:, None],
                       ((1 - fx) * fy).ravel()[:, None], (fx * fy).ravel()[:, None]]

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """image: np.ndarray  # [height, width, C] -> np.ndarray  # [H, W, C] float32."""
        flat = image.reshape(-1, image.shape[-1])
        out = flat[self.index[0]] * self.weight[0]
        for index, weight in zip(self.index[1:], self.weight[1:]):
            out += flat[index] * weight
        return out.reshape(*self.shape, image.shape[-1]).astype(np.float32, copy=False)
