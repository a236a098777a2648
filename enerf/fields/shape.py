"""Occupancy and signed-distance networks (Occupancy Networks, DeepSDF, IGR) from conditioned layers.

Layers, in order (the names ``conditioned_layers`` and ``layer_names()`` use)::

    hidden.0 .. hidden.{D-1}   D layers of width W with ReLU (or softplus, beta=100); hidden.0
                               reads the encoded position gamma(x), and after hidden.s for every
                               s in ``skips`` gamma(x) is concatenated in front: [gamma(x), h]
    output                     W -> 1: an occupancy logit, or the signed distance

``conditioned_layers``: ``hidden`` (default), ``all``, ``none`` or comma-separated names.
``output`` stays plain by default because it has a single unit: under ``row`` it would become
sign(W) and lose its scale (see ``enerf.nn.conditioning``).

Output conventions: ``kind="occupancy"`` returns logits (probability = sigmoid; the surface is
the 0.5 level, inside where it is above); ``kind="sdf"`` returns the signed distance (negative
inside; the surface is the 0 level, inside where it is below).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..config import SHAPE_KINDS
from ..errors import ConfigError
from ..nn.encoding import PositionalEncoding
from ..nn.mlp import ConditionedMLP, MLPField, skip_trunk, valid_skips

__all__ = ["ShapeField", "ISO_LEVEL"]

# kind -> (iso-level of the surface, side of the level where the solid is), for isosurface()
ISO_LEVEL = {"occupancy": (0.5, "above"), "sdf": (0.0, "below")}


class ShapeField(MLPField):
    """x -> occupancy logit or signed distance: an MLP with skips whose linear layers are
    ``ConditionedLinear``.

    Args:
        kind: ``occupancy`` or ``sdf``.
        netdepth, netwidth: number D and width W of the hidden layers.
        skips: hidden indices after which gamma(x) is re-read (0..D-2; >= D are ignored).
        multires: positional-encoding frequencies (0: raw coordinates).
        activation: ``relu`` or ``softplus`` (beta = 100, IGR's choice for smooth gradients).
        conditioning, conditioned_layers, detach_conditioner, conditioning_passes,
        conditioning_eps: as in ``NeRFField``.
    """

    def __init__(
        self,
        kind: str = "occupancy",
        netdepth: int = 8,
        netwidth: int = 256,
        skips: tuple[int, ...] = (4,),
        multires: int = 0,
        activation: str = "relu",
        conditioning: str = "none",
        conditioned_layers: str = "hidden",
        detach_conditioner: bool = False,
        conditioning_passes: int = 1,
        conditioning_eps: float = 1e-8,
    ) -> None:
        super().__init__()
        if kind not in SHAPE_KINDS:
            raise ConfigError(f"--kind {kind!r} is not one of {', '.join(SHAPE_KINDS)}")
        if netdepth < 1 or netwidth < 1:
            raise ConfigError(f"--netdepth and --netwidth must be >= 1, got {netdepth} and {netwidth}")
        skips = valid_skips(skips, netdepth)
        if activation not in ("relu", "softplus"):
            raise ConfigError(f"--activation {activation!r} is not one of relu, softplus")
        self.kind = kind
        self.skips = skips
        self.encoding = PositionalEncoding(multires)
        self.activation = nn.ReLU() if activation == "relu" else nn.Softplus(beta=100.0)
        mlp = ConditionedMLP("hidden", self.encoding.out_dim, netdepth, netwidth, self.skips, {"output": (netwidth, 1)},
                             conditioning, conditioned_layers, eps=conditioning_eps,
                             detach_conditioner=detach_conditioner, passes=conditioning_passes)
        # Created in this order (seeded initialisation), under these names (checkpoints).
        self.hidden = mlp.trunk()
        self.output = mlp.layer("output")

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., 3] -> Tensor  # [...]: occupancy logit or signed distance."""
        return self.output(skip_trunk(self.encoding(x), self.hidden, self.activation, self.skips))[..., 0]

    def surface_value(self, x: Tensor) -> Tensor:
        """The quantity whose ``ISO_LEVEL[kind]`` level set is the surface: occupancy
        probability (sigmoid of the logit) or signed distance. x: [..., 3] -> [...]."""
        raw = self(x)
        return torch.sigmoid(raw) if self.kind == "occupancy" else raw

    def inside(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., 3] -> bool Tensor  # [...]: logit > 0, or sdf < 0."""
        raw = self(x)
        return raw > 0 if self.kind == "occupancy" else raw < 0
