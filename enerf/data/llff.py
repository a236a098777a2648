"""Load a scene stored in the LLFF layout, with nerf-pytorch's ``load_llff_data`` conventions.

Layout::

    scene/
      images/            *.png | *.jpg (sorted by name), any size
      images_<f>/        optional copies downscaled by f (the release has images_4/, images_8/);
                         ``factor=f`` reads images_<f>/, else the largest folder images_<g>/ with
                         g dividing f, downscaled by f / g in process
      poses_bounds.npy   [N, 17]: a row-major 3x5 matrix per view, columns
                         [down, right, back, position, (H, W, focal)], then near, far depth

The loader reorders the camera axes to [right, up, back], rescales the world so that the
closest bound sits at ``1 / bd_factor``, recenters the poses about their average
(optionally spherifies them) and records the inverse of those steps in
``Scene.scene_to_world``. Downscaling without an ``images_<f>/`` folder happens in
process by averaging pixel blocks (after a centred crop to a multiple of the block).
"""

from __future__ import annotations

import json
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from ..config import DataConfig
from ..errors import ConfigError, DataError
from ..cameras.paths import llff_spiral_path, normalize, poses_avg, spherical_path, to_homogeneous
from .images import Images
from .scene import Scene

__all__ = [
    "LLFF_FACTOR",
    "checked_factor",
    "load_llff",
    "read_poses_bounds",
    "list_images",
    "pick_image_folder",
    "read_image",
    "read_image_codes",
    "image_values",
    "area_downscale",
    "recenter_poses",
    "spherify_poses",
]

