"""Load a scene in the Blender (NeRF synthetic) layout, with nerf-pytorch's ``load_blender_data``
conventions.

Layout::

    scene/
      transforms_{train,val,test}.json   {"camera_angle_x": fov, "frames": [{"file_path":
                                          "./train/r_0", "transform_matrix": 4x4 c2w}, ...]}
      {train,val,test}/r_*.png           RGBA, one size for every frame

The matrices are camera-to-world in OpenGL axes ([right, up, back]), the frame enerf's
``Scene`` uses, so they are taken as they are (``scene_to_world`` is the identity). The focal
length is ``0.5 W / tan(0.5 camera_angle_x)`` with W the width of the images as loaded (the
field of view does not change with the resolution). Rays run from near 2 to far 6 without
NDC; the object lies in the box [-1.5, 1.5]^3 (``Scene.aabb``, nerfacc's examples).

A folder with ``transforms_train.json`` alone (some exporters write only that) holds out every
``llffhold``-th of its frames (0, 8, 16, ...) for testing, as the LLFF and nerfstudio loaders do.

The layout alone does not say a scene is synthetic: TensoRF's and instant-ngp's own-data recipes
write real photos into it too. ``frames_have_alpha`` tells the two apart (a rendered object on a
transparent background against opaque photos), and ``enerf.data.loaders.dataset_type_of`` loads a
folder of photos without alpha as a capture (``enerf.data.nerfstudio``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..cameras.paths import orbit_path
from ..config import DataConfig, RenderConfig
from ..errors import ConfigError, DataError
from .llff import area_downscale, checked_factor, read_json_object
from .images import Images
from .scene import Scene

__all__ = ["load_blender", "blender_cameras", "frames_have_alpha", "read_rgba", "read_rgba_codes", "BLENDER_NEAR",
           "BLENDER_FAR", "BLENDER_AABB", "ALPHA_FRAMES"]

BLENDER_NEAR, BLENDER_FAR = 2.0, 6.0
BLENDER_AABB = (-1.5, -1.5, -1.5, 1.5, 1.5, 1.5)
ALPHA_FRAMES = 3  # frames_have_alpha reads the first this many train frames


def read_rgba_codes(path: Path) -> np.ndarray:
    """One frame as stored, as RGBA: np.ndarray  # [H, W, 4] uint8 or uint16.

    8- or 16-bit grey, grey + alpha, RGB or RGBA; grey is repeated into RGB and a frame
    without alpha gets the largest code (opaque).
    """
    import imageio.v3 as iio

    try:
        img = np.asarray(iio.imread(path, plugin="pillow"))
    except Exception as exc:
        raise DataError(f"{path}: unreadable image ({type(exc).__name__})") from None
    if img.ndim == 2:
        img = img[:, :, None]
    if img.dtype not in (np.uint8, np.uint16) or img.ndim != 3 or img.shape[2] not in (1, 2, 3, 4) \
            or min(img.shape[:2]) < 1:
        raise DataError(f"{path}: expected an 8- or 16-bit grey, RGB or RGBA image, got {img.dtype} array of shape "
                        f"{img.shape}")
    if img.shape[2] in (1, 2):  # grey (+ alpha)
        img = np.concatenate([np.repeat(img[..., :1], 3, axis=2), img[..., 1:]], axis=2)
    if img.shape[2] == 3:
        img = np.concatenate([img, np.full_like(img[..., :1], np.iinfo(img.dtype).max)], axis=2)
    return img


def read_rgba(path: Path) -> np.ndarray:
    """One frame as float32 RGBA in [0, 1]: np.ndarray  # [H, W, 4].

    8- or 16-bit grey, grey + alpha, RGB or RGBA; grey is repeated into RGB and a frame
    without alpha is opaque.
    """
    img = read_rgba_codes(path)
    return img.astype(np.float32) / (255.0 if img.dtype == np.uint8 else 65535.0)


def _alpha_below_opaque(path: Path) -> bool:
    """Whether the image at ``path`` has an alpha channel (or a transparent palette entry) that is
    below opaque somewhere; False for an unreadable file (the loader names it)."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            if "A" not in img.getbands() and "transparency" not in img.info:
                return False
            alpha = img.convert("RGBA").getchannel("A")
            return alpha.getextrema()[0] < 255
    except Exception:  # noqa: BLE001 - any decoding failure: let the loader say what is wrong
        return False


