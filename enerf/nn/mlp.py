"""The skip-connection MLP trunk shared by the NeRF and shape fields."""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import Tensor, nn

__all__ = ["skip_trunk"]


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
