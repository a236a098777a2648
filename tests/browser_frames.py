"""What a viewer frame looks like in a screenshot of the page (the browser tests of the viewer).

viser stretches the frame over the canvas' drawing buffer, which it makes smaller than the page when
frames come slowly (a loaded machine, software WebGL), and the viewer then asks for frames of the
buffer's size; the browser scales the buffer up to the page. Both resamplings are bilinear.
"""

from __future__ import annotations

import numpy as np

CANVAS_SIZE_JS = ("const c = [...document.querySelectorAll('canvas')].find(c => c.width > 0);"
                  "return [c.width, c.height];")


def as_shown(frame: np.ndarray, driver, shape: tuple[int, ...]) -> np.ndarray:
    """``frame`` [h, w, 3] (as the viewer sent it) as a screenshot of ``shape`` shows it: resized to
    the canvas' drawing buffer, then to the page (each step only where the sizes differ)."""
    from skimage.transform import resize

    bw, bh = driver.execute_script(CANVAS_SIZE_JS)
    out = frame
    for size in ((bh, bw), tuple(shape[:2])):
        if out.shape[:2] != size:
            out = resize(out, (*size, 3), order=1, anti_aliasing=False).astype(np.float32)
    return out


def fills(width: int, height: int, shape: tuple[int, ...]) -> bool:
    """A frame of ``width`` x ``height`` has the page's aspect (to a pixel) and is no larger than the page."""
    h, w = shape[:2]
    return width <= w and abs(width * h - height * w) <= w
