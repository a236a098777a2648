"""Volume rendering, split as nerfacc's ``sampling`` -> ``rendering``.

* estimators decide where along the rays to sample (``estimator.Estimator``, ``Samples``):
  ``HierarchicalEstimator`` (``hierarchical.py``), ``TorchGridEstimator``
  (``grid_estimator.py``, marching in ``marching.py`` over ``occupancy_grid.py``) and
  ``NerfaccEstimator`` (``nerfacc_backend.py``, CUDA);
* the compositor turns samples into rgb, depth, acc (``compositing.py``);
* ``Renderer`` glues one estimator to the compositor (``renderer.py``), and
  ``build_renderer`` is the one way to make one (``build.py``).
"""

from .build import RENDERERS, build_renderer, keeps_grid, resolve_renderer
from .compositing import composite, composite_packed, composite_samples
from .estimator import DensityFn, Estimator, RadianceField, Samples
from .grid_estimator import OccupancyGridEstimator, TorchGridEstimator
from .hierarchical import HierarchicalEstimator
from .marching import march_rays
from .nerfacc_backend import NerfaccEstimator
from .occupancy_grid import OccupancyGrid, rays_aabb
from .renderer import Renderer, density_fn, shade
from .sampling import sample_pdf, stratified_samples

__all__ = [
    "RENDERERS",
    "build_renderer",
    "keeps_grid",
    "resolve_renderer",
    "Renderer",
    "Estimator",
    "Samples",
    "RadianceField",
    "DensityFn",
    "density_fn",
    "shade",
    "HierarchicalEstimator",
    "OccupancyGridEstimator",
    "TorchGridEstimator",
    "NerfaccEstimator",
    "stratified_samples",
    "sample_pdf",
    "composite",
    "composite_packed",
    "composite_samples",
    "OccupancyGrid",
    "rays_aabb",
    "march_rays",
]
