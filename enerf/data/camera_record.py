"""A scene's cameras without its images: what a NeRF checkpoint carries so that it renders, meshes
and exports with no scene folder (``enerf.loaded_run.load_run``).

``cameras_record(scene)`` is a dict of plain arrays and numbers (``torch.save``-able) written into
a checkpoint's ``extra["cameras"]`` by training; ``scene_from_cameras(record)`` rebuilds a
``Scene`` whose images are ``MissingImages``: their size is known, reading one raises DataError
(``enerf eval`` needs the folder: ``--datadir``). Scenes are pinhole cameras with a centred
principal point (the loaders undistort photos to it, ``enerf.cameras.lens``), so one focal length
describes every view.
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError
from .images import Images
from .scene import Scene

__all__ = ["CAMERAS_VERSION", "cameras_record", "scene_from_cameras", "MissingImages"]

CAMERAS_VERSION = 1


class MissingImages(Images):
    """The images of a scene rebuilt from a checkpoint: shape ``[N, H, W, 3]``, no pixels.

    Reading any raises DataError naming ``--datadir``.
    """

    def __init__(self, n_views: int, height: int, width: int, where: str = "") -> None:
        super().__init__(np.broadcast_to(np.zeros((1, 1, 1, 3), np.uint8), (n_views, height, width, 3)))
        self.where = where

    def decode(self, codes: np.ndarray) -> np.ndarray:
        raise DataError(f"the scene's images are not in the checkpoint{self.where}; pass --datadir SCENE_FOLDER")

    def tensors(self, device):
        return self.decode(self.data)


def cameras_record(scene: Scene) -> dict:
    """Everything of ``scene`` but its images (``Scene`` fields), as numpy arrays and numbers."""
    return {
        "version": CAMERAS_VERSION,
        "name": str(scene.name),
        "poses": np.asarray(scene.poses, np.float32),
        "height": int(scene.height),
        "width": int(scene.width),
        "focal": float(scene.focal),
        "bounds": np.asarray(scene.bounds, np.float32),
        "near": float(scene.near),
        "far": float(scene.far),
        "use_ndc": bool(scene.use_ndc),
        "i_train": np.asarray(scene.i_train, np.int64),
        "i_test": np.asarray(scene.i_test, np.int64),
        "render_poses": np.asarray(scene.render_poses, np.float32),
        "scene_to_world": np.asarray(scene.scene_to_world, np.float64),
        "aabb": None if scene.aabb is None else [float(v) for v in scene.aabb],
    }


def scene_from_cameras(record: dict, where: str = "") -> Scene:
    """The ``Scene`` of a ``cameras_record``, its images ``MissingImages`` (``where``: a phrase for
    their error, e.g. " (scene folder x not found)").

    Raises:
        DataError: a record of another version or with missing entries.
    """
    if not isinstance(record, dict) or record.get("version") != CAMERAS_VERSION:
        raise DataError(f"the checkpoint's camera record has version {record.get('version') if isinstance(record, dict) else None}, "
                        f"not {CAMERAS_VERSION}; pass --datadir SCENE_FOLDER")
    try:
        poses = np.asarray(record["poses"], np.float32)
        height, width = int(record["height"]), int(record["width"])
        return Scene(
            name=str(record["name"]), images=MissingImages(len(poses), height, width, where), poses=poses,
            height=height, width=width, focal=float(record["focal"]), bounds=np.asarray(record["bounds"], np.float32),
            near=float(record["near"]), far=float(record["far"]), use_ndc=bool(record["use_ndc"]),
            i_train=np.asarray(record["i_train"], np.int64), i_test=np.asarray(record["i_test"], np.int64),
            render_poses=np.asarray(record["render_poses"], np.float32),
            scene_to_world=np.asarray(record["scene_to_world"], np.float64),
            aabb=None if record["aabb"] is None else tuple(float(v) for v in record["aabb"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"the checkpoint's camera record is malformed ({exc}); pass --datadir SCENE_FOLDER") from None
