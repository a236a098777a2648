"""The visibility loss (``--visibility_loss``): density where no training camera looks is penalised.

Space that no training camera has in its frustum gets no gradient from the photos, so its density
is whatever helped elsewhere (a grid's shared planes carry it there); a view from outside the walk
then looks through it as fog. Nerfbusters (Warburg et al., 2023) penalise the density at points
that fewer than k training cameras see. Here, every step draws ``POINTS`` points uniformly in the
field's domain (the contracted box [-2, 2]^3 mapped back to the scene, or the field's ``grid_aabb``
without contraction), counts the training frusta holding each (``enerf.cameras.visibility``), and
adds ``weight`` x the mean of log(1 + density) over the points seen by fewer than
``--visibility_views`` cameras, for every density the run has (``densities`` of its fields: the
radiance field's, and each proposal level's). log(1 + sigma) has a gradient of at most 1 on a ReLU
or exp density, however dense the point.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..cameras.visibility import frustum_counts
from ..config import FieldConfig
from ..data.scene import Scene
from ..errors import ConfigError
from ..nn.contraction import CONTRACTED_BOX, uncontract

__all__ = ["VisibilityLoss", "POINTS"]

POINTS = 4096  # points drawn a step; about a tenth of the points a capture's training batch renders


class VisibilityLoss:
    """``weight`` x mean log(1 + density) at the drawn points fewer than ``min_views`` training cameras see.

    Raises:
        ConfigError: the scene's rays are in NDC (forward-facing LLFF scenes: no world-space frusta here).
    """

    def __init__(self, scene: Scene, field: FieldConfig, weight: float, min_views: int, device: torch.device,
                 points: int = POINTS) -> None:
        if scene.use_ndc:
            raise ConfigError("--visibility_loss needs a scene in world space; this one renders in NDC "
                              "(forward-facing): add --no_ndc, or leave --visibility_loss at 0", ("visibility_loss",))
        self.weight, self.min_views, self.points, self.device = weight, min_views, points, device
        self.poses = torch.as_tensor(scene.poses[scene.i_train], dtype=torch.float32, device=device)
        self.camera = (scene.height, scene.width, scene.focal)
        self.contraction = field.contraction
        box = CONTRACTED_BOX if field.contraction != "none" else field.grid_aabb
        self.lo = torch.tensor(box[:3], dtype=torch.float32, device=device)
        self.hi = torch.tensor(box[3:], dtype=torch.float32, device=device)

    def unseen(self, generator: torch.Generator) -> Tensor:
        """The points of this step that fewer than ``min_views`` training cameras see: Tensor  # [m, 3], m <= points."""
        u = torch.rand((self.points, 3), generator=generator, device=generator.device).to(self.device)
        y = self.lo + u * (self.hi - self.lo)
        if self.contraction == "mipnerf360":  # the contracted ball of radius 2 inside the box
            y = y[y.norm(dim=-1) < 1.99]
        elif self.contraction == "linf":  # the box itself; its outer 0.25 % a side onto 1.99, to map back finite
            y = y.clamp(-1.99, 1.99)
        x = uncontract(y, self.contraction)
        return x[frustum_counts(x, self.poses, *self.camera) < self.min_views]

    def __call__(self, fields: dict, generator: torch.Generator) -> Tensor:
        """The loss term: a scalar Tensor (0 when every drawn point is seen)."""
        x = self.unseen(generator)
        if x.shape[0] == 0:
            return torch.zeros((), device=self.device)
        terms = [torch.log1p(d).mean() for f in fields.values() for d in f.densities(x)]
        return self.weight * torch.stack(terms).mean()
