"""A radiance field given by two functions: for tests, tools and checks of the renderers.

It has the methods a renderer asks of a field (``enerf.render.RadianceField``); its features
are the points themselves, so ``color`` sees where it is evaluated.
"""

from __future__ import annotations

from typing import Callable

from torch import Tensor

__all__ = ["AnalyticField"]


class AnalyticField:
    """sigma(points [..., 3]) -> density [...] >= 0; rgb(points [..., 3], viewdirs [..., 3]) -> [..., 3].

    ``calls`` counts the points sent to ``density`` and ``color`` (``{"density": n, "color": m}``).
    No noise: ``noise_std`` is ignored, and ``mean_density`` is ``sigma``.
    """

    def __init__(self, sigma: Callable[[Tensor], Tensor], rgb: Callable[[Tensor, Tensor], Tensor]) -> None:
        self.sigma, self.rgb = sigma, rgb
        self.calls = {"density": 0, "color": 0}

    def density(self, x: Tensor, noise_std: float = 0.0) -> tuple[Tensor, Tensor]:
        self.calls["density"] += x[..., 0].numel()
        return self.sigma(x), x

    def mean_density(self, x: Tensor, noise_std: float = 0.0) -> Tensor:
        return self.sigma(x)

    def color(self, features: Tensor, dirs: Tensor) -> Tensor:
        self.calls["color"] += features[..., 0].numel()
        return self.rgb(features, dirs)

    def __call__(self, x: Tensor, dirs: Tensor) -> tuple[Tensor, Tensor]:
        """(rgb, sigma) at ``x`` seen along ``dirs``, as ``NeRFField.forward``."""
        sigma, features = self.density(x)
        return self.color(features, dirs), sigma
