"""Reading a nerfstudio / instant-ngp ``transforms.json`` (the layout ``enerf.data.nerfstudio``
describes): its frames whose image exists, the train / test splits it lists, and each frame's
camera (``enerf.cameras.lens.Camera``). The writer is ``enerf.data.transforms_writer``; the loader
that turns a capture into a ``Scene`` is ``enerf.data.nerfstudio``.

A capture may also come as Blender-style ``transforms_train.json`` (+ ``transforms_test.json``),
as TensoRF's and instant-ngp's own-data recipes write it for real photos: ``read_capture_transforms``
reads the two as one ``transforms.json``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cameras.lens import Camera
from ..errors import DataError
from .llff import IMAGE_SUFFIXES, read_json_object

__all__ = ["Frame", "CAMERA_MODELS", "read_transforms", "read_capture_transforms", "parse_frames", "split_frames",
           "frame_camera", "image_file", "finite_matrix"]

# camera_model -> lens model of enerf.cameras.lens (perspective models read whatever coefficients are given)
CAMERA_MODELS = {"PINHOLE": "OPENCV", "SIMPLE_PINHOLE": "OPENCV", "SIMPLE_RADIAL": "OPENCV", "RADIAL": "OPENCV",
                 "OPENCV": "OPENCV", "OPENCV_FISHEYE": "OPENCV_FISHEYE"}
_COEFFICIENTS = ("k1", "k2", "k3", "k4", "p1", "p2")
_ANY_SUFFIX = IMAGE_SUFFIXES + tuple(s.upper() for s in IMAGE_SUFFIXES)
# The camera keys a frame may carry or take from the top level of its file (``frame_camera``).
_INTRINSICS = ("camera_model", "fl_x", "fl_y", "cx", "cy", "w", "h", "camera_angle_x", "camera_angle_y") + _COEFFICIENTS


@dataclass(frozen=True)
class Frame:
    """One listed frame whose image exists."""

    index: int  # position in the json's frames list
    path: Path  # the image file
    key: str  # its path relative to the json's folder, posix, without image suffix (split matching)
    c2w: np.ndarray  # [4, 4] float64 camera-to-world as stored
    entry: dict  # the frame's json object (per-frame intrinsics)


def read_transforms(path: Path) -> dict:
    """The json object of a ``transforms.json``; DataError (one line naming it) when it is missing,
    not JSON, not an object or lists no frames."""
    meta = read_json_object(path, "a nerfstudio capture needs transforms.json")
    frames = meta.get("frames")
    if not isinstance(frames, list) or not frames:
        raise DataError(f"{path}: no frames listed (expected a non-empty 'frames' list)")
    return meta


def read_capture_transforms(datadir: Path, testskip: int = 1) -> tuple[dict, Path]:
    """A capture folder's frames as one ``transforms.json`` object, and the file to name in messages.

    ``transforms.json`` when the folder has one; else the Blender-style ``transforms_train.json``
    with ``transforms_test.json`` when there is one: the frames of both (a file listed in both
    once), each with its own file's top-level camera keys, and ``train_filenames`` /
    ``test_filenames`` as the two files list them (every ``testskip``-th test frame; without a
    test file the loader holds frames out by ``llffhold``, as the Blender loader does).

    Raises:
        DataError: a missing or malformed file (``read_transforms``).
    """
    datadir = Path(datadir)
    single = datadir / "transforms.json"
    if single.is_file() or not (datadir / "transforms_train.json").is_file():
        return read_transforms(single), single
    train_path, test_path = datadir / "transforms_train.json", datadir / "transforms_test.json"
    parts = [("train", read_transforms(train_path))]
    if test_path.is_file():
        parts.append(("test", read_transforms(test_path)))
    meta = {k: v for k, v in parts[0][1].items() if k not in ("frames", "train_filenames", "test_filenames",
                                                              "val_filenames")}
    frames, seen, lists = [], set(), {}
    for split, part in parts:
        camera = {k: part[k] for k in _INTRINSICS if k in part}
        entries = part["frames"] if split == "train" else part["frames"][::testskip]
        for entry in entries:
            entry = {**camera, **entry} if isinstance(entry, dict) else entry
            rel = entry.get("file_path") if isinstance(entry, dict) else None
            if isinstance(rel, str) and rel:
                lists.setdefault(f"{split}_filenames", []).append(rel)
                if _key(rel) in seen:
                    continue
                seen.add(_key(rel))
            frames.append(entry)  # parse_frames names a malformed one
    meta["frames"] = frames
    if len(parts) == 2:
        meta.update(lists)
    return meta, train_path


def _key(rel: str) -> str:
    """Split-matching key of a file path relative to the json's folder: posix, no './', no image suffix."""
    parts = [p for p in Path(rel).as_posix().split("/") if p not in ("", ".")]
    key = "/".join(parts)
    for suffix in _ANY_SUFFIX:
        if key.endswith(suffix):
            return key[: -len(suffix)]
    return key


