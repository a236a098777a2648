"""Camera path files: enerf's own (``CameraPath``: ``enerf view`` saves it, ``enerf render --path
FILE`` renders it) and, through ``enerf.cameras.nerfstudio_path``, nerfstudio's ``camera_path.json``.

The frames between keyframes come from ``enerf.cameras.paths.keyframe_path``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from .nerfstudio_path import from_nerfstudio
from .paths import keyframe_path

__all__ = ["CAMERA_PATH_FORMAT", "CameraPath", "read_camera_path"]


CAMERA_PATH_FORMAT = "enerf-camera-path"


@dataclass(frozen=True)
class CameraPath:
    """A camera path file (``enerf view`` writes it, ``enerf render --path FILE`` renders it).

    The file is JSON::

        {"format": "enerf-camera-path", "version": 2,
         "width": 504, "height": 378, "fov_y": 53.1,      # optional: the frame size, vertical fov in degrees
         "frames": 121, "fps": 30, "smoothness": 1.0,     # frames through the keyframes (0: the keyframes)
         "keyframes": [{"c2w": [[r, u, b, t] x 3 rows],   # scene space, columns [right, up, back, t]
                        "fov_y": 50.0,                    # optional: this keyframe's vertical fov (degrees)
                        "seconds": 2.0}, ...]}            # optional: time from this keyframe to the next

    Frames are at even times along the keyframes (``keyframe_path``: ``smoothness`` 1 is a
    Catmull-Rom spline, 0 straight lines; without ``seconds``, 1 s between keyframes), each with
    the field of view interpolated between its keyframes' ``fov_y``. ``frames`` equal to the
    number of keyframes (or 0) renders the keyframes themselves. Version 1 files (no per-keyframe
    fields, no smoothness) read as before: Catmull-Rom, evenly in keyframes, one field of view.
    """

    keyframes: np.ndarray  # [K, 3, 4] float64 camera-to-world, scene space
    frames: int  # frames to render (0: one per keyframe)
    width: int | None = None  # frame size (None: the scene's image size)
    height: int | None = None
    fov_y: float | None = None  # vertical field of view in degrees (None: the scene's)
    fps: float | None = None
    fovs: np.ndarray | None = None  # [K] vertical field of view of each keyframe in degrees (None: ``fov_y``)
    seconds: np.ndarray | None = None  # [K] time from each keyframe to the next (None: 1 s each)
    smoothness: float = 1.0  # 1: Catmull-Rom through the keyframes, 0: straight lines

    def _path(self) -> tuple[np.ndarray, np.ndarray | None]:
        if self.frames in (0, len(self.keyframes)):
            return self.keyframes, self.fovs
        return keyframe_path(self.keyframes, self.frames, self.seconds, self.fovs, self.smoothness)

    def poses(self) -> np.ndarray:
        """Camera-to-world of every frame: np.ndarray  # [M, 3, 4] float32."""
        return self._path()[0].astype(np.float32)

    def frame_fovs(self) -> np.ndarray | None:
        """Vertical field of view of every frame in degrees: np.ndarray  # [M] (None: ``fov_y`` for all)."""
        fovs = self._path()[1]
        return None if fovs is None else np.asarray(fovs, dtype=np.float64)

    def to_dict(self) -> dict:
        """The file's JSON object (version 2)."""
        keys = []
        for k, c2w in enumerate(np.asarray(self.keyframes, dtype=np.float64)[:, :3, :4]):
            entry = {"c2w": c2w.tolist()}
            if self.fovs is not None:
                entry["fov_y"] = float(self.fovs[k])
            if self.seconds is not None:
                entry["seconds"] = float(self.seconds[k])
            keys.append(entry)
        out = {"format": CAMERA_PATH_FORMAT, "version": 2, "frames": int(self.frames),
               "smoothness": float(self.smoothness), "keyframes": keys}
        for key, value in (("width", self.width), ("height", self.height), ("fov_y", self.fov_y), ("fps", self.fps)):
            if value is not None:
                out[key] = value
        return out


def read_camera_path(path: str | Path, keyframes: bool = False) -> CameraPath:
    """Read a camera path file: enerf's (``CameraPath``) or nerfstudio's ``camera_path.json``
    (``enerf.cameras.nerfstudio_path``: its rendered frames, or with ``keyframes`` its keyframes
    where it has them). ConfigError (one line, naming ``path``) when it is missing or malformed."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"path {str(path)!r} is neither a camera path name nor a file; save one from enerf view "
                          "(Keyframes, Save) or use spiral, orbit, test, train, interp, ellipse", ("path",))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not JSON ({str(exc).splitlines()[0]})") from None
    if isinstance(data, dict) and data.get("format") is None and "camera_path" in data:
        try:
            return CameraPath(**from_nerfstudio(data, keyframes))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{path}: malformed nerfstudio camera path ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != CAMERA_PATH_FORMAT:
        raise ConfigError(f"{path} is not a camera path file (no \"format\": \"{CAMERA_PATH_FORMAT}\", nor "
                          "nerfstudio's \"camera_path\")")
    try:
        keys = np.asarray([k["c2w"] for k in data["keyframes"]], dtype=np.float64)
        if keys.ndim != 3 or keys.shape[0] < 1 or keys.shape[1] not in (3, 4) or keys.shape[2] != 4:
            raise ValueError(f"keyframes of shape {keys.shape[1:]}, not 3 x 4")
        if not np.isfinite(keys).all():
            raise ValueError("non-finite numbers in keyframes")
        frames = int(data.get("frames", 0))
        if frames < 0:
            raise ValueError(f"frames = {frames}")
        width, height = data.get("width"), data.get("height")
        if (width is None) != (height is None) or (width is not None and (int(width) < 1 or int(height) < 1)):
            raise ValueError("width and height must both be given and positive")
        fov_y = data.get("fov_y")
        if fov_y is not None and not 0.0 < float(fov_y) < 180.0:
            raise ValueError(f"fov_y = {fov_y} degrees")
        fovs = _per_keyframe(data["keyframes"], "fov_y", fov_y)
        if fovs is not None and not ((fovs > 0) & (fovs < 180)).all():
            raise ValueError("a keyframe's fov_y is not in (0, 180) degrees")
        seconds = _per_keyframe(data["keyframes"], "seconds", 1.0)
        if seconds is not None and not (seconds[:-1] > 0).all():
            raise ValueError("a keyframe's seconds is not positive")
        smoothness = float(data.get("smoothness", 1.0))
        if not 0.0 <= smoothness <= 1.0:
            raise ValueError(f"smoothness = {smoothness}, not in [0, 1]")
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: malformed camera path ({exc})") from None
    return CameraPath(keys[:, :3, :4], frames, None if width is None else int(width),
                      None if height is None else int(height), None if fov_y is None else float(fov_y),
                      data.get("fps"), fovs, seconds, smoothness)


def _per_keyframe(entries: list, key: str, default) -> np.ndarray | None:
    """np.ndarray  # [K] of ``entry[key]`` (``default`` where an entry has none); None when no entry has it."""
    if not any(key in e for e in entries):
        return None
    if default is None and not all(key in e for e in entries):
        raise ValueError(f"some keyframes have {key} and some do not, and the file names no default")
    values = np.asarray([float(e.get(key, default)) for e in entries], dtype=np.float64)
    if not np.isfinite(values).all():
        raise ValueError(f"non-finite {key}")
    return values
