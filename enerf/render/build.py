"""The one way to get a renderer: ``build_renderer`` (its sampler resolved on the device), and the
fields it renders: ``build_fields`` (the coarse field and the networks its estimator trains beside it).

``--sampler`` names the estimator (``registry.ESTIMATORS``):

* ``hierarchical``: NeRF's stratified (+ importance) sampling (``hierarchical.py``).
* ``proposal``: nerfacto's proposal networks and mip-NeRF 360's losses (``proposal.py``), for
  unbounded captures; the networks are the run's ``fields["proposal"]``.
* ``torch_grid``: occupancy-grid ray marching with empty-space skipping and early stop,
  packed rendering, all in plain torch (``grid_estimator.py``, ``marching.py``); CPU or CUDA.
* ``nerfacc``: the same algorithm through ``nerfacc.OccGridEstimator`` (``nerfacc_backend.py``);
  needs CUDA and nerfacc's extension.
* ``auto``: ``nerfacc`` when the run is on CUDA and nerfacc's extension builds, otherwise
  ``torch_grid`` (one warning line on stderr when the build failed, saying why).
"""

from __future__ import annotations

import sys
from typing import Callable

import torch

from torch import nn

from ..config import SAMPLERS, FieldConfig, RenderConfig
from ..cameras.rays import RayExtent, Rays, flatten_rays, ray_extent
from .estimator import RadianceField, Setup
from .occupancy_grid import OccupancyGrid
from ..fields.nerf import NeRFField
from .registry import check_sampler_options, estimator_class
from .renderer import Renderer

__all__ = ["SAMPLERS", "build_renderer", "build_fields", "keeps_grid"]

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"enerf: warning: {message}", file=sys.stderr)


def keeps_grid(name: str) -> bool:
    """Whether renderer ``name`` (a ``--sampler`` value, ``auto`` included) keeps state a trained
    run's checkpoint must carry (an occupancy grid): ``Estimator.stateful``."""
    return estimator_class(name).stateful


def build_renderer(
    cfg: RenderConfig,
    device: torch.device,
    *,
    state: dict | None = None,
    rays: Rays | None = None,
    extent: Callable[[], RayExtent] | None = None,
    aabb: tuple[float, ...] | None = None,
    read_off: RadianceField | None = None,
    grid: OccupancyGrid | None = None,
    fallback: bool = False,
) -> Renderer:
    """The renderer ``cfg.sampler`` resolves to on ``device`` (``Estimator.build``).

    A grid estimator's occupancy grid comes from, in this order:

    * ``grid``: this grid itself (its state is the renderer's);
    * ``state``: a ``Renderer.state_dict()`` (a checkpoint's ``estimator``), restored;
    * ``rays`` (Rays [..., c]; the training rays, or the rays to render): an empty grid over
      ``aabb`` (the scene's content box, e.g. a Blender object's) or else over the box of
      the rays' [near, far] segments, with ``occ_scale`` their mean |direction|;
    * ``extent``: as ``rays``, from those figures alone (``RayExtent``; called only when a new
      grid needs them), for training rays that are never all made at once (``RaySampler.extent``).

    Args:
        read_off: fill the new grid from this field alone (one full-grid density pass, the
            rule a warm-up update applies): for rendering a field without its trained grid.
        fallback: ``nerfacc`` renders with ``torch_grid`` where nerfacc cannot run (both keep
            the same grid state), for a trained checkpoint; otherwise that is a ConfigError.

    Raises:
        ConfigError: a renderer that cannot run here, or settings it cannot honour.
        ValueError: a grid renderer with neither ``grid``, ``state`` nor ``rays``.
    """
    check_sampler_options(cfg)
    chosen = estimator_class(cfg.sampler).resolve(device, _warn_once, fallback)
    if rays is not None:
        flat = flatten_rays(rays)

        def extent() -> RayExtent:
            return ray_extent([flat], flat.origins.shape[0])
    setup = Setup(device, state=state, extent=extent, aabb=aabb, read_off=read_off, grid=grid)
    return Renderer(cfg, chosen.build(cfg, setup))


def build_fields(cfg: FieldConfig, device: torch.device, render: RenderConfig | None = None) -> dict[str, nn.Module]:
    """The coarse field, plus the networks the estimator of ``render`` trains beside it
    (``Estimator.networks``: the hierarchical estimator's fine field when ``n_importance > 0``,
    the proposal estimator's ``proposal`` networks); ``render`` None: the coarse field alone."""
    if render is not None:
        check_sampler_options(render)
    fields: dict[str, nn.Module] = {"coarse": NeRFField(cfg).to(device)}
    if render is not None:
        fields.update(estimator_class(render.sampler).networks(render, cfg, device))
    return fields
