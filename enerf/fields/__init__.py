"""Neural fields built from conditioned layers."""

from .nerf import NeRFField
from .shape import ShapeField

__all__ = ["NeRFField", "ShapeField"]
