"""The networks a run trains, each a function of a point or of a photo: the NeRF MLP built from
conditioned layers (``NeRFField``), the proposal networks' density fields (``proposal``), the shape
networks (``ShapeField``: occupancy / SDF), and the per-photo colour transforms the radiance is seen
through (``appearance.Appearance``); plus ``AnalyticField`` (a field given by two functions, for checks
of the renderers)."""

from .analytic import AnalyticField
from .nerf import NeRFField
from .shape import ShapeField

__all__ = ["AnalyticField", "NeRFField", "ShapeField"]
