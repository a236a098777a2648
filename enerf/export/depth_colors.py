"""Depth as a picture: a rendering's per-pixel depth (or disparity on NDC scenes), one colour range for a whole
video, and matplotlib's colormaps (``enerf render``'s depth.mp4, the viewer's depth view)."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib import colormaps

from ..data.scene import Scene

__all__ = ["depth_values", "depth_range", "colorize"]


def depth_values(out: dict[str, torch.Tensor], use_ndc: bool) -> np.ndarray:
    """Per-pixel depth (world rays) or disparity (NDC rays) of a rendering.

    The expected ray parameter is normalised by the accumulated opacity. In NDC (near plane 1)
    a point at ray parameter t has world depth 1 / (1 - t), so its disparity is ``1 - t``.

    Returns:
        np.ndarray  # [H, W] float32
    """
    acc = out["acc"].numpy()
    t = out["depth"].numpy() / np.maximum(acc, 1e-6)
    if use_ndc:
        return np.clip(1.0 - t, 0.0, 1.0).astype(np.float32)
    return np.where(acc > 1e-3, t, np.inf).astype(np.float32)


def depth_range(scene: Scene) -> tuple[float, float]:
    """Fixed colour range for a whole video: [1/far, 1/near] (disparity) or [near, far] (depth)."""
    near, far = float(scene.bounds.min()), float(scene.bounds.max())
    return (1.0 / far, 1.0 / near) if scene.use_ndc else (near, far)


def colorize(values: np.ndarray, lo: float, hi: float, cmap: str) -> np.ndarray:
    """Map values [H, W] over [lo, hi] (clipped) through a matplotlib colormap -> uint8 [H, W, 3]."""
    x = np.clip((np.nan_to_num(values, posinf=hi, neginf=lo) - lo) / max(hi - lo, 1e-12), 0.0, 1.0)
    return (colormaps[cmap](x)[..., :3] * 255.0 + 0.5).astype(np.uint8)
