"""Turn a scene name / folder from the config into a scene folder on disk."""

from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from ..synthetic.scene import make_synthetic_scene

__all__ = ["resolve_scene_dir", "find_scene_dir", "LLFF_URL"]

# The NeRF authors' release of nerf_llff_data and nerf_synthetic.
LLFF_URL = "https://drive.google.com/drive/folders/128yBriW1IG_3NJ5Rp7APSTZsJqdJdfc1"
RELEASE_FOLDERS = ("nerf_llff_data", "nerf_synthetic")


def resolve_scene_dir(scene: str, datadir: str, data_root: Path) -> Path:
    """The folder of the scene to load.

    * ``datadir`` set: that folder (it must exist).
    * ``scene == "demo"``: ``data_root/demo``, written by ``make_synthetic_scene`` on first use.
    * any other name: ``data_root/nerf_llff_data/<scene>`` (the unzipped LLFF release), else
      ``data_root/nerf_synthetic/<scene>`` (the Blender scenes).

    Raises:
        DataError: the folder does not exist, with where to put the data.
    """
    if datadir:
        path = Path(datadir)
        if not path.is_dir():
            raise DataError(f"{path}: --datadir folder not found")
        return path
    data_root = Path(data_root)
    if scene == "demo":
        path = data_root / "demo"
        if not path.is_dir():
            make_synthetic_scene(path)
        return path
    candidates = [data_root / folder / scene for folder in RELEASE_FOLDERS]
    for path in candidates:
        if path.is_dir():
            return path
    raise DataError(
        f"scene {scene!r} not found in {' or '.join(str(p) + '/' for p in candidates)}: download nerf_llff_data "
        f"or nerf_synthetic ({LLFF_URL}) and unzip it under {data_root}/, or pass --datadir"
    )


def find_scene_dir(scene: str, datadir: str, data_root: Path) -> Path | None:
    """The folder ``resolve_scene_dir`` would load, or None when it is not there (nothing is
    written: a missing demo scene is None too)."""
    if datadir:
        return Path(datadir) if Path(datadir).is_dir() else None
    folders = ["demo"] if scene == "demo" else [f"{folder}/{scene}" for folder in RELEASE_FOLDERS]
    return next((Path(data_root) / f for f in folders if (Path(data_root) / f).is_dir()), None)
