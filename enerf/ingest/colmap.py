"""``enerf data colmap``: a folder of photos to a trainable scene, with pycolmap (COLMAP's SIFT
extraction, matching and incremental mapping, on the CPU, no binary to install).

Output (``--layout llff``, what ``enerf train --datadir SCENE`` reads)::

    SCENE/
      images/            the registered photos, copied unchanged
      images_<f>/        PNG copies downscaled by each factor f (pixel-block averages)
      poses_bounds.npy   [N, 17]: LLFF's 3 x 5 [down, right, back, centre, hwf] pose + near, far
      sparse/0/          the COLMAP model (cameras.bin, images.bin, points3D.bin...)

``--layout nerfstudio`` writes ``transforms.json`` in place of ``poses_bounds.npy``, as nerfstudio's
``ns-process-data`` does: camera-to-world with OpenGL axes in COLMAP's world turned z-up (the
turn is stored as ``applied_transform``), the camera's model and distortion mapped as
nerfstudio's ``colmap_utils`` maps them (``enerf.data.transforms_writer.colmap_camera_fields``), per
frame ``file_path`` ``images/NAME`` and the ``near`` / ``far`` depths. ``--layout blender`` writes
the same file in COLMAP's own world frame (no ``applied_transform``). ``enerf train`` reads both
(``enerf.data.nerfstudio``, which undistorts the photos).

Photos are read upright: one with an EXIF orientation tag is turned as the tag says before
anything else (``enerf.ingest.photos.copy_upright``). ``pose_folder`` is the posing itself, on a folder of images
already in place; ``enerf data images`` (``enerf.cli.data``) and ``enerf data video``
(``enerf.ingest.video``) use it too.

All photos share one camera, SIMPLE_RADIAL by default (focal length, principal point at the
centre, one radial coefficient), as LLFF's ``imgs2poses.py`` sets COLMAP up; like it, the LLFF
layout reports the radial coefficient but does not undistort the images. ``--camera_model``
picks another COLMAP model (OPENCV as ns-process-data, PINHOLE...); the LLFF layout takes only
those with one focal length. The mapper keeps the model with the most registered photos of
those COLMAP builds (``multiple_models``, COLMAP's default: a degenerate first model of two
photos does not end it). The scene is built in a temporary folder beside ``SCENE`` and renamed
into place at the end, so ``SCENE`` is absent or complete.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path
from typing import Callable

import imageio.v3 as iio
import numpy as np

from ..errors import ConfigError, DataError, EnerfError
from ..progress import progress_bar
from ..data.llff import area_downscale, read_image
from ..data.transforms_writer import colmap_camera_fields, transforms_meta, write_transforms
from .colmap_poses import depth_bounds, llff_pose_from_cam_from_world, opengl_c2w_from_cam_from_world, poses_bounds_rows
from .photos import MIN_IMAGES, built_beside, check_out, collect_photos, copy_upright

__all__ = ["colmap_scene", "pose_folder", "check_pose_options", "summary_line", "import_pycolmap",
           "NERFSTUDIO_APPLIED", "MATCHERS", "LAYOUTS", "CAMERA_MODELS", "LLFF_CAMERA_MODELS"]

MATCHERS = ("exhaustive", "sequential")
LAYOUTS = ("llff", "nerfstudio", "blender")
CAMERA_MODELS = ("SIMPLE_RADIAL", "SIMPLE_PINHOLE", "RADIAL", "PINHOLE", "OPENCV", "OPENCV_FISHEYE")
LLFF_CAMERA_MODELS = ("SIMPLE_RADIAL", "SIMPLE_PINHOLE", "RADIAL")  # one focal length: poses_bounds.npy's hwf
# ns-process-data's applied_transform: COLMAP's world (y down for the first camera) turned z-up
NERFSTUDIO_APPLIED = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, -1.0, 0.0, 0.0]])
INSTALL_HINT = 'pip install -e ".[colmap]"'


def import_pycolmap():
    """The pycolmap module, or an EnerfError naming the install command."""
    try:
        import pycolmap
    except ImportError:
        raise EnerfError(f"enerf data colmap needs pycolmap, which is not installed: {INSTALL_HINT}") from None
    return pycolmap


def _extract(pycolmap, tmp: Path, names: list[str], camera_model: str, progress: bool) -> tuple[int, int]:
    """SIFT features of ``tmp/images/<names>`` into ``tmp/database.db``, all photos on one camera;
    in chunks (the first makes the camera, the others reuse it) so that a bar counts the photos.
    Returns (images, keypoints) in the database."""
    database = tmp / "database.db"
    reader = pycolmap.ImageReaderOptions()
    reader.camera_model = camera_model
    chunk = max(1, math.ceil(len(names) / 20))
    with progress_bar(len(names), "extraction", enabled=progress, unit="image") as bar:
        for first in range(0, len(names), chunk):
            pycolmap.extract_features(database, tmp / "images", image_names=names[first:first + chunk],
                                      camera_mode=pycolmap.CameraMode.SINGLE, reader_options=reader,
                                      device=pycolmap.Device.cpu)
            if reader.existing_camera_id < 0:
                with pycolmap.Database.open(database) as db:
                    reader.existing_camera_id = db.read_all_cameras()[0].camera_id
            bar.update(len(names[first:first + chunk]))
    with pycolmap.Database.open(database) as db:
        return db.num_images(), db.num_keypoints()


def _extract_and_match(pycolmap, tmp: Path, names: list[str], matcher: str, overlap: int, camera_model: str,
                       say: Callable[[str], None], progress: bool = True) -> dict[str, float]:
    """Extraction and matching (``MATCHERS``; sequential: each image with the ``overlap`` next ones
    in name order); returns the seconds of each stage."""
    start = time.perf_counter()
    n_images, n_keypoints = _extract(pycolmap, tmp, names, camera_model, progress)
    seconds = {"extraction": time.perf_counter() - start}
    say(f"extraction: {n_keypoints:,} SIFT features in {n_images} images "
        f"({n_keypoints / max(n_images, 1):,.0f} per image), {seconds['extraction']:.1f} s")
    start = time.perf_counter()
    database = tmp / "database.db"
    if matcher == "exhaustive":
        pycolmap.match_exhaustive(database, device=pycolmap.Device.cpu)
    else:
        pairing = pycolmap.SequentialPairingOptions()
        pairing.overlap = overlap
        # Linear: i with i + 1 ... i + overlap. COLMAP's default (quadratic) pairs i with i + 1, 2, 4 ...
        # 2^(overlap-1): on beer.mp4 (a can on repeating floor tiles, filmed twice around) its far
        # pairs verified wrongly and put runs of frames across the loop (3 leaps in the path; 0 linear)
        pairing.quadratic_overlap = False
        pycolmap.match_sequential(database, pairing_options=pairing, device=pycolmap.Device.cpu)
    with pycolmap.Database.open(database) as db:
        n_pairs, n_verified, n_inliers = db.num_matched_image_pairs(), db.num_verified_image_pairs(), db.num_inlier_matches()
    seconds["matching"] = time.perf_counter() - start
    what = f"sequential, overlap {overlap}" if matcher == "sequential" else matcher
    say(f"matching ({what}): {n_pairs:,} image pairs matched, {n_verified:,} verified, "
        f"{n_inliers:,} inlier matches, {seconds['matching']:.1f} s")
    return seconds


def _map(pycolmap, tmp: Path, n_photos: int, seed: int, say: Callable[[str], None], progress: bool = False,
         retry: str = "the photos need more overlap and texture"):
    start = time.perf_counter()
    pycolmap.set_random_seed(seed)
    options = pycolmap.IncrementalPipelineOptions()
    options.multiple_models = True  # COLMAP's default: a degenerate first model does not end the mapping
    options.extract_colors = True
    options.random_seed = seed
    (tmp / "sparse").mkdir()
    with progress_bar(n_photos, "mapping", enabled=progress, unit="image") as bar:
        def registered() -> None:  # COLMAP calls it per image registered (in any model)
            bar.update(1 if bar.n < n_photos else 0)

        models = pycolmap.incremental_mapping(tmp / "database.db", tmp / "images", tmp / "sparse", options=options,
                                              next_image_callback=registered)
    if not models:
        raise DataError(f"COLMAP registered none of the {n_photos} images (no image pair with enough matches to "
                        f"start); {retry}")
    key = max(models, key=lambda k: models[k].num_reg_images())
    model = models[key]
    sizes = sorted((m.num_reg_images() for m in models.values()), reverse=True)
    kept = f" (the largest of {len(models)} models: {', '.join(map(str, sizes))} images)" if len(models) > 1 else ""
    say(f"mapping: {model.num_reg_images()} / {n_photos} images registered{kept}, {model.num_points3D():,} points, "
        f"mean reprojection error {model.compute_mean_reprojection_error():.2f} px, {time.perf_counter() - start:.1f} s")
    for other in models:  # keep the chosen model as sparse/0
        if other != key:
            shutil.rmtree(tmp / "sparse" / str(other), ignore_errors=True)
    if key != 0:
        os.replace(tmp / "sparse" / str(key), tmp / "sparse" / "0")
    return model


def _camera_geometry(model) -> list[dict]:
    """Per registered image (sorted by name): name, cam_from_world R, t and near / far depths."""
    xyz = {pid: point.xyz for pid, point in model.points3D.items()}
    views = []
    for image in model.images.values():
        if not image.has_pose:
            continue
        pose = image.cam_from_world()
        rotation, translation = pose.rotation.matrix(), np.asarray(pose.translation)
        seen = [xyz[p.point3D_id] for p in image.get_observation_points2D() if p.point3D_id in xyz]
        if not seen:
            raise DataError(f"{image.name}: registered without any 3D point; cannot bound its depth")
        near, far = depth_bounds(np.stack(seen), rotation, translation)
        views.append({"name": image.name, "R": rotation, "t": translation, "near": near, "far": far})
    return sorted(views, key=lambda v: v["name"])


def _write_downscaled(tmp: Path, names: list[str], factors: list[int]) -> None:
    """``images_<f>/<stem>.png`` for every factor: pixel-block averages of ``images/<name>``."""
    for factor in factors:
        (tmp / f"images_{factor}").mkdir()
    for name in names:
        img = read_image(tmp / "images" / name)
        for factor in factors:
            small = np.clip(np.round(area_downscale(img, factor) * 255.0), 0, 255).astype(np.uint8)
            iio.imwrite(tmp / f"images_{factor}" / (Path(name).stem + ".png"), small)


def _write_transforms(path: Path, camera_fields: dict, views: list[dict], layout: str) -> None:
    """transforms.json of ``views`` (``_camera_geometry``): COLMAP's frame turned z-up as
    ns-process-data turns it (nerfstudio), or COLMAP's own frame (blender)."""
    applied = NERFSTUDIO_APPLIED if layout == "nerfstudio" else np.eye(4)[:3]
    frames = []
    for v in views:
        c2w = opengl_c2w_from_cam_from_world(v["R"], v["t"])
        frames.append({"file_path": f"images/{v['name']}", "near": v["near"], "far": v["far"],
                       "transform_matrix": np.concatenate([applied @ c2w, [[0.0, 0.0, 0.0, 1.0]]], 0)})
    write_transforms(path, transforms_meta(camera_fields, frames, applied if layout == "nerfstudio" else None))


