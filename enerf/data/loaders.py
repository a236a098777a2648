"""Scene loaders by dataset type: resolve a scene's folder and load it into a ``Scene``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import numpy as np

from ..cameras.scene_kind import look_at_point
from ..config import DataConfig
from ..errors import ConfigError, DataError
from .blender import blender_cameras, frames_have_alpha, load_blender
from .llff import load_llff, read_poses_bounds
from .nerfstudio import load_nerfstudio
from .resolve import resolve_scene_dir
from .scene import Scene
from .transforms_reader import parse_frames, read_capture_transforms

__all__ = ["LOADERS", "dataset_type_of", "blender_style_capture", "read_camera_poses", "load_scene", "with_far",
           "far_split"]


def _load_llff(cfg: DataConfig, scene_dir: Path, white_bkgd: bool) -> Scene:
    around = cfg.scene_kind == "walkaround"  # world-space rays, cameras spherified around what they look at
    return load_llff(scene_dir, factor=cfg.factor, recenter=cfg.recenter, bd_factor=cfg.bd_factor,
                     spherify=cfg.spherify or around, llffhold=cfg.llffhold, use_ndc=cfg.use_ndc and not around)


def _load_blender(cfg: DataConfig, scene_dir: Path, white_bkgd: bool) -> Scene:
    return load_blender(scene_dir, half_res=cfg.half_res, factor=cfg.factor, testskip=cfg.testskip,
                        white_bkgd=white_bkgd, llffhold=cfg.llffhold)


def _load_nerfstudio(cfg: DataConfig, scene_dir: Path, white_bkgd: bool) -> Scene:
    return load_nerfstudio(scene_dir, factor=cfg.factor, llffhold=cfg.llffhold, white_bkgd=white_bkgd,
                           ndc=cfg.scene_kind == "forward", testskip=cfg.testskip)


# dataset_type -> loader(cfg, scene folder, white_bkgd); "auto" looks at the folder's files.
LOADERS: dict[str, Callable[[DataConfig, Path, bool], Scene]] = {"llff": _load_llff, "blender": _load_blender,
                                                                 "nerfstudio": _load_nerfstudio}


def dataset_type_of(scene_dir: Path, dataset_type: str) -> str:
    """``dataset_type``, or for ``auto``: blender when the folder has a ``transforms_*.json`` whose
    frames carry a meaningful alpha (rendered objects on a transparent background:
    ``blender.frames_have_alpha``), nerfstudio when those frames are photos without one (read as a
    capture, ``blender_style_capture``) or the folder has a ``transforms.json`` (one file for all
    frames), llff when it has ``poses_bounds.npy`` (or an ``images*/`` folder, so the LLFF loader
    names what is missing).

    Raises:
        DataError: ``auto`` on a folder with none of these.
    """
    if dataset_type != "auto":
        return dataset_type
    scene_dir = Path(scene_dir)
    if any((scene_dir / f"transforms_{split}.json").is_file() for split in ("train", "val", "test")):
        return "blender" if frames_have_alpha(scene_dir) else "nerfstudio"
    if (scene_dir / "transforms.json").is_file():
        return "nerfstudio"
    if (scene_dir / "poses_bounds.npy").is_file() or any(
        p.is_dir() and p.name.startswith("images") for p in scene_dir.iterdir()
    ):
        return "llff"
    if any(p.suffix.lower() in (".jpg", ".jpeg", ".png") for p in scene_dir.iterdir()):  # photos, no cameras yet
        raise DataError(f"{scene_dir}: photos without camera poses; pose them first: enerf data images {scene_dir} "
                        "--out SCENE, then enerf train --datadir SCENE")
    raise DataError(f"{scene_dir}: none of transforms_train.json (Blender), transforms.json (nerfstudio) or "
                    "poses_bounds.npy (LLFF) found; is this the scene folder?")


def blender_style_capture(scene_dir: Path) -> bool:
    """Whether ``dataset_type_of`` reads this folder as a capture although it is in the Blender
    layout (``transforms_train.json`` of photos without alpha, no ``transforms.json``)."""
    scene_dir = Path(scene_dir)
    return ((scene_dir / "transforms_train.json").is_file() and not (scene_dir / "transforms.json").is_file()
            and dataset_type_of(scene_dir, "auto") == "nerfstudio")


def read_camera_poses(scene_dir: Path, layout: str) -> np.ndarray:
    """The camera-to-world poses of a scene folder, read without its images.

    Args:
        layout: llff | blender | nerfstudio (``dataset_type_of``)
    Returns:
        np.ndarray  # [N, 3, 4] OpenGL axes
    Raises:
        DataError: a missing or malformed pose file (the loader's own message).
    """
    scene_dir = Path(scene_dir)
    if layout == "llff":
        raw, _ = read_poses_bounds(scene_dir / "poses_bounds.npy")
        # [down, right, back, t] -> [right, up, back, t], as load_llff
        return np.concatenate([raw[:, :, 1:2], -raw[:, :, 0:1], raw[:, :, 2:4]], axis=2)[:, :3, :4]
    if layout == "blender":
        return blender_cameras(scene_dir)
    meta, json_path = read_capture_transforms(scene_dir)
    frames, _ = parse_frames(meta, json_path)
    if not frames:  # the loader names the missing images
        return np.zeros((0, 3, 4))
    return np.stack([f.c2w[:3, :4] for f in frames])


def load_scene(cfg: DataConfig, data_root: Path, white_bkgd: bool = False) -> Scene:
    """Resolve ``cfg.scene`` / ``cfg.datadir`` and load it with its dataset's loader (``LOADERS``).

    ``white_bkgd``: Blender frames are composited on white (else black), as the renderer's background."""
    if cfg.dataset_type not in (*LOADERS, "auto"):
        raise ConfigError(f"dataset_type {cfg.dataset_type!r} is not one of auto, {', '.join(LOADERS)}")
    scene_dir = resolve_scene_dir(cfg.scene, cfg.datadir, data_root)
    scene = LOADERS[dataset_type_of(scene_dir, cfg.dataset_type)](cfg, scene_dir, white_bkgd)
    if cfg.holdout == "far":
        scene = far_split(scene)
    return with_far(scene, cfg.far)


def far_split(scene: Scene) -> Scene:
    """``scene`` with as many held-out views as its split has, now those whose camera centres stand
    farthest from the centre of the capture (``--holdout far``): the point nearest to all optical
    axes (``enerf.cameras.scene_kind.look_at_point``), or the mean camera centre where the axes
    meet behind the cameras or not at all. Ties go to the lower index; both lists stay sorted.

    Raises:
        ConfigError: the scene holds no held-out view to move (``--llffhold 0``).
    """
    n_test = len(scene.i_test)
    if n_test == 0:
        raise ConfigError("--holdout far holds out as many views as the split has, and it has none "
                          "(--llffhold 0); set --llffhold N", ("holdout",))
    views = np.union1d(scene.i_train, scene.i_test)
    poses = np.asarray(scene.poses, np.float64)[views]
    centre = look_at_point(poses)
    if centre is None:
        centre = poses[:, :3, 3].mean(0)
    distance = np.linalg.norm(poses[:, :3, 3] - centre, axis=1)
    far = views[np.sort(np.argsort(-distance, kind="stable")[:n_test])]
    return dataclasses.replace(scene, i_train=np.setdiff1d(views, far).astype(np.int64), i_test=far.astype(np.int64))


def with_far(scene: Scene, far: float) -> Scene:
    """``scene`` with world-space rays ending at ``far`` (0: unchanged; NDC scenes: unchanged, their
    rays span t in [0, 1] out to infinity).

    Raises:
        ConfigError: ``far`` not beyond the scene's near bound.
    """
    if far <= 0 or scene.use_ndc:
        return scene
    if far <= scene.near:
        raise ConfigError(f"far {far} must exceed the scene's near bound {scene.near}", ("far",))
    return dataclasses.replace(scene, far=float(far))