def frames_have_alpha(datadir: Path, n_frames: int = ALPHA_FRAMES) -> bool:
    """Whether a Blender-layout folder holds rendered frames with a meaningful alpha (some pixel of
    one of the first ``n_frames`` train frames whose image exists is not opaque), as the NeRF
    synthetic scenes do, rather than photos (no alpha channel, or alpha opaque everywhere).

    True when ``transforms_train.json`` cannot be read or none of its frames' images exists, so
    that the Blender loader reports the problem in its own words.
    """
    from .transforms_reader import image_file

    datadir = Path(datadir)
    try:
        frames = _read_split(datadir, "train")["frames"]
    except DataError:
        return True
    paths = [image_file(datadir, f["file_path"]) for f in frames
             if isinstance(f, dict) and isinstance(f.get("file_path"), str) and f["file_path"]]
    paths = [p for p in paths if p is not None][:n_frames]
    return not paths or any(_alpha_below_opaque(p) for p in paths)


def _read_split(datadir: Path, split: str) -> dict:
    path = datadir / f"transforms_{split}.json"
    meta = read_json_object(path, "a Blender scene needs transforms_train/val/test.json")
    if "camera_angle_x" not in meta:
        raise DataError(f"{path}: missing camera_angle_x (the horizontal field of view in radians)")
    fov = meta["camera_angle_x"]
    if not isinstance(fov, (int, float)) or not 0 < fov < math.pi:
        raise DataError(f"{path}: camera_angle_x must be a number in (0, pi), got {fov!r}")
    frames = meta.get("frames")
    if not isinstance(frames, list) or not frames:
        raise DataError(f"{path}: no frames listed")
    return meta


def _frame(datadir: Path, split: str, index: int, frame, check_file: bool = True) -> tuple[Path, np.ndarray]:
    where = f"{datadir / f'transforms_{split}.json'}: frame {index}"
    if not isinstance(frame, dict) or "file_path" not in frame or "transform_matrix" not in frame:
        raise DataError(f"{where} needs file_path and transform_matrix")
    try:
        matrix = np.asarray(frame["transform_matrix"], dtype=np.float64)
    except (TypeError, ValueError):
        matrix = np.zeros(0)
    if matrix.shape != (4, 4) or not np.isfinite(matrix).all():
        raise DataError(f"{where}: transform_matrix must be a finite 4x4 matrix, got shape {matrix.shape}")
    rel = str(frame["file_path"])
    path = datadir / rel
    if path.suffix.lower() != ".png":
        path = path.with_name(path.name + ".png")
    if check_file and not path.is_file():
        raise DataError(f"{path}: frame file not found (listed as {rel!r} in transforms_{split}.json)")
    return path, matrix


def blender_cameras(datadir: Path) -> np.ndarray:
    """The camera-to-world poses of ``transforms_train.json`` (no image read).

    Returns:
        np.ndarray  # [N, 3, 4] OpenGL axes
    """
    frames = _read_split(Path(datadir), "train")["frames"]
    return np.stack([_frame(Path(datadir), "train", k, f, check_file=False)[1][:3, :4] for k, f in enumerate(frames)])


def _split_frames(datadir: Path, testskip: int, llffhold: int) -> tuple[dict, dict[str, list[tuple[str, int, dict]]]]:
    """The metas of the json files read and, per split, (json split, index in its list, frame)."""
    metas = {"train": _read_split(datadir, "train")}
    train = [("train", k, f) for k, f in enumerate(metas["train"]["frames"])]
    if (datadir / "transforms_test.json").is_file() or llffhold <= 0:
        metas["test"] = _read_split(datadir, "test")
        test = [("test", k, f) for k, f in enumerate(metas["test"]["frames"])][::testskip]
        return metas, {"train": train, "test": test}
    if len(train) < 2:
        raise DataError(f"{datadir / 'transforms_train.json'}: {len(train)} frame(s) and no transforms_test.json leave "
                        "no training frames; add frames or a transforms_test.json")
    return metas, {"train": [e for k, e in enumerate(train) if k % llffhold], "test": train[::llffhold]}


