"""An H.264 mp4 written frame by frame (``Mp4Writer``), published only when complete.

Encoding: libx264 with yuv420p needs even frame sizes. Odd sizes are padded by repeating the
last row / column (at most one pixel each way; never cropped, never rescaled), PNG frames keep
the exact size, and imageio-ffmpeg's 16-pixel macro-block resizing (and its warning) is off.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import imageio_ffmpeg
import numpy as np

from ..atomic import publish

__all__ = ["pad_to_even", "Mp4Writer"]


def pad_to_even(frame: np.ndarray) -> np.ndarray:
    """Repeat the last row / column so both sides are even (what yuv420p needs)."""
    h, w = frame.shape[:2]
    return np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge") if (h % 2 or w % 2) else frame


class Mp4Writer:
    """Stream uint8 RGB frames into an H.264 mp4 that appears at ``path`` only when complete."""

    def __init__(self, path: Path, fps: float, quality: float):
        self.path = Path(path)
        self.fps, self.quality = fps, quality
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = tempfile.mkstemp(prefix=f".{self.path.stem}.", suffix=".mp4", dir=self.path.parent)
        os.close(fd)
        self._gen = None
        self.size: tuple[int, int] | None = None  # (width, height) of the encoded frames
        self.frames = 0

    def write(self, frame: np.ndarray) -> None:
        """frame: np.ndarray  # [H, W, 3] uint8; every frame must have the first one's size."""
        frame = np.ascontiguousarray(pad_to_even(frame))
        size = (frame.shape[1], frame.shape[0])
        if self._gen is None:
            self.size = size
            self._gen = imageio_ffmpeg.write_frames(
                self.tmp, size, fps=self.fps, quality=self.quality, codec="libx264", macro_block_size=1,
                ffmpeg_log_level="error",
            )
            self._gen.send(None)
        elif size != self.size:
            raise ValueError(f"frame size {size} differs from the video's {self.size}")
        self._gen.send(frame)
        self.frames += 1

    def close(self) -> None:
        """Finish encoding and move the file into place."""
        if self._gen is None:
            raise ValueError(f"{self.path}: no frames were written")
        self._gen.close()
        publish(self.tmp, self.path)

    def abort(self) -> None:
        if self._gen is not None:
            try:
                self._gen.close()
            except Exception:  # the encoder may already be gone
                pass
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)
