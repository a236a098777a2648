"""The conditioned skip-connection MLP shared by the NeRF and shape fields.

``ConditionedMLP`` holds the layer table of such a network: a trunk ``<prefix>.0 ..
<prefix>.{D-1}`` of width W whose first layer reads the encoded input gamma(x) and which
re-reads gamma(x) after every layer in ``skips`` ([gamma(x), h]), plus the field's heads.
It decides which layers ``--conditioned_layers`` conditions and makes each as a
``ConditionedLinear``; the field creates them in its own order and keeps its attribute
names (``trunk.i`` in ``NeRFField``, ``hidden.i`` in ``ShapeField``), so checkpoints and
seeded initialisation are those of the fields before they shared this builder.
``skip_trunk`` runs such a trunk.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from .conditioning import ConditionedLinear, select_layers

__all__ = ["ConditionedMLP", "MLPField", "active_skips", "skip_trunk"]


def active_skips(skips: Iterable[int], netdepth: int) -> tuple[int, ...]:
    """The skips that act in a trunk of ``netdepth`` layers, sorted: as in nerf-pytorch, a skip at
    or beyond the last layer has no layer after it to feed and is inert (so the default
    skips=(4,) works for shallow nets). The configs refuse a skip at ``netdepth - 1``
    (``enerf.config.spec.check_skips``)."""
    return tuple(sorted(s for s in set(skips) if 0 <= s < netdepth - 1))


class ConditionedMLP:
    """The layer table of a conditioned skip MLP, and a factory for its layers.

    Args:
        prefix: trunk layer names are ``<prefix>.i`` (``trunk`` for NeRF, ``hidden`` for shapes).
        in_ch: width of the encoded input gamma(x).
        netdepth, netwidth: trunk depth D and width W.
        skips: trunk indices after which gamma(x) is re-read (see ``active_skips``).
        heads: name -> (fan_in, fan_out) of the layers after the trunk, in order.
        conditioning: ``none`` | ``row`` | ``col`` | ``rowcol`` for the selected layers.
        conditioned_layers: ``hidden`` (the trunk) | ``all`` | ``none`` | comma-separated names.
        init_weights: step-0 weights of the selected layers (``native`` | ``equilibrated`` |
            ``vanilla``, ``enerf.nn.conditioners.INIT_WEIGHTS``); the others stay native.
        layer_options: passed to every ConditionedLinear (``eps``, ``detach_conditioner``, ``passes``).

    Attributes:
        skips: the acting skips, sorted.
        shapes: name -> (fan_in, fan_out) of every layer, trunk first.
        selected: the names of the conditioned layers.
    """

    def __init__(
        self,
        prefix: str,
        in_ch: int,
        netdepth: int,
        netwidth: int,
        skips: Iterable[int],
        heads: dict[str, tuple[int, int]],
        conditioning: str = "none",
        conditioned_layers: str = "hidden",
        init_weights: str = "native",
        **layer_options: Any,
    ) -> None:
        self.skips = active_skips(skips, netdepth)
        self.trunk_names = [f"{prefix}.{i}" for i in range(netdepth)]
        self.shapes: dict[str, tuple[int, int]] = {}
        for i, name in enumerate(self.trunk_names):
            fan_in = in_ch if i == 0 else netwidth + (in_ch if (i - 1) in self.skips else 0)
            self.shapes[name] = (fan_in, netwidth)
        self.shapes.update(heads)
        self.selected = select_layers(conditioned_layers, list(self.shapes), self.trunk_names)
        self.conditioning = conditioning
        self.init_weights = init_weights
        self.options = layer_options

    def layer(self, name: str) -> ConditionedLinear:
        """A new layer ``name`` (conditioned iff selected)."""
        fan_in, fan_out = self.shapes[name]
        if name not in self.selected:
            return ConditionedLinear(fan_in, fan_out, conditioning="none", **self.options)
        return ConditionedLinear(fan_in, fan_out, conditioning=self.conditioning, init_weights=self.init_weights,
                                 **self.options)

    def trunk(self) -> nn.ModuleList:
        """New trunk layers ``<prefix>.0 .. <prefix>.{D-1}``, made in order."""
        return nn.ModuleList(self.layer(name) for name in self.trunk_names)


def skip_trunk(encoded: Tensor, layers: Iterable[nn.Module], activation: Callable[[Tensor], Tensor],
               skips: Iterable[int]) -> Tensor:
    """Run ``layers`` with ``activation``, re-reading the input after each layer in ``skips``.

    Args:
        encoded: Tensor  # [..., d_in] the (encoded) input
        skips: indices i after which the output becomes cat([encoded, h]) (NeRF's skip at 4)

    Returns:
        Tensor  # [..., width of the last layer (+ d_in if it is a skip)]
    """
    skips = set(skips)
    h = encoded
    for i, layer in enumerate(layers):
        h = activation(layer(h))
        if i in skips:
            h = torch.cat([encoded, h], dim=-1)
    return h


class MLPField(nn.Module):
    """Base of the fields built with ``ConditionedMLP``: their layer names."""

    def layer_names(self) -> list[str]:
        """Names of the linear layers, input to output (e.g. trunk.0, ..., rgb_head)."""
        return [name for name, m in self.named_modules() if isinstance(m, nn.Linear)]
