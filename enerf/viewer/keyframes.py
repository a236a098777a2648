"""The camera-path editor's state: keyframes (pose, field of view, seconds to the next one), the
smoothness and frame rate of the path, and its files (enerf's camera path file and nerfstudio's
``camera_path.json``). Plain numpy; the panel that edits it is ``editor.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_json
from ..cameras.path_file import CameraPath, read_camera_path
from ..cameras.nerfstudio_path import to_nerfstudio
from ..errors import ConfigError

__all__ = ["Keyframe", "KeyframeList", "PATH_FORMATS"]

PATH_FORMATS = ("enerf", "nerfstudio")  # camera path files the editor saves and loads


@dataclass
class Keyframe:
    """One keyframe of the path."""

    c2w: np.ndarray  # [3, 4] camera-to-world, scene space, columns [right, up, back, t]
    fov: float  # vertical field of view in degrees
    seconds: float  # time from this keyframe to the next (the last one's is kept, unused)


@dataclass
class KeyframeList:
    """The keyframes in path order, and the path's settings.

    ``size``: (width, height) of the frames, the browser's view when the first keyframe was
    added (None: none yet); ``smoothness``: 1 Catmull-Rom through the keyframes, 0 straight
    lines; ``fps``: frames per second of the rendered path.
    """

    keys: list[Keyframe] = field(default_factory=list)
    size: tuple[int, int] | None = None
    smoothness: float = 1.0
    fps: float = 30.0

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, c2w: np.ndarray, fov: float, seconds: float, size: tuple[int, int]) -> int:
        """Append a keyframe; returns its index."""
        if self.size is None:
            self.size = (int(size[0]), int(size[1]))
        self.keys.append(Keyframe(np.asarray(c2w, dtype=np.float64)[:3, :4].copy(), float(fov), float(seconds)))
        return len(self.keys) - 1

    def delete(self, index: int) -> None:
        self._check(index)
        del self.keys[index]
        if not self.keys:
            self.size = None

    def move(self, index: int, offset: int) -> int:
        """Move keyframe ``index`` by ``offset`` places (clamped to the list); returns its new index."""
        self._check(index)
        new = min(max(index + offset, 0), len(self.keys) - 1)
        self.keys.insert(new, self.keys.pop(index))
        return new

    def _check(self, index: int) -> None:
        if not 0 <= index < len(self.keys):
            raise ConfigError(f"no keyframe {index + 1} (there are {len(self.keys)})")

    def frames(self) -> int:
        """Frames of the rendered path: one per ``1 / fps`` of its duration, the last keyframe included."""
        if len(self.keys) < 2:
            return len(self.keys)
        return int(round(self.seconds() * self.fps)) + 1

    def seconds(self) -> float:
        """The path's duration: the keyframes' seconds but the last one's."""
        return float(sum(k.seconds for k in self.keys[:-1]))

    def camera_path(self, frames: int | None = None) -> CameraPath:
        """The path as a ``CameraPath`` (``frames``: override the frame count)."""
        if not self.keys:
            raise ConfigError("no keyframes yet: move the camera and press Add keyframe")
        width, height = self.size
        fovs = np.asarray([k.fov for k in self.keys])
        return CameraPath(np.stack([k.c2w for k in self.keys]), self.frames() if frames is None else int(frames),
                          width, height, float(fovs[0]), self.fps, fovs, np.asarray([k.seconds for k in self.keys]),
                          self.smoothness)

    def save(self, path: Path, fmt: str = "enerf", frames: int | None = None) -> Path:
        """Write the path to ``path`` as ``fmt`` (``enerf``: ``CameraPath``'s file; ``nerfstudio``:
        its ``camera_path.json``), atomically; returns ``path``."""
        if fmt not in PATH_FORMATS:
            raise ConfigError(f"camera path format {fmt!r} is not one of {', '.join(PATH_FORMATS)}")
        cam = self.camera_path(frames)
        data = cam.to_dict() if fmt == "enerf" else to_nerfstudio(cam, cam.width, cam.height, cam.fov_y)
        atomic_write_json(path, data)
        return path

    def load(self, path: Path, default_fov: float, size: tuple[int, int]) -> None:
        """Replace the keyframes with those of a camera path file (enerf's or nerfstudio's; a
        nerfstudio file without keyframes gives its frames)."""
        cam = read_camera_path(path, keyframes=True)
        fovs = cam.fovs if cam.fovs is not None else np.full(len(cam.keyframes), cam.fov_y or default_fov)
        seconds = cam.seconds if cam.seconds is not None else np.ones(len(cam.keyframes))
        self.keys = [Keyframe(np.asarray(c2w, dtype=np.float64), float(f), float(s))
                     for c2w, f, s in zip(cam.keyframes, fovs, seconds)]
        self.size = (cam.width, cam.height) if cam.width is not None else (int(size[0]), int(size[1]))
        self.smoothness = float(cam.smoothness)
        if cam.fps:
            self.fps = float(cam.fps)
        elif cam.frames > 1 and len(self.keys) > 1:  # a version-1 file: its frames over 1 s per keyframe
            self.fps = (cam.frames - 1) / self.seconds()

    def summary(self) -> str:
        """Markdown: one line per keyframe, and the path's duration."""
        if not self.keys:
            return "no keyframes"
        lines = [f"{k + 1}. fov {key.fov:.1f}°" + (f", {key.seconds:g} s to {k + 2}" if k + 1 < len(self.keys) else "")
                 for k, key in enumerate(self.keys)]
        return "\n".join(lines) + f"\n\n{self.seconds():g} s, {self.frames()} frames at {self.fps:g} fps"

