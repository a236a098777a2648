"""Data: rays, the Scene container, the LLFF loader, the synthetic demo scene and camera paths.

Import the submodules directly (``enerf.data.llff``, ``enerf.data.synthetic``...); only
the light-weight ray and scene types are re-exported here.
"""

from .rays import Rays, flatten_rays, index_rays, make_rays, ndc_rays, pixel_rays
from .scene import Scene

__all__ = ["Rays", "Scene", "pixel_rays", "ndc_rays", "make_rays", "flatten_rays", "index_rays"]
