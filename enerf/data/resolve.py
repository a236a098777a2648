"""Turn a scene name / folder from the config into a scene folder on disk."""

from __future__ import annotations

from pathlib import Path

from ..errors import DataError
from .synthetic import make_synthetic_scene

__all__ = ["resolve_scene_dir", "LLFF_URL"]

LLFF_URL = "https://drive.google.com/drive/folders/128yBriW1IG_3NJ5Rp7APSTZsJqdJdfc1"


def resolve_scene_dir(scene: str, datadir: str, data_root: Path) -> Path:
    """The folder of the scene to load.

    * ``datadir`` set: that folder (it must exist).
    * ``scene == "demo"``: ``data_root/demo``, written by ``make_synthetic_scene`` on first use.
    * any other name: ``data_root/nerf_llff_data/<scene>`` (the unzipped LLFF download).

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
    path = data_root / "nerf_llff_data" / scene
    if not path.is_dir():
        raise DataError(
            f"{path}/ not found: download nerf_llff_data ({LLFF_URL}) "
            f"and unzip it under {data_root}/, or pass --datadir"
        )
    return path
