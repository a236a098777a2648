"""NeRF's sinusoidal positional encoding (nerf-pytorch ``Embedder``)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..errors import ConfigError

__all__ = ["PositionalEncoding"]


class PositionalEncoding(nn.Module):
    """gamma(x) = [x, sin(2^0 x), cos(2^0 x), ..., sin(2^{L-1} x), cos(2^{L-1} x)].

    Ordering as nerf-pytorch (log-sampled bands 2^0 .. 2^{L-1}, no factor pi): the input,
    then for each frequency the sin of all coordinates followed by their cos.
    ``n_freqs = 0`` is the identity.

    Args:
        n_freqs: L, the number of frequency bands (nerf-pytorch's ``multires``).
        include_input: put x itself first.
        in_dim: size of the last input axis (3 for positions and view directions).
    """

    def __init__(self, n_freqs: int, include_input: bool = True, in_dim: int = 3) -> None:
        super().__init__()
        if n_freqs < 0 or (n_freqs == 0 and not include_input):
            raise ConfigError(
                f"positional encoding needs n_freqs >= 0 and a non-empty output, got n_freqs={n_freqs}, "
                f"include_input={include_input}"
            )
        self.n_freqs = int(n_freqs)
        self.in_dim = int(in_dim)
        self.include_input = bool(include_input)
        self.register_buffer("freqs", 2.0 ** torch.arange(self.n_freqs, dtype=torch.float32), persistent=False)

    @property
    def out_dim(self) -> int:
        return self.in_dim * (int(self.include_input) + 2 * self.n_freqs)

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [..., in_dim] -> Tensor  # [..., out_dim]."""
        parts = [x] if self.include_input else []
        if self.n_freqs:
            scaled = x[..., None, :] * self.freqs.to(x.dtype)[:, None]  # [..., L, in_dim]
            both = torch.stack([torch.sin(scaled), torch.cos(scaled)], dim=-2)  # [..., L, 2, in_dim]
            parts.append(both.flatten(-3))
        return torch.cat(parts, dim=-1)

    def extra_repr(self) -> str:
        return f"n_freqs={self.n_freqs}, include_input={self.include_input}, in_dim={self.in_dim}"
