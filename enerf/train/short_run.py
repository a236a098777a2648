"""A short run's outputs cost about what its training did (``--cap_outputs``, on by default).

A run of a few steps (a smoke test; ``enerf train --scene fern --iters 3``) trains for seconds,
but scoring every pixel of its held-out views and rendering the 40-frame preview video take
minutes on a CPU, and show a field that has not yet learned where space is empty. Each of the
two is cut down to about ``output_budget`` seconds (the training time, at least
``FLOOR_SECONDS``), and the run says so in one line:

* the final evaluation scores every s-th row and column of each held-out view (``eval_stride``'s
  meaning), s the smallest that fits, at the render rate measured on the first rays of the first
  held-out view (``render_rate``); ``enerf eval --ckpt`` scores every pixel afterwards;
* the preview video keeps as many of its frames as fit at the final evaluation's rate (the same
  2 seconds, at a lower frame rate), and is left out, with the ``enerf render`` command that makes
  it, when fewer than ``MIN_PREVIEW_FRAMES`` fit.

A run whose outputs fit its budget gets them whole: a 10-minute run is never cut.
"""

from __future__ import annotations

import math
import time

import torch

from ..cameras.rays import flatten_rays, index_rays
from ..config import RenderConfig
from ..data.scene import Scene
from ..render import Renderer
from ..render.images import render_rays_image
from ..render.renderer import CPU_CHUNK
from .estimate import duration_text

__all__ = ["FLOOR_SECONDS", "MIN_PREVIEW_FRAMES", "output_budget", "render_rate", "capped_stride", "capped_frames",
           "stride_line"]

FLOOR_SECONDS = 30.0  # an output that takes less is never cut
MIN_PREVIEW_FRAMES = 10  # fewer frames than this make no preview (half a second at 20 fps)


def output_budget(train_seconds: float) -> float:
    """Seconds each of the final evaluation and the preview may take: the training time, at least
    ``FLOOR_SECONDS``."""
    return max(float(train_seconds), FLOOR_SECONDS)


def render_rate(scene: Scene, index: int, fields: dict, cfg: RenderConfig, device: torch.device,
                renderer: Renderer | None = None, n_rays: int = CPU_CHUNK) -> float:
    """Rays per second the renderer draws: the first ``n_rays`` rays of held-out view ``index``,
    timed (a warm-up of a few rays first, so the first pass's one-time costs are not counted)."""
    rays = flatten_rays(scene.rays(index, device=device))
    n_rays = min(n_rays, rays.origins.shape[0])
    render_rays_image(index_rays(rays, slice(0, min(8, n_rays))), fields, cfg, device, renderer=renderer)
    batch = index_rays(rays, slice(0, n_rays))
    tic = time.perf_counter()
    render_rays_image(batch, fields, cfg, device, renderer=renderer)
    return n_rays / max(time.perf_counter() - tic, 1e-9)


def capped_stride(train_seconds: float, rays: int, rays_per_second: float) -> int:
    """The smallest stride s >= 1 at which rendering ``rays`` / s^2 rays takes at most
    ``output_budget(train_seconds)`` at ``rays_per_second``."""
    seconds = rays / max(rays_per_second, 1e-9)
    return max(1, math.ceil(math.sqrt(seconds / output_budget(train_seconds)) - 1e-9))


def capped_frames(train_seconds: float, frames: int, frame_rays: int, rays_per_second: float) -> int:
    """How many of ``frames`` frames of ``frame_rays`` rays fit ``output_budget(train_seconds)`` at
    ``rays_per_second``: ``frames`` when all do, 0 when fewer than ``MIN_PREVIEW_FRAMES`` do."""
    fit = int(output_budget(train_seconds) * rays_per_second // max(frame_rays, 1))
    if fit >= frames:
        return frames
    return fit if fit >= MIN_PREVIEW_FRAMES else 0


def stride_line(stride: int, n_views: int, train_seconds: float, full_seconds: float) -> str:
    """What the run prints when its final evaluation is cut: e.g. ``final evaluation: every 3rd row
    and column of the 3 held-out views (trained 2 s; every pixel would take about 1.3 min: enerf eval
    --ckpt scores them all)``."""
    nth = {2: "2nd", 3: "3rd"}.get(stride, f"{stride}th")
    views = f"{n_views} held-out view{'' if n_views == 1 else 's'}"
    return (f"final evaluation: every {nth} row and column of the {views} (trained {duration_text(train_seconds)}; "
            f"every pixel would take about {duration_text(full_seconds)}: enerf eval --ckpt scores them all, "
            "--cap_outputs 0 at the end of training)")