def load_blender(datadir: str | Path, half_res: bool = DataConfig.half_res, factor: int = DataConfig.factor,
                 testskip: int = DataConfig.testskip, white_bkgd: bool = RenderConfig.white_bkgd,
                 llffhold: int = DataConfig.llffhold) -> Scene:
    """Load a Blender-layout scene (module docstring) as a :class:`Scene`.

    The defaults are ``DataConfig``'s and ``RenderConfig.white_bkgd`` (black, unlike nerf-pytorch's
    synthetic configs, which set ``white_bkgd = True``): a call without them loads the scene as
    ``enerf.data.loaders.load_scene`` does with the default config.

    Args:
        half_res: halve the images as stored (nerf-pytorch's ``half_res``).
        factor: further integer downscale (pixel-block averages, as the LLFF loader); 0: none. Frames
            are composited before they are averaged (nerf-pytorch resizes RGBA, then composites),
            so a downscaled pixel is the mean colour of the pixels it covers.
        testskip: keep every ``testskip``-th frame of val and test (train keeps all).
        llffhold: without ``transforms_test.json``, every ``llffhold``-th train frame is a test frame.
        white_bkgd: composite RGBA on white (``rgb * a + 1 - a``), else on black (``rgb * a``).

    Splits: ``i_train`` = the train frames, ``i_test`` = the test frames; val frames are not loaded.

    Raises:
        DataError: a missing or malformed file, with one line naming it.
    """
    datadir = Path(datadir)
    factor = checked_factor(factor or 1)
    if testskip < 1:
        raise ConfigError(f"testskip must be >= 1, got {testskip}")
    if not datadir.is_dir():
        raise DataError(f"{datadir}: scene folder not found")
    scale = factor * (2 if half_res else 1)
    background = 1.0 if white_bkgd else 0.0
    metas, splits = _split_frames(datadir, testskip, llffhold)
    counts = {split: len(entries) for split, entries in splits.items()}
    n_frames = counts["train"] + counts["test"]
    # 8-bit frames at full size stay RGBA codes (composited when read, Images); others become float32 values.
    codes, values, poses, fov, first = None, None, [], None, None
    for split, meta in metas.items():
        if fov is not None and not math.isclose(meta["camera_angle_x"], fov, rel_tol=1e-6):
            raise DataError(f"{datadir / f'transforms_{split}.json'}: camera_angle_x {meta['camera_angle_x']} differs "
                            f"from transforms_train.json's {fov}; all frames must share one camera")
        fov = meta["camera_angle_x"] if fov is None else fov
    for split in ("train", "test"):
        for json_split, k, frame in splits[split]:
            path, matrix = _frame(datadir, json_split, k, frame)
            raw = read_rgba_codes(path)
            if first is None:
                first = (path, raw.shape)
                if raw.shape[0] < scale or raw.shape[1] < scale:
                    raise DataError(f"{path}: image of {raw.shape[1]}x{raw.shape[0]} is smaller than the downscale {scale}")
            elif raw.shape != first[1]:
                raise DataError(f"{path}: image is {raw.shape[1]}x{raw.shape[0]} but {os.path.relpath(first[0], datadir)} is "
                                f"{first[1][1]}x{first[1][0]}; all frames must share one size")
            index = len(poses)
            poses.append(matrix[:3, :4])
            if values is None and scale == 1 and raw.dtype == np.uint8:
                if codes is None:
                    codes = np.empty((n_frames, *raw.shape), dtype=np.uint8)
                codes[index] = raw
                continue
            rgba = raw.astype(np.float32) / (255.0 if raw.dtype == np.uint8 else 65535.0)  # as read_rgba
            rgb = rgba[..., :3] * rgba[..., 3:] + background * (1.0 - rgba[..., 3:])
            small = area_downscale(rgb, scale)  # composite, then average: each pixel's mean colour
            if values is None:  # first frame that cannot stay as codes: earlier frames become values too
                values = np.empty((n_frames, *small.shape), dtype=np.float32)
                if codes is not None:
                    values[:index] = Images(codes[:index], background)[:]
                    codes = None
            values[index] = small
    images = Images(codes, background) if values is None else Images(values)
    height, width = images.shape[1:3]
    n_train, n_test = counts["train"], counts["test"]
    bounds = np.tile(np.array([[BLENDER_NEAR, BLENDER_FAR]], dtype=np.float32), (n_train + n_test, 1))
    return Scene(
        name=datadir.resolve().name,
        images=images,
        poses=np.stack(poses).astype(np.float32),
        height=int(height),
        width=int(width),
        focal=float(0.5 * width / math.tan(0.5 * fov)),
        bounds=bounds,
        near=BLENDER_NEAR,
        far=BLENDER_FAR,
        use_ndc=False,
        i_train=np.arange(n_train, dtype=np.int64),
        i_test=np.arange(n_train, n_train + n_test, dtype=np.int64),
        render_poses=orbit_path(),
        scene_to_world=np.eye(4),
        aabb=BLENDER_AABB,
    )
