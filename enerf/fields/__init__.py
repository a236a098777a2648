"""Neural fields built from conditioned layers."""

from .nerf import NeRFField

__all__ = ["NeRFField"]
