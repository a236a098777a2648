"""Volume rendering: samples along rays → rgb, depth, acc (pure torch, CPU or GPU; nerfacc on CUDA)."""

from .marching import composite_packed, march_rays
from .occupancy_grid import OccupancyGrid, rays_aabb
from .renderer import RENDERERS, FieldFns, GridRenderer, HierarchicalRenderer, make_renderer, resolve_renderer
from .sampling import sample_pdf, stratified_samples
from .volume import RgbSigmaFn, composite, render_image, render_rays

__all__ = [
    "stratified_samples",
    "sample_pdf",
    "composite",
    "render_rays",
    "render_image",
    "RgbSigmaFn",
    "RENDERERS",
    "FieldFns",
    "make_renderer",
    "resolve_renderer",
    "HierarchicalRenderer",
    "GridRenderer",
    "OccupancyGrid",
    "rays_aabb",
    "march_rays",
    "composite_packed",
]
