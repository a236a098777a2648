"""Volume rendering, split as nerfacc's ``sampling`` -> ``rendering``.

* estimators decide where along the rays to sample (``estimator.Estimator``, ``Samples``), one
  module each, by name in ``registry.ESTIMATORS``: ``HierarchicalEstimator`` (``hierarchical.py``),
  ``ProposalEstimator`` (``proposal.py``), ``TorchGridEstimator`` (``grid_estimator.py``,
  marching in ``marching.py`` over ``occupancy_grid.py``) and ``NerfaccEstimator``
  (``nerfacc_backend.py``, CUDA);
* ``shade`` queries a field at the samples and the compositor turns them into rgb, depth, acc
  (``shading.py``, ``compositing.py``);
* ``Renderer`` glues one estimator to the shading (``renderer.py``), and ``build_renderer`` is
  the one way to make one (``build.py``).
"""

from .build import SAMPLERS, build_fields, build_renderer, keeps_grid
from .compositing import composite, composite_packed, composite_samples
from .estimator import DensityFn, Estimator, RadianceField, Samples, Setup, density_fn
from .grid_estimator import OccupancyGridEstimator, TorchGridEstimator
from .hierarchical import HierarchicalEstimator
from .marching import march_rays
from .nerfacc_backend import NerfaccEstimator
from .occupancy_grid import OccupancyGrid, rays_aabb
from .proposal import ProposalEstimator
from .registry import ESTIMATORS, estimator_class
from .renderer import Renderer
from .sampling import sample_pdf, stratified_samples
from .shading import shade

__all__ = [
    "SAMPLERS",
    "ESTIMATORS",
    "estimator_class",
    "build_renderer",
    "build_fields",
    "keeps_grid",
    "Renderer",
    "Estimator",
    "Setup",
    "Samples",
    "RadianceField",
    "DensityFn",
    "density_fn",
    "shade",
    "HierarchicalEstimator",
    "ProposalEstimator",
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
