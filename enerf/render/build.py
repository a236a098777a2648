"""The one way to get a renderer: ``build_renderer`` (and ``resolve_renderer``, which picks it).

``--renderer`` names the estimator:

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

import dataclasses
import sys
from typing import Callable

import torch

from ..config import RENDERERS, RenderConfig
from ..cameras.rays import RayExtent, Rays, flatten_rays, ray_extent
from ..errors import ConfigError
from .estimator import RadianceField
from .grid_estimator import TorchGridEstimator
from .hierarchical import HierarchicalEstimator
from .proposal import ProposalEstimator
from . import nerfacc_backend
from .occupancy_grid import OccupancyGrid
from .renderer import Renderer, density_fn

__all__ = ["RENDERERS", "resolve_renderer", "build_renderer", "keeps_grid"]

_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"enerf: warning: {message}", file=sys.stderr)


def keeps_grid(name: str) -> bool:
    """Whether renderer ``name`` (a ``--renderer`` value, ``auto`` included) marches an occupancy
    grid, whose state a checkpoint then carries."""
    return name not in ("hierarchical", "proposal")


def resolve_renderer(name: str, device: torch.device, warn: Callable[[str], None] = _warn_once) -> str:
    """The renderer that ``name`` means on ``device``: hierarchical, torch_grid, proposal or nerfacc.

    Raises:
        ConfigError: ``nerfacc`` was asked for and cannot run here (the message says why).
    """
    if name not in RENDERERS:
        raise ConfigError(f"renderer {name!r} is not one of {', '.join(RENDERERS)}", ("renderer",))
    if name in ("hierarchical", "torch_grid", "proposal"):
        return name
    ok, why = nerfacc_backend.nerfacc_status(device)
    if name == "nerfacc":
        if not ok:
            raise ConfigError(f"renderer nerfacc cannot run: {why}; use renderer torch_grid (the same algorithm in torch) or auto", ("renderer",))
        return "nerfacc"
    if ok:
        return "nerfacc"
    if device.type == "cuda":  # on a CPU run torch_grid is simply what auto means
        warn(f"--renderer auto falls back to torch_grid: {why}")
    return "torch_grid"


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
    """The renderer ``cfg.renderer`` resolves to on ``device``.

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
    if fallback and cfg.renderer == "nerfacc" and not nerfacc_backend.nerfacc_status(device)[0]:
        cfg = dataclasses.replace(cfg, renderer="torch_grid")
    name = resolve_renderer(cfg.renderer, device)
    if name == "hierarchical":
        return Renderer(cfg, HierarchicalEstimator(cfg))
    if name == "proposal":
        return Renderer(cfg, ProposalEstimator(cfg))
    if rays is not None:
        flat = flatten_rays(rays)

        def extent() -> RayExtent:
            return ray_extent([flat], flat.origins.shape[0])
    seen = extent() if extent is not None and state is None else None
    if grid is None:
        if state is not None:
            box = state["grid"]["aabb"]
        elif aabb is not None and seen is not None:
            box = torch.tensor(aabb, dtype=torch.float32)
        elif seen is not None:
            pad = (seen.hi - seen.lo) * 0.02  # rays_aabb's margin
            box = torch.cat([seen.lo - pad, seen.hi + pad]).float()
        else:
            raise ValueError("a grid renderer needs a saved state or the training rays to size its grid")
        grid = OccupancyGrid(box, cfg.grid_resolution).to(device)
    estimator = (nerfacc_backend.NerfaccEstimator if name == "nerfacc" else TorchGridEstimator)(cfg, grid)
    if state is not None:
        estimator.load_state_dict(state)
    elif seen is not None:
        estimator.occ_scale = seen.mean_direction_norm
    if read_off is not None:
        estimator.read_off_field(density_fn(read_off))
    return Renderer(cfg, estimator)
