"""Load a capture in the nerfstudio / instant-ngp single-file layout (the file itself is read by
``enerf.data.transforms_reader`` and written by ``enerf.data.transforms_writer``).

Layout (what ``ns-process-data``, instant-ngp's ``colmap2nerf.py``, Polycam / Record3D exports
and ``enerf data colmap --layout nerfstudio`` write)::

    scene/
      transforms.json   {"camera_model": "OPENCV", "fl_x", "fl_y", "cx", "cy", "w", "h",
                         "k1", "k2", "k3", "k4", "p1", "p2",          (top level or per frame)
                         "frames": [{"file_path": "images/0001.jpg",
                                     "transform_matrix": 4 x 4 camera-to-world}, ...],
                         "applied_transform": 3 x 4,                  (optional)
                         "train_filenames": [...], "test_filenames": [...]}   (optional)
      images/           the photos (``file_path`` is relative to the json, extension optional)
      images_<f>/       optional copies downscaled by f (ns-process-data), read for factor f

* Intrinsics: ``fl_x`` (else ``camera_angle_x``), ``fl_y`` (else ``camera_angle_y``, else
  ``fl_x``), ``cx``, ``cy`` (else the image centre), ``w``, ``h`` (else the image's size), per
  frame or at the top level (a frame's own value wins).
* ``camera_model``: PINHOLE, SIMPLE_PINHOLE, SIMPLE_RADIAL, RADIAL and OPENCV are perspective
  cameras with the OPENCV lens model of the coefficients given (missing ones are 0, as nerfstudio
  reads them); OPENCV_FISHEYE is OpenCV's fisheye model. Others are refused. Without
  ``camera_model``: OPENCV. The photos are undistorted at load into one pinhole camera with a
  centred principal point (``enerf.cameras.lens``), the camera enerf's rays use.
* Poses are camera-to-world with OpenGL axes [right, up, back], like enerf's Scene. They are
  normalised as nerfstudio's data parser does (``enerf.cameras.normalize``): mean up axis onto +z,
  mean camera centre at the origin, centres scaled into [-1, 1]^3. ``Scene.scene_to_world`` maps
  back to the frame the poses were in before ``applied_transform`` (COLMAP's, for
  ``ns-process-data`` output; else the json's own frame), as nerfstudio's
  ``dataparser_transforms.json`` does.
* Photos without alpha in the Blender layout (``transforms_train.json``, ``transforms_test.json``,
  as TensoRF's and instant-ngp's own-data recipes write them; ``enerf.data.loaders.dataset_type_of``)
  are read as a capture too: the two files as one, the splits as they list them
  (``transforms_reader.read_capture_transforms``).
* Frames are sorted by file name. Splits: ``train_filenames`` / ``test_filenames`` (or
  ``val_filenames``) when given, else every ``llffhold``-th frame is held out (0, 8, 16, ...;
  nerfstudio's ``--eval-mode interval``).
* Frames whose image is missing are skipped with one warning giving the count (instant-ngp does
  the same; its fox lists 67 frames and ships 50 images).
* Bounded rendering: the scene box is ``[-CAPTURE_BOX, CAPTURE_BOX]^3`` (``Scene.aabb``), three
  times the cameras' box; rays run from ``CAPTURE_NEAR`` to the farthest box corner of any camera.
* Forward-facing captures (``ndc=True``; ``--scene_kind forward``): NDC rays as in an LLFF scene.
  The poses are scaled so that the point the cameras look at (``enerf.cameras.scene_kind.focus_depth``)
  lies ``NDC_FOCUS_DEPTH`` in front of them, NDC's near plane at depth 1, then recentred on their
  average pose (LLFF's ``recenter_poses``); the video path is LLFF's spiral.
* ``factor`` 0: the smallest factor that brings the photos' long side to ``AUTO_MAX_SIDE`` pixels
  or less.
* ``w`` / ``h`` that disagree with the images (some tools write the original photos' size next to
  downscaled copies): the intrinsics are scaled to the images when the aspect ratio agrees, with
  one warning; another aspect ratio is refused.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from ..config import DataConfig, RenderConfig
from ..errors import DataError
from ..cameras.lens import Resampler, pinhole_canvas, source_pixels
from ..cameras.normalize import orient_and_center, scale_to_box
from ..cameras.paths import interpolated_path, llff_spiral_path
from ..cameras.scene_kind import focus_depth
from .blender import read_rgba
from .llff import area_downscale, checked_scene, recenter_poses
from .scene import Scene
from .transforms_reader import (Frame, finite_matrix, frame_camera, image_file, parse_frames, read_capture_transforms,
                                split_frames)

__all__ = ["load_nerfstudio", "auto_factor", "CAPTURE_BOX", "CAPTURE_NEAR", "NDC_FOCUS_DEPTH", "AUTO_MAX_SIDE"]

CAPTURE_BOX = 3.0  # half-size of the scene box, in units of the cameras' box [-1, 1]^3
CAPTURE_NEAR = 0.05
NDC_FOCUS_DEPTH = 3.0  # forward-facing captures: depth of the look-at point, in units of NDC's near plane
AUTO_MAX_SIDE = 512  # factor 0: the photos' long side after the downscale, at most (pixels)
N_RENDER_FRAMES = 120


def _image_size(path: Path) -> tuple[int, int]:
    from PIL import Image

    try:
        with Image.open(path) as img:
            return img.size
    except Exception as exc:
        raise DataError(f"{path}: unreadable image ({type(exc).__name__})") from None


def _downscaled_files(frames: list[Frame], base: Path, factor: int) -> list[Path] | None:
    """``images_<factor>/<rest>`` (or that name with another png / jpg suffix) for every frame whose
    file lies under ``images/`` (ns-process-data's copies), when all of them exist; else None."""
    if factor == 1:
        return None
    files = []
    root = base.resolve()
    for f in frames:
        parts = f.path.resolve().relative_to(root).parts
        if len(parts) < 2 or parts[0] != "images":
            return None
        path = image_file(base, Path(f"images_{factor}", *parts[1:]).as_posix())
        if path is None:  # enerf data colmap writes images_<f>/ as <stem>.png
            stem = Path(f"images_{factor}", *parts[1:]).with_suffix("").as_posix()
            path = image_file(base, stem)
        if path is None:
            return None
        files.append(path)
    return files


def _capture_bounds(poses: np.ndarray) -> tuple[float, float]:
    """near, far of the rays: CAPTURE_NEAR, and the largest distance of a camera to a box corner."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], np.float64) * CAPTURE_BOX
    far = float(np.linalg.norm(poses[:, None, :3, 3] - corners[None], axis=-1).max())
    return CAPTURE_NEAR, far


def auto_factor(frames: list[Frame], max_side: int = AUTO_MAX_SIDE) -> int:
    """The smallest downscale factor that brings the first frame's long side to ``max_side`` or less."""
    return max(1, math.ceil(max(_image_size(frames[0].path)) / max_side))


def _forward_frame(c2w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A forward-facing capture's NDC frame (module docstring).

    Args:
        c2w: np.ndarray  # [N, 4, 4] camera-to-world as stored (after applied_transform)
    Returns:
        poses: np.ndarray  # [N, 3, 4] scene frame
        transform: np.ndarray  # [4, 4] stored frame -> scene frame
        bounds: np.ndarray  # [N, 2] near / far depths of the spiral path, scene units
    """
    scale = NDC_FOCUS_DEPTH / focus_depth(c2w)
    scaled = np.array(c2w[:, :3, :4], np.float64)
    scaled[:, :3, 3] *= scale
    poses, average = recenter_poses(scaled)
    transform = np.linalg.inv(average) @ np.diag([scale, scale, scale, 1.0])
    bounds = np.tile([[0.5 * NDC_FOCUS_DEPTH, 2.0 * NDC_FOCUS_DEPTH]], (len(poses), 1))
    return poses, transform, bounds


def load_nerfstudio(datadir: str | Path, factor: int = DataConfig.factor, llffhold: int = DataConfig.llffhold,
                    white_bkgd: bool = RenderConfig.white_bkgd, orientation: str = "up", say=None, ndc: bool = False,
                    testskip: int = DataConfig.testskip) -> Scene:
    """Load a nerfstudio / instant-ngp capture (module docstring) as a :class:`Scene`.

    The defaults are ``DataConfig``'s and ``RenderConfig.white_bkgd``: a call without them loads the
    capture as ``enerf.data.loaders.load_scene`` does with the default config.

    Args:
        factor: downscale; ``images_<factor>/`` (ns-process-data's copies) when every frame has
            one, else the photos are undistorted at full size and block-averaged in process;
            0: ``auto_factor``.
        llffhold: every ``llffhold``-th frame (sorted by name) is held out, unless the json lists
            its own splits; 0: none.
        white_bkgd: RGBA photos are composited on white, else on black.
        orientation: ``up`` (nerfstudio's default), ``pca`` or ``none`` (``enerf.cameras.normalize``).
        say: where the warnings go (default: stderr, prefixed "enerf: warning:").
        ndc: a forward-facing capture: NDC rays (module docstring), ``orientation`` unused.
        testskip: a Blender-style capture (``transforms_train.json`` / ``transforms_test.json``):
            every ``testskip``-th test frame.

    Raises:
        DataError: a missing or malformed file, with one line naming it.
    """
    say = say or (lambda m: print(f"enerf: warning: {m}", file=sys.stderr))
    datadir, checked = checked_scene(datadir, factor or 1, llffhold)
    factor = checked if factor else 0
    meta, json_path = read_capture_transforms(datadir, testskip)
    frames, missing = parse_frames(meta, json_path)
    n_listed = len(meta["frames"])
    if not frames:
        first = meta["frames"][0]["file_path"]
        raise DataError(f"{json_path}: none of the {n_listed} frames has its image (the first looked for is "
                        f"{datadir / first}); copy the images next to {json_path.name}")
    if missing:
        message = (f"{json_path}: {missing} of {n_listed} frames have no image and are skipped; "
                   f"{len(frames)} are used")
        say(message)
    if factor == 0:
        factor = auto_factor(frames)
    i_train, i_test = split_frames(frames, meta, json_path, llffhold)
    if i_train.size == 0:
        raise DataError(f"{json_path}: {len(frames)} frame(s) with llffhold={llffhold} leave no training frames; "
                        "raise llffhold or set it to 0")
    applied = meta.get("applied_transform")
    applied = np.eye(4) if applied is None else finite_matrix(applied, 3)
    if applied is None or abs(np.linalg.det(applied[:3, :3])) < 1e-12:
        raise DataError(f"{json_path}: applied_transform must be a finite, invertible 3 x 4 matrix")
    applied = np.concatenate([applied[:3], [[0.0, 0.0, 0.0, 1.0]]], 0)

    # Cameras at the resolution read: the photos, or images_<factor>/ with the intrinsics scaled.
    small = _downscaled_files(frames, datadir, factor)
    files = small or [f.path for f in frames]
    resize = 1 if small else factor
    cameras, notes = [], set()
    for frame, path in zip(frames, files):
        size = _image_size(path)
        if small is None:
            cameras.append(frame_camera(meta, frame, json_path, size, notes))
            continue
        full = frame_camera(meta, frame, json_path, _image_size(frame.path), notes)
        if abs(size[0] * factor - full.width) > factor or abs(size[1] * factor - full.height) > factor:
            raise DataError(f"{path}: image is {size[0]}x{size[1]}, not 1/{factor} of {full.width}x{full.height}; "
                            f"remove images_{factor}/ or remake it")
        cameras.append(full.scaled(size[0] / full.width, size[1] / full.height, *size))
    for note in sorted(notes):
        say(note)
    # Undistorted after the downscale (as nerfstudio does with images_<f>/): one small map per camera.
    read_sizes = [(c.height, c.width) for c in cameras]
    cameras = [c.downscaled(resize) for c in cameras]
    focal = float(np.median([c.fx for c in cameras]))
    width, height = pinhole_canvas(list(dict.fromkeys(cameras)), focal)
    if width < 2 or height < 2:
        raise DataError(f"{json_path}: no pixel of a pinhole camera with focal {focal:.1f} px falls inside every "
                        "photo; check the intrinsics and distortion coefficients")
    # Kept as 8-bit codes ([N, H, W, 3] uint8, 3 bytes a pixel; float32 would take 12): each image is
    # resampled anyway, and rounding to the nearest code moves a value by at most 1/510.
    images, resamplers = np.empty((len(cameras), height, width, 3), np.uint8), {}
    background = 1.0 if white_bkgd else 0.0
    for k, (camera, path, size) in enumerate(zip(cameras, files, read_sizes)):
        rgba = read_rgba(path)
        if rgba.shape[:2] != size:
            raise DataError(f"{path}: image is {rgba.shape[1]}x{rgba.shape[0]}, its header said {size[1]}x{size[0]}")
        rgb = area_downscale(rgba[..., :3] * rgba[..., 3:] + background * (1.0 - rgba[..., 3:]), resize)
        dx, dy = camera.width - width, camera.height - height
        if camera.is_centred_pinhole(focal) and dx % 2 == 0 and dy % 2 == 0:
            rgb = rgb[dy // 2: dy // 2 + height, dx // 2: dx // 2 + width]  # a centred crop
        else:
            if camera not in resamplers:
                if len(resamplers) >= 8:  # per-frame intrinsics: keep a few maps, not one per frame
                    resamplers.pop(next(iter(resamplers)))
                u, v, _ = source_pixels(camera, focal, width, height)
                resamplers[camera] = Resampler(u, v, camera.width, camera.height)
            rgb = resamplers[camera](rgb)
        images[k] = np.clip(np.round(rgb * 255.0), 0, 255)

    c2w = np.stack([f.c2w for f in frames])
    if ndc:
        poses, transform, bounds = _forward_frame(c2w)
        near, far, aabb = 0.0, 1.0, None
        render_poses = llff_spiral_path(poses, bounds, N_RENDER_FRAMES)
    else:
        poses, transform3 = orient_and_center(c2w[:, :3, :4], orientation)
        poses, scale = scale_to_box(poses)
        transform = np.diag([scale, scale, scale, 1.0]) @ np.concatenate([transform3, [[0, 0, 0, 1.0]]], 0)
        near, far = _capture_bounds(poses)
        bounds = np.tile(np.array([[near, far]]), (len(frames), 1))
        aabb = (-CAPTURE_BOX,) * 3 + (CAPTURE_BOX,) * 3
        render_poses = interpolated_path(poses[i_train], N_RENDER_FRAMES)
    world_to_scene = transform @ applied
    return Scene(
        name=datadir.resolve().name,
        images=images,
        poses=poses.astype(np.float32),
        height=int(images.shape[1]),
        width=int(images.shape[2]),
        focal=focal,
        bounds=bounds.astype(np.float32),
        near=near,
        far=far,
        use_ndc=ndc,
        i_train=i_train,
        i_test=i_test,
        render_poses=render_poses.astype(np.float32),
        scene_to_world=np.linalg.inv(world_to_scene),
        aabb=aabb,
    )

