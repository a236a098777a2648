"""``enerf export splats``: bake a run's field into splats (``enerf.splats.bake``), or read a splat
file, clean and crop them (``enerf.splats.clean``), move them into the frame asked for
(``enerf.splats.frames``) and write them by the file's extension (``enerf.splats.files``).

``enerf export html``: a splat file into one self-contained page (``enerf.splats.html``), with, given
a run, its training and held-out cameras brought into the file's frame."""

from __future__ import annotations

import math
import time
from pathlib import Path

from torch import Tensor

from ..config import HtmlExportConfig, SplatConfig
from ..data.output_frame import OutputFrame
from ..data.scene import Scene
from ..errors import ConfigError
from ..loaded_run import LoadedRun
from .clean import crop_mask, drop_floaters
from .files import finite_splats, read_splat_file, read_splats_into_scene, splat_format, write_splat_file
from .frames import declared_frame, splats_from_scene
from .gaussians import Splats
from .html import write_html

__all__ = ["export_splats", "camera_records", "export_html"]


def _from_run(run: LoadedRun, cfg: SplatConfig, progress: bool) -> tuple[Splats, str, dict]:
    """The splats in ``run``'s scene frame (baked, or ``cfg.splats`` brought into it), cleaned of
    floaters (``cfg.min_contribution``), then in ``cfg.frame``: (splats, frame, {why: count removed,
    "report": the bake's ``BakeReport`` or None})."""
    removed, report = {}, None
    if cfg.splats:
        read, frame = read_splat_file(cfg.splats)
        read, removed["not finite"] = finite_splats(read)
        splats = read_splats_into_scene(cfg.splats, run.scene, read=(read, frame))[0]
    else:
        from .bake import bake  # the bake pulls in the rasterizer and its fitting loop: only for this command

        splats, report = bake(run, cfg, progress=progress)
    if cfg.min_contribution > 0:
        cameras = run.scene.cameras(run.scene.i_train)
        splats, removed["floaters"] = drop_floaters(splats.map(lambda t: t.to(run.device)), cameras, cfg.min_contribution)
    return splats_from_scene(splats.map(lambda t: t.cpu()), run.scene, cfg.frame), cfg.frame, {**removed, "report": report}


def export_splats(run: LoadedRun | None, out: str | Path, cfg: SplatConfig, progress: bool = True) -> dict:
    """Bake ``run`` (loaded with its images: the bake fits the training photos), or read ``cfg.splats``;
    drop floaters (``cfg.min_contribution``, with a run) and what lies outside ``cfg.crop`` (in the
    frame written); write ``out`` by its extension (``enerf.splats.files``; atomically: nothing is
    written when a step fails).

    Returns:
        dict: out, count, sh_degree, frame, bytes (the file's size), seconds (bake and write), report
        (``enerf.splats.bake.BakeReport``, None without a bake), removed ({why: count}: not finite,
        floaters, crop; the steps taken)
    Raises:
        ConfigError: neither a run nor ``cfg.splats``; ``min_contribution`` without a run; a crop
            that keeps nothing; a frame ``out``'s format cannot record.
    """
    tic = time.perf_counter()
    if run is None and not cfg.splats:
        raise ConfigError("enerf export splats needs --ckpt (to bake the run) or --splats (a file to crop or convert)")
    if run is None and cfg.min_contribution > 0:
        raise ConfigError("min_contribution needs --ckpt: the run's training cameras judge the floaters",
                          fields=("min_contribution",))
    fmt = splat_format(out)  # an unknown extension: one line before the bake
    if run is not None:
        splats, frame, removed = _from_run(run, cfg, progress)
    else:
        read, frame = read_splat_file(cfg.splats)
        splats, not_finite = finite_splats(read)
        frame, removed = frame or "world", {"not finite": not_finite, "report": None}
    report = removed.pop("report")
    if cfg.crop:
        inside = crop_mask(splats.means, cfg.crop)
        if not bool(inside.any()):
            raise ConfigError(f"crop {' '.join(f'{v:g}' for v in cfg.crop)} keeps none of the {len(splats)} splats "
                              f"(their centres span {_span(splats.means)} in the {frame} frame)", fields=("crop",))
        splats, removed["crop"] = splats.select(inside), int((~inside).sum())
    size = write_splat_file(out, splats, frame)
    return {"out": str(out), "count": len(splats), "sh_degree": min(splats.degree, fmt.max_degree), "frame": frame, "bytes": size,
            "seconds": time.perf_counter() - tic, "report": report, "removed": removed}


def _span(means: Tensor) -> str:
    """``x0..x1 y0..y1 z0..z1`` of the centres ``means`` [N, 3]."""
    if len(means) == 0:
        return "nothing"
    return " ".join(f"{a:.3g}..{b:.3g}" for a, b in zip(means.amin(0).tolist(), means.amax(0).tolist()))


def camera_records(scene: Scene, frame: str) -> list[dict]:
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
    page's cameras are the run's (``camera_records``) in the frame the file declares (``world`` when
    it declares none, as ``enerf render --splats`` reads it), else the page's own default view.

    Returns:
        dict: ``write_html``'s (path, splats, splats_in, sh_degree, bytes), cameras (how many), frame,
        not_finite (the splats dropped for a parameter that is not finite)
    Raises:
        DataError: not a splat file (``enerf.splats.files``), or it declares a frame enerf does not know.
    """
    read, frame = read_splat_file(cfg.splats)
    splats, not_finite = finite_splats(read)
    cameras = None
    if run is not None:
        frame = declared_frame(frame, cfg.splats)
        cameras = camera_records(run.scene, frame)
    info = write_html(splats, Path(out), cfg.title or Path(cfg.splats).stem, cameras, cfg.max_splats, cfg.sh_degree)
    return {**info, "cameras": len(cameras or ()), "frame": frame, "not_finite": not_finite}
