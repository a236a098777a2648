"""Radiance fields: the NeRF MLP built from conditioned layers (``NeRFField``), the proposal
networks' density fields and ``AnalyticField`` (a field given by two functions, for checks of the
renderers). The shape networks are ``enerf.shapes.field``."""

from .analytic import AnalyticField
from .nerf import NeRFField

__all__ = ["AnalyticField", "NeRFField"]
