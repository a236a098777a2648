"""``ConditionedConv2d``: ``nn.Conv2d`` whose kernel is conditioned in every forward pass.

The kernel w [out, in/groups, kh, kw] is conditioned as the matrix W = w.reshape(out,
in/groups · kh · kw) (one row per output channel, the layout of BNP's Algorithm 3), with the
same modes as ``ConditionedLinear`` (``enerf.nn.conditioning``): ``row`` scales each
(input channel, kernel offset) column of W to unit norm across the output channels, ``col``
each output channel's kernel; ``wn`` is torch's ``weight_norm(dim=0)`` (a gain per output
channel), ``ws`` standardizes each output channel's kernel (Qiao et al.'s convolutional WS).
κ of the layer (``condition_number``) is κ of that matrix.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .conditioners import ConditionedWeight, check_conditioning

__all__ = ["ConditionedConv2d"]


class ConditionedConv2d(ConditionedWeight, nn.Conv2d):
    """``nn.Conv2d`` that convolves with the conditioned kernel: y = conv(x, E w) + b.

    Same parameters, state-dict keys and default initialisation as ``nn.Conv2d``; ``fold()``
    returns the equivalent plain layer.

    Args:
        in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
        padding_mode, device, dtype: as ``nn.Conv2d``.
        conditioning, eps, detach_conditioner, passes: as ``ConditionedLinear`` (the mode
            "none" behaves as a plain convolution).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        conditioning: str = "none",
        eps: float = 1e-8,
        detach_conditioner: bool = False,
        passes: int = 1,
        device=None,
        dtype=None,
    ) -> None:
        check_conditioning(conditioning, eps, detach_conditioner, passes)
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, bias=bias, padding_mode=padding_mode, device=device, dtype=dtype)
        self._set_conditioning(conditioning, eps, detach_conditioner, passes)

    def forward(self, x: Tensor) -> Tensor:
        """x: Tensor  # [N, in_channels, H, W] (or unbatched) -> Tensor  # [N, out_channels, H', W']."""
        return self._conv_forward(x, self.conditioned_weight(), self.bias)

    @torch.no_grad()
    def fold(self) -> nn.Conv2d:
        """A plain ``nn.Conv2d`` with kernel E w (a detached copy) and the same bias and geometry."""
        plain = nn.Conv2d(
            self.in_channels, self.out_channels, self.kernel_size, stride=self.stride, padding=self.padding,
            dilation=self.dilation, groups=self.groups, bias=self.bias is not None, padding_mode=self.padding_mode,
            device=self.weight.device, dtype=self.weight.dtype,
        )
        plain.weight.copy_(self.conditioned_weight())
        if self.bias is not None:
            plain.bias.copy_(self.bias)
        return plain