def check_pose_options(factors, matcher: str, layout: str, camera_model: str, overlap: int = 10) -> list[int]:
    """Raise ConfigError for an unknown ``matcher`` / ``layout`` / ``camera_model``, a camera model
    the layout cannot hold, a factor < 2 or an overlap < 1; returns the factors sorted, once each."""
    if matcher not in MATCHERS:
        raise ConfigError(f"--matcher must be one of {', '.join(MATCHERS)}, got {matcher!r}")
    if layout not in LAYOUTS:
        raise ConfigError(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if camera_model not in CAMERA_MODELS:
        raise ConfigError(f"--camera_model must be one of {', '.join(CAMERA_MODELS)}, got {camera_model!r}")
    if layout == "llff" and camera_model not in LLFF_CAMERA_MODELS:
        raise ConfigError(f"--camera_model {camera_model} needs --layout nerfstudio (or blender): poses_bounds.npy "
                          f"holds one focal length, so --layout llff takes only {', '.join(LLFF_CAMERA_MODELS)}")
    if any(int(f) != f or f < 2 for f in factors):
        raise ConfigError(f"--factors must be integers >= 2, got {list(factors)}")
    if overlap < 1:
        raise ConfigError(f"--overlap must be at least 1, got {overlap}")
    return sorted({int(f) for f in factors})


def pose_folder(
    pycolmap,
    tmp: Path,
    names: list[str],
    size: tuple[int, int],
    factors: list[int],
    matcher: str,
    layout: str,
    camera_model: str,
    seed: int = 0,
    overlap: int = 10,
    min_share: float = 0.0,
    retry: str = "take more overlapping photos (or try --matcher exhaustive)",
    say: Callable[[str], None] = print,
    progress: bool = False,
) -> dict:
    """Pose the images ``tmp/images/<names>`` (all ``size`` = (width, height)) and write the scene
    into ``tmp`` (module docstring); unregistered images are removed from ``tmp/images``.

    Returns:
        dict with ``registered`` / ``unregistered`` (names), ``reprojection_error`` (px), ``hwf``,
        ``k`` (first radial coefficient), ``camera`` (``colmap_camera_fields``), ``stages``
        (seconds of extraction, matching, mapping, writing) and ``centres`` (np.ndarray  # [R, 3]
        camera centres of the registered images, in ``registered``'s order, COLMAP's frame).
    Raises:
        DataError: fewer than ``MIN_IMAGES`` images, or fewer than ``min_share`` of them, registered;
            the message ends with ``retry``, what to try.
    """
    width, height = size
    stages = _extract_and_match(pycolmap, tmp, names, matcher, overlap, camera_model, say, progress)
    start = time.perf_counter()
    model = _map(pycolmap, tmp, len(names), seed, say, progress, retry)
    stages["mapping"] = time.perf_counter() - start
    start = time.perf_counter()
    views = _camera_geometry(model)
    registered = [v["name"] for v in views]
    unregistered = [n for n in names if n not in set(registered)]
    if len(views) < max(MIN_IMAGES, math.ceil(min_share * len(names))):
        need = f"at least {MIN_IMAGES}" if len(views) < MIN_IMAGES else f"at least {100 * min_share:.0f} % of them"
        raise DataError(f"only {len(views)} of {len(names)} images registered ({100 * len(views) / len(names):.0f} %), "
                        f"{need} are needed; {retry}")
    for name in unregistered:  # the loaders pair images/ with the poses one to one
        (tmp / "images" / name).unlink()
    camera = model.cameras[next(iter(model.cameras.keys()))]
    hwf = (float(camera.height), float(camera.width), float(camera.params[0]))
    fields = colmap_camera_fields(camera.model.name, camera.params, camera.width, camera.height)
    if layout == "llff":
        poses = np.stack([llff_pose_from_cam_from_world(v["R"], v["t"], hwf) for v in views])
        bounds = np.array([[v["near"], v["far"]] for v in views])
        np.save(tmp / "poses_bounds.npy", poses_bounds_rows(poses, bounds))
        written = ["poses_bounds.npy"]
    else:
        _write_transforms(tmp / "transforms.json", fields, views, layout)
        written = ["transforms.json"]
    _write_downscaled(tmp, registered, factors)
    written += [f"images/ {width}x{height}"] + [f"images_{f}/ {width // f}x{height // f}" for f in factors]
    written += ["sparse/0"]
    (tmp / "database.db").unlink(missing_ok=True)
    stages["writing"] = time.perf_counter() - start
    say("writing: " + ", ".join(written) + f", {stages['writing']:.1f} s")
    return {
        "registered": registered, "unregistered": unregistered,
        "reprojection_error": float(model.compute_mean_reprojection_error()),
        "hwf": hwf, "k": float(fields.get("k1", 0.0)), "camera": fields, "stages": stages,
        "centres": np.stack([-v["R"].T @ v["t"] for v in views]),
    }


def colmap_scene(
    images: str | Path,
    out: str | Path,
    factors: tuple[int, ...] = (4, 8),
    matcher: str = "exhaustive",
    layout: str = "llff",
    overwrite: bool = False,
    seed: int = 0,
    camera_model: str = "SIMPLE_RADIAL",
    say: Callable[[str], None] = print,
    overlap: int = 10,
    min_share: float = 0.0,
    progress: bool = False,
) -> dict:
    """Pose the photos in ``images`` with COLMAP and write the scene to ``out`` (module docstring).
    Photos with an EXIF orientation are turned upright first (``copy_upright``).

    Returns:
        ``pose_folder``'s dict with ``out``, ``photos`` (count) and ``seconds`` added.
    Raises:
        DataError / ConfigError / EnerfError: bad input, fewer than 3 (or ``min_share``) registered
            photos, or no pycolmap; ``out`` is then left as it was.
    """
    start = time.perf_counter()
    images, out = Path(images), Path(out)
    factors = check_pose_options(factors, matcher, layout, camera_model, overlap)
    check_out(out, overwrite, images)
    photos, skipped, (width, height) = collect_photos(images)
    if min(width, height) < max(factors, default=1):
        raise ConfigError(f"{images}: photos of {width}x{height} are smaller than factor {max(factors)}; lower --factors")
    pycolmap = import_pycolmap()
    pycolmap.logging.minloglevel = 2  # COLMAP's own log: errors only; progress is printed per stage here
    note = f" (skipped {len(skipped)} other file(s): {', '.join(skipped[:5])}{', ...' if len(skipped) > 5 else ''})"
    say(f"photos: {len(photos)} of {width}x{height} in {images}" + (note if skipped else ""))

    with built_beside(out, overwrite) as tmp:
        (tmp / "images").mkdir()
        for p in photos:
            copy_upright(p, tmp / "images" / p.name)
        info = pose_folder(pycolmap, tmp, [p.name for p in photos], (width, height), factors, matcher, layout,
                           camera_model, seed, overlap, min_share, say=say, progress=progress)
    return {**info, "out": out, "photos": len(photos), "seconds": time.perf_counter() - start}


def summary_line(info: dict) -> str:
    """The last line of ``enerf data colmap|images|video``: images registered and their share,
    those left out, the reprojection error, the camera, the stage times and the whole time."""
    h, w, f = info["hwf"]
    left = info["unregistered"]
    n_reg, n_all = len(info["registered"]), len(info["registered"]) + len(left)
    note = (f"; {len(left)} did not register and were left out: {', '.join(left[:10])}{', ...' if len(left) > 10 else ''}"
            if left else "")
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in info["stages"].items())
    return (f"wrote {info['out']}: {n_reg} of {n_all} images registered ({100 * n_reg / n_all:.0f} %){note}; "
            f"mean reprojection error {info['reprojection_error']:.2f} px; {info['camera']['camera_model']} camera, "
            f"focal {f:.1f} px at {w:.0f}x{h:.0f}, k1 {info['k']:+.4f}; {stages}; {info['seconds']:.1f} s in all")
