"""enerf: neural radiance fields and neural shapes with equilibrated weight conditioning."""

__version__ = "0.1.0"
__all__ = ["__version__"]