LLFF_FACTOR = 8  # factor 0 (DataConfig's default): nerf-pytorch's LLFF downscale

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 160 else text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def read_poses_bounds(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Read and validate ``poses_bounds.npy``.

    Returns:
        poses: np.ndarray  # [N, 3, 5] float64, LLFF storage order [down, right, back, t, hwf]
        bounds: np.ndarray  # [N, 2] float64 near / far
    """
    if not path.is_file():
        raise DataError(f"{path}: file not found (an LLFF scene needs poses_bounds.npy next to images/)")
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy raises ValueError, OSError, EOFError, UnpicklingError...
        raise DataError(f"{path}: not a readable .npy array ({_one_line(exc)})") from None
    if arr.ndim != 2 or arr.shape[1] != 17 or arr.shape[0] < 1:
        raise DataError(f"{path}: expected an N x 17 array (3x5 pose + near, far per view), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number):
        raise DataError(f"{path}: expected a numeric array, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    bad_rows = np.flatnonzero(~np.isfinite(arr).all(axis=1))
    if bad_rows.size:
        raise DataError(f"{path}: non-finite pose or bound values in row(s) {bad_rows[:10].tolist()}")
    poses = arr[:, :15].reshape(-1, 3, 5)
    bounds = arr[:, 15:17]
    bad_rows = np.flatnonzero((bounds <= 0).any(axis=1))
    if bad_rows.size:
        raise DataError(f"{path}: near/far bounds must be positive; row(s) {bad_rows[:10].tolist()} are not")
    bad_rows = np.flatnonzero(poses[:, 2, 4] <= 0)
    if bad_rows.size:
        raise DataError(f"{path}: focal length (hwf column) must be positive; row(s) {bad_rows[:10].tolist()} are not")
    return poses, bounds


def list_images(folder: Path) -> list[Path]:
    """Image files (png / jpg) in ``folder``, sorted by name; hidden files are skipped."""
    return sorted(
        p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_SUFFIXES
    )


def read_image_codes(path: Path) -> np.ndarray:
    """One image as stored: np.ndarray  # [H, W, 3] uint8, uint16 or float (alpha dropped, grey repeated)."""
    try:
        img = np.asarray(iio.imread(path, plugin="pillow"))
    except Exception as exc:
        raise DataError(f"{path}: unreadable image ({_one_line(exc)})") from None
    if img.dtype not in (np.uint8, np.uint16) and not np.issubdtype(img.dtype, np.floating):
        raise DataError(f"{path}: unsupported pixel type {img.dtype} (expected 8- or 16-bit RGB)")
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3 or img.shape[2] not in (1, 3, 4) or img.shape[0] < 1 or img.shape[1] < 1:
        raise DataError(f"{path}: expected an H x W RGB image, got array shape {img.shape}")
    if img.shape[2] == 1:
        img = np.repeat(img, 3, axis=2)
    return np.ascontiguousarray(img[:, :, :3])


def image_values(img: np.ndarray) -> np.ndarray:
    """Stored pixels (``read_image_codes``) -> float32 in [0, 1]: code / 255 (8-bit), / 65535 (16-bit)."""
    if img.dtype == np.uint8:
        return img.astype(np.float32) / 255.0
    if img.dtype == np.uint16:
        return img.astype(np.float32) / 65535.0
    return img.astype(np.float32)


def read_image(path: Path) -> np.ndarray:
    """One image as float32 RGB in [0, 1]: np.ndarray  # [H, W, 3] (alpha dropped, grey repeated)."""
    return image_values(read_image_codes(path))


def area_downscale(img: np.ndarray, factor: int) -> np.ndarray:
    """Average ``factor x factor`` blocks (a box filter, i.e. exact pixel-area integration).

    Rows / columns that do not fill a block are cropped evenly from both sides first, so
    the principal point stays at the image centre (to within half an input pixel).

    Args:
        img: np.ndarray  # [H, W, C]
    Returns:
        np.ndarray  # [H // factor, W // factor, C]
    """
    if factor == 1:
        return img
    h, w = img.shape[0] // factor, img.shape[1] // factor
    top = (img.shape[0] - h * factor) // 2
    left = (img.shape[1] - w * factor) // 2
    crop = img[top : top + h * factor, left : left + w * factor]
    return crop.reshape(h, factor, w, factor, -1).mean(axis=(1, 3), dtype=np.float64).astype(img.dtype)


def _load_images(files: list[Path], factor: int) -> Images:
    """The images of ``files``, block-averaged by ``factor``: their 8-bit codes when every file is
    8-bit and ``factor`` is 1, else float32 values (``Images``)."""
    codes, values = None, None
    first_shape = None
    for k, path in enumerate(files):
        img = read_image_codes(path)
        if first_shape is None:
            first_shape = img.shape
            if factor > 1 and (img.shape[0] < factor or img.shape[1] < factor):
                raise DataError(
                    f"{path}: image of {img.shape[1]}x{img.shape[0]} pixels is smaller than factor {factor}"
                )
        elif img.shape != first_shape:
            raise DataError(
                f"{path}: image is {img.shape[1]}x{img.shape[0]} but {files[0].name} is "
                f"{first_shape[1]}x{first_shape[0]}; all views must share one size"
            )
        if values is None and factor == 1 and img.dtype == np.uint8:
            if codes is None:
                codes = np.empty((len(files), *img.shape), dtype=np.uint8)
            codes[k] = img
            continue
        small = area_downscale(image_values(img), factor)
        if values is None:  # first frame that cannot stay as codes: earlier frames become values too
            values = np.empty((len(files), *small.shape), dtype=np.float32)
            if codes is not None:
                values[:k] = image_values(codes[:k])
                codes = None
        values[k] = small
    return Images(codes if values is None else values)


def pick_image_folder(datadir: Path, factor: int) -> tuple[Path, int]:
    """The folder to read for ``factor`` and the in-process downscale still needed.

    ``images_<factor>/`` when present (downscale 1); otherwise the largest-resolution folder
    ``images_<g>/`` (``images/`` is g = 1) with g dividing ``factor``, block-averaged by
    ``factor // g``: the LLFF release ships ``images/``, ``images_4/`` and ``images_8/``, and a
    copy without ``images/`` still loads factor 16 from ``images_8/``.

    Raises:
        DataError: no usable folder, naming the folders that were looked for.
    """
    for g in sorted((g for g in range(1, factor + 1) if factor % g == 0), reverse=True):
        folder = datadir / ("images" if g == 1 else f"images_{g}")
        if folder.is_dir():
            return folder, factor // g
    wanted = ", ".join(("images" if g == 1 else f"images_{g}") + "/" for g in range(1, factor + 1) if factor % g == 0)
    raise DataError(f"{datadir}: no image folder for factor {factor} (looked for {wanted}); "
                    "an LLFF scene needs images/ (or images_<f>/) and poses_bounds.npy")


def recenter_poses(poses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Express ``poses`` [N, 3, 4] relative to their average pose (nerf-pytorch ``recenter_poses``).

    Returns:
        poses: np.ndarray  # [N, 3, 4] recentered
        c2w: np.ndarray  # [4, 4] the average pose; new = inv(c2w) @ old
    """
    c2w = to_homogeneous(poses_avg(poses))
    recentered = np.linalg.inv(c2w) @ to_homogeneous(poses)
    return recentered[:, :3, :4], c2w


def spherify_poses(
    poses: np.ndarray, bounds: np.ndarray, n_frames: int = 120
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """nerf-pytorch's ``spherify_poses`` for inward-facing 360 degree captures.

    Moves the point closest to all optical axes to the origin, aligns z with the mean
    camera offset and scales the cameras onto the unit sphere.

    Returns:
        poses: np.ndarray  # [N, 3, 4]
        render_poses: np.ndarray  # [n_frames, 3, 4] circle path
        bounds: np.ndarray  # [N, 2] rescaled
        to_previous: np.ndarray  # [4, 4] maps the new frame's points back to the input frame
    """
    rays_d = poses[:, :3, 2:3]
    rays_o = poses[:, :3, 3:4]
    a_i = np.eye(3) - rays_d * np.transpose(rays_d, [0, 2, 1])
    b_i = -a_i @ rays_o
    center = np.squeeze(-np.linalg.inv((np.transpose(a_i, [0, 2, 1]) @ a_i).mean(0)) @ b_i.mean(0))
    vec0 = normalize((poses[:, :3, 3] - center).mean(0))
    vec1 = normalize(np.cross([0.1, 0.2, 0.3], vec0))
    vec2 = normalize(np.cross(vec0, vec1))
    frame = to_homogeneous(np.stack([vec1, vec2, vec0, center], 1))
    reset = np.linalg.inv(frame) @ to_homogeneous(poses)
    rad = np.sqrt(np.mean(np.sum(np.square(reset[:, :3, 3]), -1)))
    sc = 1.0 / rad
    reset[:, :3, 3] *= sc
    bounds = bounds * sc
    height = np.mean(reset[:, :3, 3], 0)[2]
    render_poses = spherical_path(1.0, height, n_frames)
    to_previous = frame @ np.diag([1.0 / sc, 1.0 / sc, 1.0 / sc, 1.0])
    return reset[:, :3, :4], render_poses, bounds, to_previous


def checked_factor(factor: float) -> int:
    """A loader's downscale factor as an int; ConfigError unless it is a positive integer."""
    if factor < 1 or int(factor) != factor:
        raise ConfigError(f"factor must be a positive integer, got {factor}")
    return int(factor)


def checked_scene(datadir: str | Path, factor: float, llffhold: int) -> tuple[Path, int]:
    """(scene folder, factor) of a loader's arguments: ConfigError for a bad factor or hold-out
    step, DataError (one line) when the folder does not exist."""
    datadir = Path(datadir)
    factor = checked_factor(factor)
    if llffhold < 0:
        raise ConfigError(f"llffhold must be >= 0, got {llffhold}")
    if not datadir.is_dir():
        raise DataError(f"{datadir}: scene folder not found")
    return datadir, factor


def read_json_object(path: Path, missing: str) -> dict:
    """The JSON object in ``path``; DataError (one line naming it) when the file is missing
    (``missing`` says what needs it), is not JSON or holds no object."""
    if not path.is_file():
        raise DataError(f"{path}: file not found ({missing})")
    try:
        meta = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        raise DataError(f"{path}: not valid JSON ({type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(meta).__name__}")
    return meta


def load_llff(
    datadir: str | Path,
    factor: int = DataConfig.factor,
    recenter: bool = DataConfig.recenter,
    bd_factor: float | None = DataConfig.bd_factor,
    spherify: bool = DataConfig.spherify,
    llffhold: int = DataConfig.llffhold,
    use_ndc: bool = DataConfig.use_ndc,
    path_zflat: bool = False,
    n_render_frames: int = 120,
) -> Scene:
    """Load an LLFF-layout scene (see the module docstring) as a :class:`Scene`.

    The defaults are ``DataConfig``'s: a call without them loads the scene as ``enerf.data.loaders.load_scene``
    does with the default config.

    Args:
        factor: downscale factor; ``images_<factor>/`` is used when present, otherwise
            ``images/`` is block-averaged in process. Focal length is divided by ``factor``.
            0: ``LLFF_FACTOR``.
        recenter: recenter the poses about their average pose.
        bd_factor: the closest bound is rescaled to ``1 / bd_factor`` (None or 0: no rescale).
        spherify: spherify the poses (360-degree scenes; ``spherify_poses``).
        llffhold: every ``llffhold``-th view (0, llffhold, 2 llffhold...) is a test view; 0: none.
        use_ndc: NDC rays (near 0, far 1); otherwise near / far are 0.9 x min and max of the bounds.
        path_zflat, n_render_frames: the video path's (``llff_spiral_path``).

    Raises:
        DataError: a missing or malformed file, with one line naming it.
    """
    datadir, factor = checked_scene(datadir, factor or LLFF_FACTOR, llffhold)
    image_dir, resize = pick_image_folder(datadir, factor)
    files = list_images(image_dir)
    if not files:
        raise DataError(f"{image_dir}: no .png or .jpg images found")

    pose_file = datadir / "poses_bounds.npy"
    raw_poses, bounds = read_poses_bounds(pose_file)
    if len(files) != raw_poses.shape[0]:
        raise DataError(f"{pose_file}: has {raw_poses.shape[0]} poses but {image_dir} holds {len(files)} images")
    images = _load_images(files, resize)
    height, width = images.shape[1:3]
    focal = float(raw_poses[0, 2, 4]) / factor

    # [down, right, back, t] -> [right, up, back, t]
    poses = np.concatenate([raw_poses[:, :, 1:2], -raw_poses[:, :, 0:1], raw_poses[:, :, 2:4]], axis=2)
    sc = 1.0 if not bd_factor else 1.0 / (bounds.min() * bd_factor)
    poses[:, :3, 3] *= sc
    bounds = bounds * sc
    scene_to_world = np.diag([1.0 / sc, 1.0 / sc, 1.0 / sc, 1.0])
    if recenter:
        poses, avg = recenter_poses(poses)
        scene_to_world = scene_to_world @ avg
    if spherify:
        poses, render_poses, bounds, to_previous = spherify_poses(poses, bounds, n_render_frames)
        scene_to_world = scene_to_world @ to_previous
    else:
        render_poses = llff_spiral_path(poses, bounds, n_render_frames, path_zflat)

    n_views = images.shape[0]
    i_test = np.arange(n_views)[::llffhold] if llffhold > 0 else np.zeros(0, dtype=np.int64)
    i_train = np.setdiff1d(np.arange(n_views), i_test)
    if i_train.size == 0:
        raise DataError(
            f"{datadir}: {n_views} view(s) with llffhold={llffhold} leave no training views; "
            "raise llffhold or set it to 0"
        )
    near, far = (0.0, 1.0) if use_ndc else (0.9 * float(bounds.min()), float(bounds.max()))

    return Scene(
        name=datadir.resolve().name,
        images=images,
        poses=poses.astype(np.float32),
        height=int(height),
        width=int(width),
        focal=focal,
        bounds=bounds.astype(np.float32),
        near=near,
        far=far,
        use_ndc=use_ndc,
        i_train=i_train.astype(np.int64),
        i_test=i_test.astype(np.int64),
        render_poses=render_poses.astype(np.float32),
        scene_to_world=scene_to_world,
    )
