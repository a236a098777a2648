"""The cameras of a scene to render: video paths (``camera_path``), their frame sizes and rays, and a set
of pinhole cameras with names (``Cameras``, ``select_cameras``) that videos, depth maps, point clouds,
TSDF meshes and the splats' bake render. The path math is ``enerf.cameras.paths``; camera path files
``enerf.cameras.path_file``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..cameras.path_file import read_camera_path
from ..cameras.pinhole import Pinhole
from ..cameras.paths import ellipse_path, interpolated_path, llff_spiral_path, orbit_path, spherical_path
from ..cameras.rays import Rays, make_rays
from ..config import CAMERA_PATHS
from ..errors import ConfigError
from .scene import Scene

__all__ = ["camera_path", "frame_focals", "frame_size", "frame_rays", "default_path", "Cameras", "select_cameras"]


def camera_path(scene: Scene, path: str, n_frames: int, spherify: bool = False) -> np.ndarray:
    """Camera-to-world poses of a video path: np.ndarray  # [M, 3, 4] in scene space.

    * ``spiral``: LLFF's spiral (focus depth from the bounds, radii from the 90th percentile
      of the camera positions, 2 rotations), or (``spherify``) the circle path of
      nerf-pytorch's spherified scenes.
    * ``test`` / ``train``: the held-out / training views, in order.
    * ``interp``: a Catmull-Rom path through the training cameras in capture order.
    * ``ellipse``: an ellipse around the point the training cameras look at, at their mean
      height, every frame looking at that point (mip-NeRF 360's path for 360-degree captures).
    * ``orbit``: nerf-pytorch's Blender path, a circle at elevation -30 degrees and radius 4
      looking at the origin (``--frames``; nerf-pytorch renders 40). ``spiral`` on a scene with
      a content box (Blender) is the orbit too.
    * a ``.json`` file: a camera path file (``enerf.cameras.path_file.CameraPath``, saved by
      ``enerf view``): its keyframes, or its ``frames`` frames through them.
    """
    if path.lower().endswith(".json"):
        return read_camera_path(path).poses()
    if path not in CAMERA_PATHS:
        raise ConfigError(f"path {path!r} is not one of {', '.join(CAMERA_PATHS)}", ("path",))
    if path in ("spiral", "orbit", "interp", "ellipse") and n_frames < 1:
        raise ConfigError(f"frames must be at least 1, got {n_frames}", ("frames",))
    if path == "test":
        if scene.i_test.size == 0:
            raise ConfigError("the scene has no held-out views (llffhold = 0); use path spiral, interp or train", ("path",))
        return scene.poses[scene.i_test]
    if path == "train":
        return scene.poses[scene.i_train]
    if path == "interp":
        return interpolated_path(scene.poses[scene.i_train], n_frames).astype(np.float32)
    if path == "ellipse":
        if scene.use_ndc:
            raise ConfigError("path ellipse circles the point the cameras look at; this scene uses NDC rays "
                              "(forward-facing): use path spiral, interp, test or train", ("path",))
        try:
            return ellipse_path(scene.poses[scene.i_train], n_frames).astype(np.float32)
        except ValueError as err:
            raise ConfigError(str(err), ("path",)) from None
    if path == "orbit" or (scene.aabb is not None and not scene.use_ndc):
        if scene.use_ndc:
            raise ConfigError("path orbit circles an object at the origin (Blender scenes); this scene uses NDC "
                              "rays (forward-facing): use path spiral, interp, test or train", ("path",))
        return orbit_path(n_frames)
    if spherify:
        return spherical_path(1.0, float(scene.poses[:, 2, 3].mean()), n_frames).astype(np.float32)
    return llff_spiral_path(scene.poses.astype(np.float64), scene.bounds.astype(np.float64), n_frames).astype(np.float32)


def frame_focals(scene: Scene, path: str, n_frames: int) -> np.ndarray:
    """Focal length in pixels of each of the ``n_frames`` frames of ``path``: ``frame_size``'s,
    or where a camera path file gives each frame its own field of view, that one's."""
    width, height, focal = frame_size(scene, path)
    fovs = read_camera_path(path).frame_fovs() if path.lower().endswith(".json") else None
    if fovs is None:
        return np.full(n_frames, focal)
    return 0.5 * height / np.tan(np.radians(np.asarray(fovs, dtype=np.float64)) / 2.0)


def frame_size(scene: Scene, path: str) -> tuple[int, int, float]:
    """(width, height, focal in pixels) of the frames of ``path``: the scene's images, or the size and
    vertical field of view a camera path file names (the scene's where it names none)."""
    if not path.lower().endswith(".json"):
        return scene.width, scene.height, scene.focal
    cam = read_camera_path(path)
    width, height = (cam.width, cam.height) if cam.width is not None else (scene.width, scene.height)
    if cam.fov_y is not None:
        return width, height, 0.5 * height / float(np.tan(np.radians(cam.fov_y) / 2.0))
    return width, height, scene.focal * height / scene.height


def frame_rays(scene: Scene, c2w: np.ndarray, downscale: int, device: torch.device | str = "cpu",
               size: tuple[int, int, float] | None = None) -> Rays:
    """All rays of one video frame at ``1 / downscale`` of the frame size ``size`` (width, height,
    focal; default: the scene's images).

    Returns:
        Rays with leading shape [H // downscale, W // downscale].
    """
    full_w, full_h, focal = size or (scene.width, scene.height, scene.focal)
    height, width = full_h // downscale, full_w // downscale
    if height < 1 or width < 1:
        raise ConfigError(f"downscale {downscale} leaves no pixels of the {full_w}x{full_h} frames", ("downscale",))
    pose = torch.as_tensor(np.asarray(c2w, dtype=np.float32), device=device)
    return make_rays(height, width, focal / downscale, pose, scene.near, scene.far, scene.use_ndc)


def default_path(scene: Scene, contraction: str) -> str:
    """The camera path ``--video auto`` renders for ``scene`` trained with ``contraction``:
    ``interp`` through the training cameras on walk-around captures (world-space rays and a scene
    contraction; every frame near a view that was photographed), else ``spiral`` (forward-facing
    NDC scenes; the orbit on Blender scenes)."""
    return "interp" if not scene.use_ndc and contraction != "none" else "spiral"


@dataclass(frozen=True)
class Cameras:
    """Named pinhole cameras of one size to render, in scene space (principal point at the image centre):
    one ``Pinhole`` each (``pinholes``)."""

    poses: np.ndarray  # [M, 3, 4] camera-to-world, columns [right, up, back, t]
    names: list[str]  # one per pose: "test_003" (view 3), "train_010", "spiral_0005" (frame 5)
    size: tuple[int, int, float]  # (width, height, focal in pixels) before ``downscale``
    downscale: int

    @property
    def width(self) -> int:
        return self.size[0] // self.downscale

    @property
    def height(self) -> int:
        return self.size[1] // self.downscale

    @property
    def focal(self) -> float:
        return self.size[2] / self.downscale

    def pinholes(self) -> list[Pinhole]:
        """One ``Pinhole`` per pose, at the rendered size."""
        return [Pinhole(pose, self.width, self.height, self.focal) for pose in self.poses]


def select_cameras(scene: Scene, which: str, frames: int, downscale: int = 1, spherify: bool = False) -> Cameras:
    """``test`` (held-out views), ``train``, or a camera path of ``enerf render --path`` (spiral,
    orbit, interp, ellipse, a .json file) of ``frames`` frames, rendered at 1 / ``downscale``.

    Raises:
        ConfigError: an unknown path, no held-out views, or no pixels left after ``downscale``.
    """
    poses = camera_path(scene, which, frames, spherify)
    size = frame_size(scene, which)
    if size[0] // downscale < 1 or size[1] // downscale < 1:
        raise ConfigError(f"downscale {downscale} leaves no pixels of the {size[0]}x{size[1]} images", ("downscale",))
    if which in ("test", "train"):
        views = scene.i_test if which == "test" else scene.i_train
        names = [f"{which}_{int(v):03d}" for v in views]
    else:
        stem = Path(which).stem if which.lower().endswith(".json") else which
        names = [f"{stem}_{k:04d}" for k in range(len(poses))]
    return Cameras(np.asarray(poses, np.float32), names, (int(size[0]), int(size[1]), float(size[2])), int(downscale))
