"""One viewer frame from one or two runs: a single rendering, two side by side, a split under a
slider, or their difference; labels drawn into the image."""

from __future__ import annotations

import numpy as np

from ..loaded_run import LoadedRun
from .render import render_camera

__all__ = ["render_frame", "draw_label", "DIFF_GAIN"]

DIFF_GAIN = 4.0  # the difference image shows |A - B| times this


def draw_label(image: np.ndarray, text: str, x: int = 0) -> np.ndarray:
    """``image`` [H, W, 3] float in [0, 1] with ``text`` on a dark strip at its top, from column ``x``."""
    if not text:
        return image
    from PIL import Image, ImageDraw

    pil = Image.fromarray((np.clip(image, 0, 1) * 255 + 0.5).astype(np.uint8))
    draw = ImageDraw.Draw(pil)
    left, top, right, bottom = draw.textbbox((x + 4, 3), text)
    box = (max(left - 3, 0), max(top - 2, 0), min(right + 3, image.shape[1]), min(bottom + 2, image.shape[0]))
    draw.rectangle(box, fill=(0, 0, 0))
    draw.text((x + 4, 3), text, fill=(255, 255, 255))
    out = np.array(image, dtype=np.float32, copy=True)  # only the label's strip is touched (and quantised)
    x0, y0, x1, y1 = box
    out[y0:y1, x0:x1] = np.asarray(pil, dtype=np.float32)[y0:y1, x0:x1] / 255.0
    return out


def render_frame(runs: list[LoadedRun], c2w: np.ndarray, width: int, height: int, focal: float, output: str = "rgb",
                 layout: str = "side", split: float = 0.5, labels: list[str] | None = None,
                 colormap: str = "turbo", draft: float = 1.0) -> np.ndarray:
    """The frame the viewer shows for camera ``c2w`` (see ``render_camera``).

    One run: its rendering. Two runs (``layout``): ``side``, each in one half of the frame (the
    centre of the same camera, at the same focal length); ``split``, A left of column
    ``split * width`` and B right of it, with a white line between; ``a`` / ``b``, one of them;
    ``difference``, ``|A - B| * DIFF_GAIN``. ``labels``: one per run, drawn at the top of its part.
    ``draft``: the fraction of samples of a draft frame (1: exact; ``render_camera``).

    Returns:
        np.ndarray  # [height, width, 3] float32 in [0, 1]
    """
    labels = labels or [""] * len(runs)
    if len(runs) == 1:
        return draw_label(render_camera(runs[0], c2w, width, height, focal, output, colormap, draft), labels[0])
    a, b = runs[:2]
    if layout in ("a", "b"):
        k = 0 if layout == "a" else 1
        return draw_label(render_camera(runs[k], c2w, width, height, focal, output, colormap, draft), labels[k])
    if layout == "side":
        half = max(width // 2, 1)
        left = draw_label(render_camera(a, c2w, half, height, focal, output, colormap, draft), labels[0])
        right = draw_label(render_camera(b, c2w, width - half, height, focal, output, colormap, draft), labels[1])
        return np.concatenate([left, right], axis=1)
    img_a = render_camera(a, c2w, width, height, focal, output, colormap, draft)
    img_b = render_camera(b, c2w, width, height, focal, output, colormap, draft)
    if layout == "difference":
        return draw_label(np.clip(np.abs(img_a - img_b) * DIFF_GAIN, 0.0, 1.0),
                          f"|A - B| x {DIFF_GAIN:g}   A: {labels[0]}   B: {labels[1]}")
    if layout != "split":
        raise ValueError(f"layout must be side, split, a, b or difference, got {layout!r}")
    cut = int(round(np.clip(split, 0.0, 1.0) * width))
    frame = np.concatenate([img_a[:, :cut], img_b[:, cut:]], axis=1)
    frame = draw_label(frame, labels[0])
    frame = draw_label(frame, labels[1], x=min(cut + 2, max(width - 40, 0)))
    if 0 < cut < width:
        frame[:, max(cut - 1, 0):cut + 1] = 1.0
    return frame