def image_file(base: Path, rel: str) -> Path | None:
    """The image ``rel`` names under ``base``: as written, else with a png / jpg suffix added; None if absent."""
    path = base / rel
    if path.is_file():
        return path
    for suffix in _ANY_SUFFIX:
        candidate = path.with_name(path.name + suffix)
        if candidate.is_file():
            return candidate
    return None


def finite_matrix(value, rows: int) -> np.ndarray | None:
    try:
        matrix = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if matrix.shape == (4, 4) and rows == 3:
        matrix = matrix[:3]
    return matrix if matrix.shape == (rows, 4) and np.isfinite(matrix).all() else None


def parse_frames(meta: dict, json_path: Path) -> tuple[list[Frame], int]:
    """The listed frames whose image exists, sorted by file name, and the number skipped.

    Raises:
        DataError: a frame without file_path or a finite 4 x 4 transform_matrix, or a file_path
            outside the json's folder.
    """
    base = json_path.parent
    root = base.resolve()
    frames, missing = [], 0
    for k, entry in enumerate(meta["frames"]):
        where = f"{json_path}: frame {k}"
        if not isinstance(entry, dict) or not isinstance(entry.get("file_path"), str) or not entry["file_path"]:
            raise DataError(f"{where} needs a file_path (the image, relative to the json's folder)")
        rel = entry["file_path"]
        if "transform_matrix" not in entry:
            raise DataError(f"{where} ({rel}) has no transform_matrix (its 4 x 4 camera-to-world matrix)")
        c2w = finite_matrix(entry["transform_matrix"], 4)
        if c2w is None:
            shape = np.shape(entry["transform_matrix"]) if isinstance(entry["transform_matrix"], list) else "?"
            raise DataError(f"{where} ({rel}): transform_matrix must be a finite 4 x 4 matrix, got shape {shape}")
        resolved = (base / rel).resolve()
        if root != resolved and root not in resolved.parents:
            raise DataError(f"{where}: file_path {rel!r} points outside {base}; file paths must lie in the json's "
                            "folder")
        path = image_file(base, rel)
        if path is None:
            missing += 1
            continue
        frames.append(Frame(k, path, _key(path.resolve().relative_to(root).as_posix()), c2w, entry))
    frames.sort(key=lambda f: f.key)
    return frames, missing


def split_frames(frames: list[Frame], meta: dict, json_path: Path, llffhold: int) -> tuple[np.ndarray, np.ndarray]:
    """``(i_train, i_test)`` into ``frames``: ``train_filenames`` / ``test_filenames`` (or
    ``val_filenames``) when the json has them, else every ``llffhold``-th frame held out (0: none).

    Raises:
        DataError: a split list that is not a list of strings, or names a file no frame lists.
    """
    keys = {f.key: i for i, f in enumerate(frames)}
    listed = {_key(e["file_path"]) for e in meta["frames"]}
    chosen = {}
    for split, names in (("train", "train_filenames"), ("test", "test_filenames"), ("test", "val_filenames")):
        if split in chosen or names not in meta:
            continue
        value = meta[names]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DataError(f"{json_path}: {names} must be a list of file names")
        unknown = [v for v in value if _key(v) not in listed]
        if unknown:
            raise DataError(f"{json_path}: {names} names {len(unknown)} file(s) no frame lists, e.g. {unknown[0]!r}")
        chosen[split] = sorted({keys[_key(v)] for v in value if _key(v) in keys})  # missing images: skipped
    n = len(frames)
    if chosen:
        everything = set(range(n))
        i_train = chosen.get("train", sorted(everything - set(chosen.get("test", []))))
        i_test = chosen.get("test", sorted(everything - set(i_train)))
    else:
        i_test = list(range(0, n, llffhold)) if llffhold > 0 else []
        i_train = sorted(set(range(n)) - set(i_test))
    return np.asarray(i_train, dtype=np.int64), np.asarray(i_test, dtype=np.int64)


