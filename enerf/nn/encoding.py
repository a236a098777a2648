"""NeRF's sinusoidal positional encoding."""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["PositionalEncoding"]


class PositionalEncoding(nn.Module):
    """gamma(x) = [x, sin(2^0 x), cos(2^0 x), ..., sin(2^{L-1} x), cos(2^{L-1} x)].

    Ordering as nerf-pytorch: for each frequency, sin then cos of all input coordinates.
    ``n_freqs = 0`` gives the identity (when ``include_input``).
    """

    def __init__(self, n_freqs: int, in_dim: int = 3, include_input: bool = True) -> None:
        super().__init__()
        self.n_freqs = int(n_freqs)
        self.in_dim = int(in_dim)
        self.include_input = include_input
        self.register_buffer("freqs", 2.0 ** torch.arange(self.n_freqs, dtype=torch.float32), persistent=False)

    @property
    def out_dim(self) -> int:
        return self.in_dim * (int(self.include_input) + 2 * self.n_freqs)

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., in_dim] -> Tensor  # [..., out_dim]."""
        parts = [x] if self.include_input else []
        if self.n_freqs:
            scaled = x[..., None, :] * self.freqs[:, None]  # [..., L, in_dim]
            both = torch.stack([torch.sin(scaled), torch.cos(scaled)], dim=-2)  # [..., L, 2, in_dim]
            parts.append(both.flatten(-3))
        return torch.cat(parts, dim=-1)
