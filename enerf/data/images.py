"""A scene's images kept as their files' 8-bit codes, decoded to float32 when read.

A float32 RGB image takes 12 bytes a pixel; the 8-bit codes it came from take 3 (4 with
alpha). ``Images`` keeps the codes and decodes through a lookup table built with the
loaders' own arithmetic (``code / 255``, then ``rgb * a + background * (1 - a)`` for RGBA), so
every value read is bit-identical to what the loaders produced as float32 arrays, on any
device. Images the LLFF and Blender loaders had to resample (``--factor`` block averages, 16-bit
files) are kept as float32, as before; the nerfstudio loader, which resamples every image it
undistorts, rounds them to 8-bit codes (a capture's photos are many and large).

``Images`` reads like the float32 array ``[N, H, W, 3]`` it stands for: ``images[i]``,
``images[list]``, ``images.shape``, ``images.dtype`` and ``np.asarray(images)`` all give
decoded float32 values; training batches read single pixels (``tensors`` + ``decode``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["Images", "code_table"]


def code_table(background: float | None) -> np.ndarray:
    """The float32 value of every 8-bit code, with the loaders' arithmetic.

    Args:
        background: None: RGB codes, value = code / 255 (table [256]). A number: RGBA codes
            composited on it, value = (c / 255) * (a / 255) + background * (1 - a / 255),
            indexed by ``c * 256 + a`` (table [65536]).

    Returns:
        np.ndarray  # [256] or [65536] float32
    """
    values = np.arange(256, dtype=np.uint8).astype(np.float32) / 255.0  # as read_image / read_rgba
    if background is None:
        return values
    rgb, alpha = values[:, None], values[None, :]
    return (rgb * alpha + background * (1.0 - alpha)).reshape(-1)  # as load_blender composites


class Images:
    """Images ``[N, H, W, 3]`` with values in [0, 1], stored compactly (module docstring).

    Args:
        data: np.ndarray  # [N, H, W, 3] uint8 codes (value code / 255), [N, H, W, 4] uint8
            RGBA codes composited on ``background``, or [N, H, W, 3] float32 values (kept as they are).
        background: for RGBA codes, the colour they are composited on (1.0 white, 0.0 black).
    """

    def __init__(self, data: np.ndarray, background: float | None = None) -> None:
        if data.ndim != 4:
            raise ValueError(f"Images: expected [N, H, W, C] data, got shape {data.shape}")
        channels = 4 if background is not None else 3
        if data.dtype == np.uint8 and data.shape[3] == channels:
            self._table = code_table(background)
        elif data.dtype == np.float32 and data.shape[3] == 3 and background is None:
            self._table = None
        else:
            raise ValueError(f"Images: expected uint8 codes with {channels} channels or float32 RGB, got {data.dtype} "
                             f"data of shape {data.shape} (background {background})")
        self.data = data
        self.background = background
        self._tensors: dict[str, tuple[Tensor, Tensor | None]] = {}

    @classmethod
    def of(cls, images: "Images | np.ndarray") -> "Images":
        """``images`` as ``Images``: uint8 RGB arrays become codes, other arrays float32 values."""
        if isinstance(images, Images):
            return images
        images = np.asarray(images)
        return cls(images if images.dtype == np.uint8 else images.astype(np.float32, copy=False))

    # ------------------------------------------------------------------ the float32 array it stands for
    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (*self.data.shape[:3], 3)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def ndim(self) -> int:
        return 4

    @property
    def nbytes(self) -> int:
        """Bytes held (codes, or float32 values), not the decoded size."""
        return int(self.data.nbytes)

    @property
    def is_codes(self) -> bool:
        return self._table is not None

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __getitem__(self, index) -> np.ndarray:
        """Decoded float32 values of ``data[index]`` (any numpy index on the leading axes)."""
        return self.decode(self.data[index])

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codes [..., C] (as ``data``) -> float32 values [..., 3]; float32 data is returned as it is."""
        if self._table is None:
            return codes
        if self.background is None:
            return self._table[codes]
        return self._table[(codes[..., :3].astype(np.intp) << 8) | codes[..., 3:]]

    # ------------------------------------------------------------------ single pixels, as tensors
    def tensors(self, device: torch.device | str) -> tuple[Tensor, Tensor | None]:
        """``(data, table)`` as tensors on ``device`` (shared with numpy on the CPU; copied once to
        other devices): what ``decode_pixels`` reads from."""
        key = str(torch.device(device))
        if key not in self._tensors:
            data = torch.from_numpy(np.ascontiguousarray(self.data)).to(device)
            table = None if self._table is None else torch.from_numpy(self._table).to(device)
            self._tensors[key] = (data, table)
        return self._tensors[key]

    def pixels(self, view: Tensor, y: Tensor, x: Tensor, device: torch.device | str = "cpu") -> Tensor:
        """Decoded colours of pixels (view, row, column).

        Args:
            view, y, x: Tensor  # [n] int64, on ``device``.

        Returns:
            Tensor  # [n, 3] float32, bit-identical to ``images[view, y, x]``.
        """
        data, table = self.tensors(device)
        n_views, height, width, channels = data.shape
        flat = (view * height + y) * width + x
        codes = data.reshape(-1, channels).index_select(0, flat)  # [n, C]; far faster than data[view, y, x]
        if table is None:
            return codes
        if self.background is None:
            return table.index_select(0, codes.reshape(-1).long()).reshape(-1, 3)
        codes = codes.long()
        return table.index_select(0, (codes[:, :3] * 256 + codes[:, 3:]).reshape(-1)).reshape(-1, 3)
