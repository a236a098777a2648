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

from ..config import SHAPE_KINDS, ShapeFieldConfig
from ..errors import ConfigError
from ..nn.conditioning import ConditionedLinear, select_layers
from ..nn.encoding import PositionalEncoding
from ..nn.mlp import skip_trunk

__all__ = ["ShapeField", "ISO_LEVEL"]

# kind -> (iso-level of the surface, side of the level where the solid is), for isosurface()
ISO_LEVEL = {"occupancy": (0.5, "above"), "sdf": (0.0, "below")}


class ShapeField(nn.Module):
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
        bad = [s for s in skips if s < 0 or s == netdepth - 1]
        if bad:
            raise ConfigError(
                f"--skips {', '.join(map(str, bad))} invalid for --netdepth {netdepth}: a skip must be in "
                f"0..{netdepth - 2} (or >= {netdepth}, which is ignored)"
            )
        if activation not in ("relu", "softplus"):
            raise ConfigError(f"--activation {activation!r} is not one of relu, softplus")
        self.kind = kind
        self.skips = tuple(sorted(int(s) for s in skips if s < netdepth - 1))
        self.encoding = PositionalEncoding(multires)
        self.activation = nn.ReLU() if activation == "relu" else nn.Softplus(beta=100.0)
        in_ch = self.encoding.out_dim
        shapes = {}
        for i in range(netdepth):
            shapes[f"hidden.{i}"] = (in_ch if i == 0 else netwidth + (in_ch if (i - 1) in self.skips else 0), netwidth)
        shapes["output"] = (netwidth, 1)
        selected = select_layers(conditioned_layers, list(shapes), [f"hidden.{i}" for i in range(netdepth)])

        def make(name: str) -> ConditionedLinear:
            fan_in, fan_out = shapes[name]
            return ConditionedLinear(
                fan_in, fan_out,
                conditioning=conditioning if name in selected else "none",
                eps=conditioning_eps, detach_conditioner=detach_conditioner, passes=conditioning_passes,
            )

        self.hidden = nn.ModuleList(make(f"hidden.{i}") for i in range(netdepth))
        self.output = make("output")

    @classmethod
    def from_config(cls, cfg: ShapeFieldConfig) -> "ShapeField":
        return cls(
            kind=cfg.kind,
            netdepth=cfg.netdepth,
            netwidth=cfg.netwidth,
            skips=tuple(cfg.skips),
            multires=cfg.multires,
            activation=cfg.activation,
            conditioning=cfg.conditioning,
            conditioned_layers=cfg.conditioned_layers,
            detach_conditioner=cfg.detach_conditioner,
            conditioning_passes=cfg.conditioning_passes,
            conditioning_eps=cfg.conditioning_eps,
        )

    def layer_names(self) -> list[str]:
        """Names of the linear layers, input to output (hidden.0, ..., output)."""
        return [name for name, m in self.named_modules() if isinstance(m, nn.Linear)]

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
