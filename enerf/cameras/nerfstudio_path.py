"""nerfstudio's ``camera_path.json`` (what ``ns-viewer`` saves and ``ns-render camera-path`` reads),
both ways.

The file (nerfstudio's viewer, ``render_panel.py``; read by ``get_path_from_json``)::

    {"camera_type": "perspective", "render_width": 640, "render_height": 480, "fps": 30, "seconds": 4,
     "smoothness_value": 0.5, "is_cycle": false, "default_fov": 50, "default_transition_sec": 2,
     "keyframes": [{"matrix": [16 numbers], "fov": 50, "aspect": 1.33,
                    "override_transition_enabled": false, "override_transition_sec": null}, ...],
     "camera_path": [{"camera_to_world": [16 numbers], "fov": 50, "aspect": 1.33}, ...]}

``matrix`` and ``camera_to_world`` are 4 x 4 camera-to-world matrices flattened row by row, with
the camera axes [right, up, back] (OpenGL, as enerf's poses); ``fov`` is the vertical field of
view in degrees (``focal = height / 2 / tan(fov / 2)``). ``camera_path`` holds every frame
rendered; ``keyframes`` what the viewer's editor holds. Poses are taken to be in enerf's scene
frame (the frame of ``Scene.poses``, the viewer's and ``enerf render``'s); nerfstudio's own
dataparser transform is not applied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .paths import to_homogeneous

if TYPE_CHECKING:  # a type only: path_file reads these files through from_nerfstudio
    from .path_file import CameraPath

__all__ = ["to_nerfstudio", "from_nerfstudio"]


def _flat(c2w: np.ndarray) -> list[float]:
    return to_homogeneous(np.asarray(c2w, dtype=np.float64)[:3, :4]).reshape(16).tolist()


def _matrix(values) -> np.ndarray:
    m = np.asarray(values, dtype=np.float64)
    if m.size != 16 or not np.isfinite(m).all():
        raise ValueError(f"a camera matrix of {m.size} numbers, not 16 finite ones")
    return m.reshape(4, 4)[:3, :4]


def _fields(*values) -> dict:
    """``CameraPath``'s fields by name, in its order."""
    names = ("keyframes", "frames", "width", "height", "fov_y", "fps", "fovs", "seconds", "smoothness")
    return dict(zip(names, values))


def to_nerfstudio(path: CameraPath, width: int, height: int, fov_y: float) -> dict:
    """nerfstudio's ``camera_path.json`` object of ``path``: its keyframes (matrix, fov, the
    time to the next keyframe), smoothness, and every frame ``path.poses()`` renders.

    Args:
        width, height, fov_y: the frame size and the vertical field of view (degrees) where
            ``path`` names none.
    """
    width, height = int(path.width or width), int(path.height or height)
    aspect = width / height
    default_fov = float(path.fov_y or fov_y)
    fovs = path.fovs if path.fovs is not None else np.full(len(path.keyframes), default_fov)
    seconds = path.seconds if path.seconds is not None else np.ones(len(path.keyframes))
    frame_fovs = path.frame_fovs()
    poses = path.poses().astype(np.float64)
    if frame_fovs is None:
        frame_fovs = np.full(len(poses), default_fov)
    fps = float(path.fps or 30.0)
    keyframes = [{"matrix": _flat(c2w), "fov": float(fovs[k]), "aspect": aspect,
                  "override_transition_enabled": True, "override_transition_sec": float(seconds[k])}
                 for k, c2w in enumerate(path.keyframes)]
    return {"camera_type": "perspective", "render_width": width, "render_height": height, "fps": fps,
            "seconds": float(np.sum(seconds[:-1])) if len(seconds) > 1 else len(poses) / fps,
            "smoothness_value": float(path.smoothness), "is_cycle": False, "default_fov": default_fov,
            "default_transition_sec": float(seconds[0]), "keyframes": keyframes,
            "camera_path": [{"camera_to_world": _flat(c2w), "fov": float(f), "aspect": aspect}
                            for c2w, f in zip(poses, frame_fovs)]}


def from_nerfstudio(data: dict, keyframes: bool = False) -> dict:
    """The fields of a ``CameraPath`` (``CameraPath(**fields)``) from nerfstudio's ``camera_path.json``
    object ``data``.

    Default: its ``camera_path`` frames, each rendered as it is (``frames`` = their number, each
    with its own field of view). ``keyframes``: its ``keyframes`` (fov, transition seconds,
    ``smoothness_value``), for editing, where it has any; else the frames.

    Raises:
        KeyError, TypeError, ValueError: not such a file (the caller names it in one line).
    """
    width, height = int(data["render_width"]), int(data["render_height"])
    if width < 1 or height < 1:
        raise ValueError(f"render size {width} x {height}")
    fps = float(data.get("fps") or 30.0)
    default_fov = float(data.get("default_fov") or 50.0)
    keys = data.get("keyframes") or []
    if keyframes and keys:
        default_sec = float(data.get("default_transition_sec") or 1.0)
        poses = np.stack([_matrix(k["matrix"]) for k in keys])
        fovs = np.asarray([float(k.get("fov", default_fov)) for k in keys])
        seconds = np.asarray([float(k["override_transition_sec"]) if k.get("override_transition_enabled")
                              and k.get("override_transition_sec") else default_sec for k in keys])
        smoothness = min(max(float(data.get("smoothness_value", 1.0)), 0.0), 1.0)
        frames = max(int(round(float(np.sum(seconds[:-1])) * fps)) + 1, 1) if len(keys) > 1 else 1
        return _fields(poses, frames, width, height, float(fovs[0]), fps, fovs, seconds, smoothness)
    cams = data["camera_path"]
    if not cams:
        raise ValueError("no camera_path frames (and no keyframes)")
    poses = np.stack([_matrix(c["camera_to_world"]) for c in cams])
    fovs = np.asarray([float(c.get("fov", default_fov)) for c in cams])
    if not ((fovs > 0) & (fovs < 180)).all():
        raise ValueError("a frame's fov is not in (0, 180) degrees")
    return _fields(poses, len(poses), width, height, float(fovs[0]), fps, fovs, np.full(len(poses), 1.0 / fps), 0.0)
