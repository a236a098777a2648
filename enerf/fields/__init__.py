"""Radiance fields: the NeRF MLP built from conditioned layers (``NeRFField``), the proposal
networks' density fields and ``AnalyticField`` (a field given by two functions, for checks of the
renderers). The shape networks: ``shape.ShapeField`` (occupancy / SDF)."""

from .analytic import AnalyticField
from .nerf import NeRFField
from .shape import ShapeField

__all__ = ["AnalyticField", "NeRFField", "ShapeField"]
