"""Draft frames: the run's own renderer with fewer samples per ray, for the frames the viewer
shows before the exact one (the previews after a camera move, the doubling widths, and a frame
at the resolution cap); the exact frame (every sample of the checkpoint's renderer, the pixels
``enerf render`` gives) follows while the camera rests.

``draft_render_config`` scales the sample counts by ``fraction``:

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

import dataclasses
import weakref

from ..config import RenderConfig
from ..loaded_run import LoadedRun
from ..render import Renderer, build_renderer

__all__ = ["draft_render_config", "draft_renderer", "DRAFT_MIN_SAMPLES"]

DRAFT_MIN_SAMPLES = 8  # never fewer samples (or proposal intervals) per ray than this
_DRAFT_EARLY_STOP = 1e-3  # grid renderers: a draft ray stops at this transmittance (or the run's, if larger)
_DRAFT_RGB_THRESHOLD = 1e-3  # colour only where the compositing weight exceeds this (or the run's threshold)
_cache: "weakref.WeakKeyDictionary[Renderer, tuple[float, Renderer]]" = weakref.WeakKeyDictionary()  # by exact renderer


def _scaled(n: int, fraction: float) -> int:
    return max(min(DRAFT_MIN_SAMPLES, n), int(round(n * fraction)))


def draft_render_config(cfg: RenderConfig, fraction: float) -> RenderConfig:
    """``cfg`` with ``fraction`` (in (0, 1]) of its samples per ray (the module docstring); 1: ``cfg``."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0:
        return cfg
    name = cfg.renderer
    cfg = dataclasses.replace(cfg, rgb_weight_threshold=max(cfg.rgb_weight_threshold, _DRAFT_RGB_THRESHOLD))
    if name == "hierarchical":
        return dataclasses.replace(cfg, n_samples=_scaled(cfg.n_samples, fraction),
                                   n_importance=_scaled(cfg.n_importance, fraction) if cfg.n_importance else 0)
    if name == "proposal":
        return dataclasses.replace(cfg, n_samples=_scaled(cfg.n_samples, fraction),
                                   proposal_samples=tuple(_scaled(n, fraction) for n in cfg.proposal_samples))
    return dataclasses.replace(cfg, render_step_size=cfg.render_step_size / fraction,
                               early_stop_eps=max(cfg.early_stop_eps, _DRAFT_EARLY_STOP))


def draft_renderer(run: LoadedRun, fraction: float) -> Renderer | None:
    """The renderer of ``run``'s draft frames (built once per run and fraction); None where the
    draft is the exact renderer (``fraction`` 1, or a grid run without a trained grid)."""
    if fraction >= 1.0 or run.renderer is None:
        return None
    cached = _cache.get(run.renderer)
    if cached is not None and cached[0] == fraction:
        return cached[1]
    cfg = draft_render_config(run.renderer.cfg, fraction)
    grid = run.renderer.grid
    renderer = build_renderer(cfg, run.device, grid=grid, fallback=True) if grid is not None else \
        build_renderer(cfg, run.device)
    if grid is not None:
        renderer.estimator.occ_scale = getattr(run.renderer.estimator, "occ_scale", 1.0)
    _cache[run.renderer] = (fraction, renderer)
    return renderer
