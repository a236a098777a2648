"""What a scene's folder holds, read before anything loads it: its layout and what its cameras show,
from which ``enerf.config.resolve`` chooses the device preset (``describe_scene``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..cameras.scene_kind import classify_cameras
from ..config import DataConfig
from ..config.resolve import SceneShape
from ..errors import EnerfError
from .loaders import blender_style_capture, dataset_type_of, read_camera_poses
from .resolve import resolve_scene_dir

__all__ = ["describe_scene", "scene_layout", "PHOTOS_NOTE"]

# What the start line says of a Blender-layout folder of photos without alpha, read as a capture.
PHOTOS_NOTE = "transforms_train.json of photos without alpha, read as a capture (--dataset_type blender if not); "
_DEFAULTS = DataConfig()


def scene_layout(flags: Mapping[str, Any], data_root: Path) -> str:
    """``llff``, ``blender`` or ``nerfstudio``: ``flags["dataset_type"]`` when set, else what the scene's
    folder holds (the embedded demo scene is written as LLFF); ``llff`` when the folder cannot be
    found, so that loading it reports the problem in its own words."""
    dataset_type = flags.get("dataset_type") or "auto"
    if dataset_type != "auto":
        return dataset_type
    scene = flags.get("scene") or _DEFAULTS.scene
    datadir = flags.get("datadir") or ""
    if scene == "demo" and not datadir and not (Path(data_root) / "demo").is_dir():
        return "llff"  # made on first use by enerf.synthetic.scene, in LLFF layout
    try:
        return dataset_type_of(resolve_scene_dir(scene, datadir, data_root), "auto")
    except (EnerfError, OSError):
        return "llff"


def describe_scene(flags: Mapping[str, Any], data_root: Path) -> SceneShape:
    """The layout (``scene_layout``) and what the cameras show: ``flags["scene_kind"]`` when set
    (not auto), else what the scene's cameras show (``enerf.cameras.scene_kind``); the layout's own
    rays (LLFF: forward, transforms.json: walk-around) when its cameras cannot be read, so that
    loading it reports the problem in its own words. A Blender-layout folder of photos (layout
    nerfstudio) is decided by its cameras like a capture, and the line says so (``PHOTOS_NOTE``).

    Args:
        flags: field name -> value of what was set (``scene``, ``datadir``, ``dataset_type``, ``scene_kind``).
    """
    layout = scene_layout(flags, data_root)
    chosen = flags.get("scene_kind") or _DEFAULTS.scene_kind
    if layout == "blender":
        return SceneShape(layout, "walkaround", "Blender scene (its bounded box)")
    if chosen != "auto":
        name = "forward-facing" if chosen == "forward" else "walk-around"
        return SceneShape(layout, chosen, f"{name} (--scene_kind {chosen})")
    try:
        folder = resolve_scene_dir(flags.get("scene") or _DEFAULTS.scene, flags.get("datadir") or "", data_root)
        cameras = read_camera_poses(folder, layout)
        photos = PHOTOS_NOTE if layout == "nerfstudio" and blender_style_capture(folder) else ""
    except (EnerfError, OSError):
        cameras, photos = None, ""
    if cameras is None or len(cameras) < 2:
        return SceneShape(layout, "forward" if layout == "llff" else "walkaround", photos.rstrip("; "))
    found = classify_cameras(cameras)
    other = "walkaround" if found.kind == "forward" else "forward"
    return SceneShape(layout, found.kind, f"{photos}{found.describe()}, --scene_kind {other} if not")
