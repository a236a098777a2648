"""Novel-view videos from a checkpoint (``enerf render``, the preview after training): the frames of a camera path
rendered chunk by chunk, from the field or the run's splats.

``enerf render --ckpt PATH`` writes ``rgb.mp4`` and ``depth.mp4`` (depth colour-mapped with
a matplotlib colormap; disparity for NDC scenes) and optionally every frame as PNG.

Memory: each frame's rays are rendered ``chunk`` at a time through ``render_rays_image`` (the
code path evaluation uses, so videos follow the checkpoint's renderer); network activations
are bounded by ``chunk x samples per ray`` whatever the resolution, and the per-frame
buffers (rays and outputs, about 80 bytes per pixel) are freed after each frame: frames are
streamed to ffmpeg, never held together.

The frames are encoded by ``enerf.export.mp4`` (even sizes, streamed); depth is coloured by
``enerf.export.depth_colors``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import imageio.v3 as iio
import numpy as np
from matplotlib import colormaps

from ..atomic import atomic_write_bytes
from ..config import VideoConfig
from ..cameras.path_file import read_camera_path
from ..data.camera_paths import camera_path, default_path, frame_focals, frame_size
from ..errors import ConfigError
from ..progress import progress_bar
from ..loaded_run import LoadedRun, load_run
from ..runfolder import check_output_dir, choose_splats, run_splats_path
from ..cameras.pinhole import Pinhole
from ..render.sources import ImageSource, field_source
from ..train.estimate import duration_text
from ..train.short_run import capped_frames
from .depth_colors import colorize, depth_range, depth_values
from .mp4 import Mp4Writer

__all__ = [
    "render_video",
    "render_video_from_checkpoint",
    "render_preview",
]

# What ``--video`` renders after training: a preview, short and small (``enerf render`` for more):
# 2 seconds, 40 frames at half the training size.
PREVIEW = {"frames": 40, "fps": 20, "downscale": 2}


def _png(image: np.ndarray) -> bytes:
    return iio.imwrite("<bytes>", image, extension=".png")


def render_video(
    run: LoadedRun, out_dir: Path, cfg: VideoConfig, progress: bool = True, source: ImageSource | None = None
) -> dict:
    """Render ``cfg.path`` with the run's fields and write rgb.mp4 / depth.mp4 (+ PNG frames).

    ``source``: where the frames come from (``enerf.render.sources``; baked splats:
    ``enerf.splats.source``); None: the run's fields and renderer, ``cfg.chunk`` rays at a time.

    Returns:
        dict with frames, width / height (rendered), video_width / video_height (encoded),
        and the paths written.
    """
    if cfg.colormap not in colormaps:  # the config checked downscale and fps; colormaps are matplotlib's
        raise ConfigError(f"colormap {cfg.colormap!r} is not a matplotlib colormap (try turbo, viridis, magma)", ("colormap",))
    scene = run.scene
    poses = camera_path(scene, cfg.path, cfg.frames, run.cfg.data.spherify)
    size = frame_size(scene, cfg.path)
    focals = frame_focals(scene, cfg.path, len(poses))  # a camera path file may change the field of view
    height, width = int(size[1]) // cfg.downscale, int(size[0]) // cfg.downscale
    if height < 1 or width < 1:
        raise ConfigError(f"downscale {cfg.downscale} leaves no pixels of the {size[0]}x{size[1]} frames", ("downscale",))
    if source is None:
        source = field_source(scene, run.fields, run.cfg.render, run.device, run.renderer,
                              cfg.chunk if cfg.chunk > 0 else run.cfg.render.chunk)
    lo, hi = depth_range(scene)
    out_dir = Path(out_dir)
    writers = {"rgb": Mp4Writer(out_dir / "rgb.mp4", cfg.fps, cfg.quality),
               "depth": Mp4Writer(out_dir / "depth.mp4", cfg.fps, cfg.quality)}
    bar = progress_bar(len(poses) * width * height, f"render {cfg.path}", progress, unit="ray")  # advanced per chunk
    try:
        for k, c2w in enumerate(poses):
            bar.set_postfix_str(f"frame {k + 1}/{len(poses)}", refresh=False)
            out = source(Pinhole(np.asarray(c2w, np.float32), width, height, focals[k] / cfg.downscale), bar)
            rgb = (out["rgb"].clamp(0.0, 1.0).numpy() * 255.0 + 0.5).astype(np.uint8)
            depth = colorize(depth_values(out, scene.use_ndc), lo, hi, cfg.colormap)
            writers["rgb"].write(rgb)
            writers["depth"].write(depth)
            if cfg.png:
                atomic_write_bytes(out_dir / "frames" / f"rgb_{k:04d}.png", _png(rgb))
                atomic_write_bytes(out_dir / "frames" / f"depth_{k:04d}.png", _png(depth))
        for writer in writers.values():
            writer.close()
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    finally:
        bar.close()
    video_w, video_h = writers["rgb"].size
    return {
        "path": cfg.path,
        "frames": len(poses),
        "width": width,
        "height": height,
        "video_width": video_w,
        "video_height": video_h,
        "depth_kind": "disparity" if scene.use_ndc else "depth",
        "depth_range": [lo, hi],
        "rgb": str(out_dir / "rgb.mp4"),
        "depth": str(out_dir / "depth.mp4"),
    }


def render_video_from_checkpoint(
    ckpt_path: str | Path, cfg: VideoConfig, data_root: Path, out_dir: str | Path | None = None,
    device_name: str | None = None, progress: bool = True, datadir: str | Path | None = None,
    splats: str | Path | None = None, field: bool = False, announce: Callable[[str], None] | None = None,
) -> dict:
    """``enerf render``: load the checkpoint, render, write into ``out_dir`` (default ``<run>/video_<path>``);
    ``datadir``: the scene folder instead of the recorded one (``enerf.loaded_run``); ``splats``: a 3DGS
    PLY rendered instead of the field (``enerf render --splats``; default folder ``<run>/video_<path>_splats``);
    without it the run's ``splats.ply`` when it has one, unless ``field`` (``enerf.runfolder.choose_splats``).
    ``announce`` gets the line that says which (before rendering). The dict's ``splats``: the file drawn
    (None: the field)."""
    if out_dir:
        check_output_dir(out_dir, "--out")
    if cfg.path.lower().endswith(".json"):
        read_camera_path(cfg.path)  # a missing or malformed file: one line before the checkpoint loads
    from ..splats.files import read_splat_file, read_splats_into_scene

    splat_file = read_splat_file(splats) if splats is not None else None  # no splat file: one line before the run loads
    run = load_run(ckpt_path, data_root, device_name, task="nerf", datadir=datadir, images=False)
    choice = choose_splats(splats, run.folder, field)
    if splat_file is None and choice.path is not None:
        splat_file = read_splat_file(choice.path)
    if announce is not None:
        announce(choice.describe())
    name = f"video_{Path(cfg.path).stem if cfg.path.lower().endswith('.json') else cfg.path}"
    target = Path(out_dir) if out_dir else run.folder / (name + ("_splats" if choice.path is not None else ""))
    check_output_dir(target, "--out")
    source = None
    if splat_file is not None:
        from ..splats.source import run_background, splat_source

        splats_in_scene = read_splats_into_scene(choice.path, run.scene, run.device, read=splat_file)[0]
        source = splat_source(splats_in_scene, run.scene, run_background(run.cfg.render))
    info = render_video(run, target, cfg, progress, source)
    return {**info, "source": "field" if choice.path is None else "splats",
            "splats": None if choice.path is None else str(choice.path)}


def run_splat_source(run: LoadedRun) -> ImageSource | None:
    """The splats a run ended in (``<run>/splats.ply``: ``enerf.runfolder.run_splats_path``) as an image
    source; None when it has none."""
    path = run_splats_path(run.folder)
    if path is None:
        return None
    from ..splats.files import read_splats_into_scene
    from ..splats.source import run_background, splat_source

    return splat_source(read_splats_into_scene(path, run.scene, run.device)[0], run.scene,
                        run_background(run.cfg.render))


def render_preview(ckpt_path: str | Path, path: str, data_root: Path, device_name: str | None = None,
                   progress: bool = True, cap: tuple[float, float] | None = None) -> dict:
    """``enerf train --video PATH``: after training, ``PREVIEW`` frames along ``path`` (``auto``:
    ``default_path``) into ``<run>/video_<path>/``, from the run's splats when it ended in them
    (``run_splat_source``); returns ``render_video``'s dict.

    ``cap``: (seconds the run trained, rays per second the final evaluation rendered): the frames
    that fit about that long (``enerf.train.short_run.capped_frames``; the video keeps its 2 seconds
    at a lower frame rate). A path whose frames are fixed (test, train, a camera path file) is
    rendered whole or not at all. When it is not rendered the dict holds only ``skipped``: the
    line that says why and how to make it; a cut preview has ``capped``: its full frame count.
    """
    run = load_run(ckpt_path, data_root, device_name, task="nerf", images=False)
    name = default_path(run.scene, run.cfg.field.contraction) if path == "auto" else path
    target = run.folder / f"video_{name}"
    check_output_dir(target, "--out")
    video = VideoConfig(path=name, **PREVIEW)
    source = run_splat_source(run)
    if source is not None:  # the run ended in splats: they draw a frame in a fraction of a second, no cap
        return {**render_video(run, target, video, progress, source), "source": "splats"}
    if cap is not None:
        n_path = len(camera_path(run.scene, name, video.frames, run.cfg.data.spherify))
        width, height, _ = frame_size(run.scene, name)
        size = (width // video.downscale, height // video.downscale)
        frames = capped_frames(cap[0], n_path, size[0] * size[1], cap[1])
        if frames < n_path and (frames == 0 or name in ("test", "train") or name.lower().endswith(".json")):
            seconds = n_path * size[0] * size[1] / cap[1]
            return {"skipped": f"{n_path} frames of {size[0]}x{size[1]} would take about {duration_text(seconds)}, the "
                               f"run trained {duration_text(cap[0])} (enerf render --ckpt {ckpt_path} --path {name} "
                               "makes it)"}
        if frames < n_path:
            video = dataclasses.replace(video, frames=frames, fps=max(1, round(video.fps * frames / n_path)))
            return {**render_video(run, target, video, progress), "capped": n_path}
    return render_video(run, target, video, progress)
