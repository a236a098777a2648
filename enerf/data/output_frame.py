"""The frame an export is written in (``--frame``): ``scene`` is the loader's normalised frame, ``world``
the capture's own (``Scene.scene_to_world``, a similarity: lengths scale by its factor, directions
rotate)."""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .scene import Scene

__all__ = ["OutputFrame"]


class OutputFrame:
    """Scene space -> the frame written: ``scene`` (identity) or ``world`` (``scene_to_world``)."""

    def __init__(self, scene: Scene, frame: str) -> None:
        if frame not in ("scene", "world"):
            raise ConfigError(f"frame must be scene or world, got {frame!r}", ("frame",))
        matrix = np.asarray(scene.scene_to_world, np.float64) if frame == "world" else np.eye(4)
        self.name = frame
        self.scale = float(np.cbrt(np.linalg.det(matrix[:3, :3])))
        self.rotation = matrix[:3, :3] / self.scale  # [3, 3] orthonormal
        self.translation = matrix[:3, 3]

    def points(self, p: np.ndarray) -> np.ndarray:
        """[..., 3] scene-space points -> [..., 3] in the frame."""
        return p @ (self.scale * self.rotation).T + self.translation

    def directions(self, d: np.ndarray) -> np.ndarray:
        """[..., 3] directions (normals) rotated into the frame."""
        return d @ self.rotation.T

    def pose(self, c2w: np.ndarray) -> np.ndarray:
        """[3, 4] camera-to-world -> [4, 4] in the frame, its rotation columns unit length."""
        out = np.eye(4)
        rot = self.rotation @ np.asarray(c2w, np.float64)[:3, :3]
        out[:3, :3] = rot / np.linalg.norm(rot, axis=0, keepdims=True)
        out[:3, 3] = self.points(np.asarray(c2w, np.float64)[:3, 3])
        return out
