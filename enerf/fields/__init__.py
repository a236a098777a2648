"""Neural fields built from conditioned layers."""

from .analytic import AnalyticField
from .nerf import NeRFField
from .shape import ShapeField

__all__ = ["AnalyticField", "NeRFField", "ShapeField"]
