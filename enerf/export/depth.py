"""``enerf export depth``: metric depth of a set of cameras, as arrays and 16-bit PNGs.

For every camera NAME (``test_003`` for held-out view 3, ``train_010``, ``spiral_0005``) the
output folder gets (depths in the units of ``--frame``; see ``enerf.views``)::

    NAME.png            the rendered colour (8-bit RGB)
    NAME_depth.npy      [H, W] float32 depth along the ray (0: no surface, acc < 0.001)
    NAME_z.npy          [H, W] float32 depth along the optical axis (z-depth)
    NAME_depth.png      16-bit PNG of NAME_depth.npy: value = code x scale (code 0: no surface)
    NAME_depth.json     {"scale": ..., ...} for NAME_depth.png
    NAME_z.png, NAME_z.json   the same for the z-depth
    NAME_acc.npy        [H, W] float32 accumulated opacity
    NAME_normal.npy     [H, W, 3] float32 unit normals from the depth map (0: none)
    transforms.json     the cameras rendered, nerfstudio format (``enerf.data.nerfstudio`` reads it)

The files are written into a temporary folder beside ``--out`` and moved into it at the end: a
failed export leaves nothing behind.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import imageio.v3 as iio
import numpy as np

from ..config import DepthExportConfig
from ..data.transforms_writer import transforms_meta, write_transforms
from ..loaded_run import LoadedRun
from ..data.camera_paths import select_cameras
from ..data.output_frame import OutputFrame
from ..views import MIN_ACC, render_views

__all__ = ["quantize_depth", "export_depth", "StagedFolder"]

CODE_MAX = 65535


def quantize_depth(depth: np.ndarray) -> tuple[np.ndarray, float]:
    """16-bit codes of a depth map (0 where depth is 0): code = round(depth / scale), at least 1
    for a surface, scale = max depth / 65535 (1.0 for an empty map).

    Returns:
        codes: np.ndarray  # [H, W] uint16; code x scale is within scale / 2 of the depth
        scale: float
    """
    top = float(depth.max()) if depth.size else 0.0
    scale = top / CODE_MAX if top > 0 else 1.0
    codes = np.where(depth > 0, np.clip(np.rint(depth / scale), 1, CODE_MAX), 0).astype(np.uint16)
    return codes, scale


class StagedFolder:
    """Files written into a temporary folder beside ``target`` and moved into ``target`` (made if
    missing) by ``commit``; ``abort`` removes the temporary folder."""

    def __init__(self, target: Path) -> None:
        self.target = Path(target)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".tmp", dir=self.target.parent))

    def commit(self) -> None:
        self.target.mkdir(exist_ok=True)
        for path in sorted(self.tmp.iterdir()):
            os.replace(path, self.target / path.name)
        self.tmp.rmdir()

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _write_depth(folder: Path, stem: str, depth: np.ndarray, along: str, unit: str) -> None:
    codes, scale = quantize_depth(depth)
    np.save(folder / f"{stem}.npy", depth.astype(np.float32))
    iio.imwrite(folder / f"{stem}.png", codes, extension=".png")
    meta = {"scale": scale, "depth": along, "unit": unit, "png": f"{stem}.png", "npy": f"{stem}.npy",
            "zero": f"no surface (accumulated opacity below {MIN_ACC})",
            "decode": "depth = png_value * scale (exact to scale / 2)"}
    (folder / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")


def export_depth(run: LoadedRun, out_dir: str | Path, cfg: DepthExportConfig, progress: bool = True) -> dict:
    """Render ``cfg.cameras`` of a loaded run and write the files of the module docstring.

    Returns:
        dict: views, width, height, frame, out (folder), hit_fraction (pixels with a surface).
    """
    scene = run.scene
    cams = select_cameras(scene, cfg.cameras, cfg.frames, cfg.downscale, run.cfg.data.spherify)
    frame = OutputFrame(scene, cfg.frame)
    unit = "world units (the capture's frame)" if cfg.frame == "world" else "scene units (the normalised frame)"
    staged = StagedFolder(Path(out_dir))
    frames, hits = [], []
    try:
        for view in render_views(run, cams, normals=True, chunk=cfg.chunk, progress=progress, desc="export depth"):
            folder, name = staged.tmp, view.name
            iio.imwrite(folder / f"{name}.png", (view.rgb * 255.0 + 0.5).astype(np.uint8), extension=".png")
            _write_depth(folder, f"{name}_depth", view.ray_depth * frame.scale, "along the ray", unit)
            _write_depth(folder, f"{name}_z", view.z_depth * frame.scale, "along the optical axis (z)", unit)
            np.save(folder / f"{name}_acc.npy", view.acc)
            np.save(folder / f"{name}_normal.npy", frame.directions(view.normals).astype(np.float32))
            frames.append({"file_path": f"{name}.png", "transform_matrix": frame.pose(view.c2w)})
            hits.append(float(view.hit.mean()))
        camera = {"camera_model": "PINHOLE", "w": cams.width, "h": cams.height, "fl_x": cams.focal, "fl_y": cams.focal,
                  "cx": cams.width / 2.0, "cy": cams.height / 2.0,
                  "camera_angle_x": 2.0 * math.atan(0.5 * cams.width / cams.focal)}
        write_transforms(staged.tmp / "transforms.json", transforms_meta(camera, frames))
        staged.commit()
    except BaseException:
        staged.abort()
        raise
    return {"views": len(frames), "width": cams.width, "height": cams.height, "frame": cfg.frame, "out": str(out_dir),
            "hit_fraction": float(np.mean(hits)) if hits else 0.0}
