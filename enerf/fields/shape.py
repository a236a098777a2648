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

from ..config import ShapeFieldConfig
from ..nn.encoding import PositionalEncoding
from ..nn.mlp import ConditionedMLP, MLPField, active_skips, skip_trunk

__all__ = ["ShapeField", "ISO_LEVEL"]

# kind -> (iso-level of the surface, side of the level where the solid is), for isosurface()
ISO_LEVEL = {"occupancy": (0.5, "above"), "sdf": (0.0, "below")}


class ShapeField(MLPField):
    """x -> occupancy logit or signed distance: an MLP with skips whose linear layers are
    ``ConditionedLinear``.

    Args:
        cfg: the network (``enerf.config.ShapeFieldConfig``, the home of defaults and checks):
            ``kind`` (occupancy or sdf), D = ``netdepth`` hidden layers of width ``netwidth``,
            ``skips`` (hidden indices after which gamma(x) is re-read; >= D are ignored),
            ``multires`` (0: raw coordinates), ``activation`` (relu, or softplus with beta 100,
            IGR's choice for smooth gradients) and the weight conditioning, as ``NeRFField``'s.
    """

    def __init__(self, cfg: ShapeFieldConfig = ShapeFieldConfig()) -> None:
        super().__init__()
        self.cfg = cfg
        self.kind = cfg.kind
        self.skips = active_skips(cfg.skips, cfg.netdepth)
        self.encoding = PositionalEncoding(cfg.multires)
        self.activation = nn.ReLU() if cfg.activation == "relu" else nn.Softplus(beta=100.0)
        mlp = ConditionedMLP("hidden", self.encoding.out_dim, cfg.netdepth, cfg.netwidth, self.skips,
                             {"output": (cfg.netwidth, 1)}, cfg.conditioning, cfg.conditioned_layers, cfg.init_weights,
                             detach_conditioner=cfg.detach_conditioner,
                             passes=cfg.conditioning_passes)
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
