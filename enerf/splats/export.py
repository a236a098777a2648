"""``enerf export splats``: bake a run's field into splats (``enerf.splats.bake``), move them into the
frame asked for (``enerf.splats.frames``) and write them as a 3DGS PLY (``enerf.splats.ply``).

``enerf export html``: a splat file into one self-contained page (``enerf.splats.html``), with, given
a run, its training and held-out cameras brought into the file's frame."""

from __future__ import annotations

import math
import time
from pathlib import Path


from ..config import HtmlExportConfig, SplatConfig
from ..data.scene import Scene
from ..errors import DataError
from ..export.views import OutputFrame
from ..loaded_run import LoadedRun
from .frames import FRAMES, splats_from_scene
from .html import write_html
from .ply import read_splats, write_splats

__all__ = ["export_splats", "scene_cameras", "export_html"]


def export_splats(run: LoadedRun, out: str | Path, cfg: SplatConfig, progress: bool = True) -> dict:
    """Bake ``run`` (loaded with its images: the bake fits the training photos) and write ``out``
    (atomically: nothing is written when the bake fails).

    Returns:
        dict: out, count, sh_degree, frame, bytes (the file's size), seconds (bake and write), report
        (``enerf.splats.bake.BakeReport``).
    """
    from .bake import bake  # the bake pulls in the rasterizer and its fitting loop: only for this command

    tic = time.perf_counter()
    splats, report = bake(run, cfg, progress=progress)
    size = write_splats(out, splats_from_scene(splats, run.scene, cfg.frame), cfg.frame)
    return {"out": str(out), "count": len(splats), "sh_degree": splats.degree, "frame": cfg.frame, "bytes": size,
            "seconds": time.perf_counter() - tic, "report": report}


def scene_cameras(scene: Scene, frame: str) -> list[dict]:
    """The scene's training cameras, then its held-out ones (each view once), as ``write_html`` takes
    them: ``c2w`` [4, 4] (OpenGL axes, unit rotation columns) in ``frame`` (``OutputFrame.pose`` of
    the scene-space pose), ``fov_y`` = 2 atan(height / (2 focal)) in degrees, ``width``, ``height``."""
    to_frame = OutputFrame(scene, frame)
    fov_y = math.degrees(2.0 * math.atan(0.5 * scene.height / scene.focal))
    views = list(dict.fromkeys([int(i) for i in scene.i_train] + [int(i) for i in scene.i_test]))
    return [{"c2w": to_frame.pose(scene.poses[i]), "fov_y": fov_y, "width": int(scene.width),
             "height": int(scene.height)} for i in views]


def export_html(cfg: HtmlExportConfig, out: str | Path, run: LoadedRun | None = None) -> dict:
    """Write the page of the splat file ``cfg.splats`` to ``out`` (atomically); with ``run``, the
    page's cameras are the run's (``scene_cameras``) in the frame the file declares (``world`` when
    it declares none, as ``enerf render --splats`` reads it), else the page's own default view.

    Returns:
        dict: ``write_html``'s (path, splats, splats_in, sh_degree, bytes), cameras (how many), frame
    Raises:
        DataError: the file is no 3DGS PLY, or declares a frame enerf does not know.
    """
    splats, frame = read_splats(cfg.splats)
    cameras = None
    if run is not None:
        frame = frame or "world"
        if frame not in FRAMES:
            raise DataError(f"{cfg.splats}: declares frame {frame!r}; enerf knows {', '.join(FRAMES)}")
        cameras = scene_cameras(run.scene, frame)
    info = write_html(splats, Path(out), cfg.title or Path(cfg.splats).stem, cameras, cfg.max_splats, cfg.sh_degree)
    return {**info, "cameras": len(cameras or ()), "frame": frame}
