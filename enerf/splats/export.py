"""``enerf export splats``: bake a run's field into splats (``enerf.splats.bake``), move them into the
frame asked for (``enerf.splats.frames``) and write them as a 3DGS PLY (``enerf.splats.ply``)."""

from __future__ import annotations

import time
from pathlib import Path

from ..config import SplatConfig
from ..loaded_run import LoadedRun
from .frames import splats_from_scene
from .ply import write_splats

__all__ = ["export_splats"]


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
