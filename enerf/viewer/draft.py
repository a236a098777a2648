"""Draft frames: the run's own renderer with fewer samples per ray, for the frames the viewer
shows before the exact one (the previews after a camera move, the doubling widths, and a frame
at the resolution cap); the exact frame (every sample of the checkpoint's renderer, the pixels
``enerf render`` gives) follows while the camera rests.

``draft_render_config`` scales the sample counts by ``fraction`` (each estimator's
``draft_config``; ``Renderer.draft`` builds the draft renderer):

* ``hierarchical``: ``n_samples`` and ``n_importance`` (the same stratified / importance sampling);
* ``proposal``: the final ``n_samples`` and every proposal pass's intervals (the same proposal
  networks, read on fewer intervals: on a CPU the proposal passes cost more than the field's
  few samples);
* ``torch_grid`` / ``nerfacc``: the marching step grows by ``1 / fraction`` (the same occupancy
  grid: empty space is skipped as in the exact frame), early stop at transmittance 1e-3;
* all: colour only where the compositing weight exceeds 1e-3 (``--rgb_weight_threshold``).

Nothing here changes the run, its renderer or ``enerf render``: the draft renderer is a second
renderer built beside the run's (sharing its occupancy grid, never writing it).
"""

from __future__ import annotations

import weakref

from ..config import RenderConfig
from ..loaded_run import LoadedRun
from ..render import Renderer, estimator_class
from ..render.estimator import DRAFT_MIN_SAMPLES

__all__ = ["draft_render_config", "draft_renderer", "DRAFT_MIN_SAMPLES"]

_cache: "weakref.WeakKeyDictionary[Renderer, tuple[float, Renderer]]" = weakref.WeakKeyDictionary()  # by exact renderer


def draft_render_config(cfg: RenderConfig, fraction: float) -> RenderConfig:
    """``cfg`` with ``fraction`` (in (0, 1]) of its samples per ray (its estimator's
    ``draft_config``, the module docstring); 1: ``cfg``."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0:
        return cfg
    return estimator_class(cfg.sampler).draft_config(cfg, fraction)


def draft_renderer(run: LoadedRun, fraction: float) -> Renderer | None:
    """The renderer of ``run``'s draft frames (built once per run and fraction: ``Renderer.draft``,
    which shares the run's estimator state); None where the draft is the exact renderer
    (``fraction`` 1, or a grid run without a trained grid)."""
    if fraction >= 1.0 or run.renderer is None:
        return None
    cached = _cache.get(run.renderer)
    if cached is not None and cached[0] == fraction:
        return cached[1]
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    renderer = run.renderer.draft(fraction)
    _cache[run.renderer] = (fraction, renderer)
    return renderer