def _number(where: str, key: str, value, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
            positive and value <= 0):
        raise DataError(f"{where}: {key} must be a {'positive ' if positive else ''}number, got {value!r}")
    return float(value)


def _declared_scale(image: Path, json_path: Path, declared: tuple[float, float],
                    size: tuple[int, int]) -> tuple[float, float]:
    """(sx, sy) from the ``w`` / ``h`` a json declares to an image's real size (some tools write
    the original photos' size next to downscaled copies): accepted when the aspect ratio agrees,
    i.e. scaling the declared height by the widths' ratio gives the image's height to within a
    pixel (and the other way round).

    Raises:
        DataError: another aspect ratio, with what to do.
    """
    (w, h), (width, height) = declared, size
    if abs(h * width / w - height) > 1.0 or abs(w * height / h - width) > 1.0:
        raise DataError(f"{image}: image is {width}x{height} but {json_path.name} says w = {w:g}, h = {h:g}, another "
                        "aspect ratio; point file_path at the photos the poses were made from, or fix w / h and the "
                        "intrinsics")
    return width / w, height / h


def frame_camera(meta: dict, frame: Frame, json_path: Path, image_size: tuple[int, int],
                 notes: set[str] | None = None) -> Camera:
    """The camera of ``frame`` (its own intrinsics over the json's top-level ones) for its image of
    ``image_size`` (width, height), the full-resolution photo the intrinsics describe.

    When the json's ``w`` / ``h`` differ from the image's size with the same aspect ratio, ``fl_x``,
    ``fl_y``, ``cx``, ``cy`` are scaled to the image (``fl_x * width / w``, ``cy * height / h``, ...)
    and one line saying so is added to ``notes``.

    Raises:
        DataError: no focal length, an unknown camera_model, non-numeric values, or w / h of
            another aspect ratio than the image's.
    """
    where = f"{json_path}"

    def get(key):
        return frame.entry.get(key, meta.get(key))

    name = get("camera_model") or "OPENCV"
    if name not in CAMERA_MODELS:
        raise DataError(f"{where}: camera_model {name!r} is not supported; use one of {', '.join(CAMERA_MODELS)} "
                        "(or undistort the images to PINHOLE first)")
    width, height = image_size
    sx = sy = 1.0  # declared pixels -> the image's pixels (fl_x, fl_y, cx, cy are in declared pixels)
    declared = (get("w"), get("h"))
    if declared != (None, None):
        w = _number(where, "w", declared[0], positive=True) if declared[0] is not None else width
        h = _number(where, "h", declared[1], positive=True) if declared[1] is not None else height
        if (round(w), round(h)) != (width, height):
            sx, sy = _declared_scale(frame.path, json_path, (w, h), (width, height))
            if notes is not None:
                notes.add(f"{json_path}: w = {w:g}, h = {h:g} but the images are {width}x{height} (same aspect ratio); "
                          f"fl_x, fl_y, cx, cy scaled by {width / w:.4g}")
    if get("fl_x") is not None:
        fx = _number(where, "fl_x", get("fl_x"), positive=True) * sx
    elif get("camera_angle_x") is not None:
        angle = _number(where, "camera_angle_x", get("camera_angle_x"), positive=True)
        if angle >= math.pi:
            raise DataError(f"{where}: camera_angle_x must be below pi, got {angle}")
        fx = 0.5 * width / math.tan(0.5 * angle)
    else:
        raise DataError(f"{where}: no intrinsics; give fl_x (and fl_y, cx, cy) or camera_angle_x, at the top level "
                        "or per frame")
    if get("fl_y") is not None:
        fy = _number(where, "fl_y", get("fl_y"), positive=True) * sy
    elif get("camera_angle_y") is not None and get("fl_x") is None:
        fy = 0.5 * height / math.tan(0.5 * _number(where, "camera_angle_y", get("camera_angle_y"), positive=True))
    else:
        fy = fx
    cx = _number(where, "cx", get("cx")) * sx if get("cx") is not None else 0.5 * width
    cy = _number(where, "cy", get("cy")) * sy if get("cy") is not None else 0.5 * height
    coefficients = {k: _number(where, k, get(k)) if get(k) is not None else 0.0 for k in _COEFFICIENTS}
    if CAMERA_MODELS[name] == "OPENCV_FISHEYE":
        coefficients.update(p1=0.0, p2=0.0)
    return Camera(CAMERA_MODELS[name], width, height, fx, fy, cx, cy, **coefficients)
